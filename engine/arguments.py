"""The numeric argument rules (engine.pipelines.argument_rules), for the CLI, the app and the server.

    from engine.arguments import MAX_CHUNK_SECONDS
    MAX_CHUNK_SECONDS.check_flag(args.max_chunk_seconds)   # ValueError naming --max-chunk-seconds
"""
from engine.pipelines.argument_rules import (  # noqa: F401  (re-exported)
    KV_CACHE_MB,
    LIVE_FONT_SIZE,
    MAX_CHUNK_SECONDS,
    MAX_CHUNK_SECONDS_LIMIT,
    MAX_DURATION,
    MAX_LINE_CHARS,
    MAX_LINES,
    MAX_NEW_TOKENS,
    MAX_UTTERANCE_SECONDS,
    MIN_CHUNK_SECONDS,
    MIN_DURATION,
    MIN_GAP,
    PARALLEL_FILES,
    PRIORITY,
    SERVE_FLAG_RULES,
    SERVER_RULES,
    SETTING_RULES,
    NumberRule,
)

CLI_RULES = (MAX_CHUNK_SECONDS, KV_CACHE_MB, MAX_LINE_CHARS, MAX_LINES, MIN_DURATION, MAX_DURATION, MIN_GAP)


def check_cli_numbers(args) -> dict:
    """The numeric flags of a parsed command line, checked; ValueError names the flag.
    Flags the parser does not have are skipped (subcommands differ; the cue flags arrive with
    the CLI's subtitle options). Returns {attribute: value or None}."""
    checked = {}
    for rule in CLI_RULES:
        attr = rule.flag.lstrip("-").replace("-", "_")
        if hasattr(args, attr):
            checked[attr] = rule.check_flag(getattr(args, attr))
    return checked


def check_serve_numbers(args) -> None:
    """The numeric flags of ``qwen3-asr serve``, checked before the model loads; ValueError names the flag."""
    for rule in SERVE_FLAG_RULES:
        attr = rule.flag.lstrip("-").replace("-", "_")
        rule.check_flag(getattr(args, attr, None))
