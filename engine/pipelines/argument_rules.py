"""One rule per numeric argument, shared by the API, the CLI, the app's settings and the server.

A rule knows its bounds and the names the argument goes by (API keyword, CLI flag,
settings key), so every path refuses the same values with the same words, before any
model loads: ``MAX_CHUNK_SECONDS.check(0, "--max-chunk-seconds")`` raises
``ValueError("--max-chunk-seconds must be between 1 and 1200 seconds (got 0)")``.
Imports nothing from the project: the public face is ``engine.arguments``.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass


@dataclass(frozen=True)
class NumberRule:
    """The accepted range of one numeric argument (bounds included).

    ``integer`` refuses fractions; ``auto`` is the value that means "the default" where
    a setting cannot hold None (0 in settings.ini): ``check_setting`` passes it through."""

    name: str                    # the API keyword
    low: float
    high: float
    unit: str = ""
    integer: bool = False
    flag: str | None = None      # the CLI flag, when there is one
    setting: str | None = None   # the app's settings key, when there is one
    auto: float | None = None

    def _words(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        kind = "a whole number" if self.integer else "a number"
        return f"{kind} between {_show(self.low)} and {_show(self.high)}{unit}"

    def check(self, value, label: str | None = None):
        """``value`` as an int or float within the bounds, or ValueError naming ``label``
        (default: the API keyword). Refuses bools, strings, NaN and infinities."""
        label = label or self.name
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ValueError(f"{label} must be {self._words()} (got {value!r:.60})")
        if self.integer and not float(value).is_integer():
            raise ValueError(f"{label} must be {self._words()} (got {value!r})")
        if not math.isfinite(value) or not self.low <= value <= self.high:
            raise ValueError(f"{label} must be between {_show(self.low)} and {_show(self.high)}"
                             f"{' ' + self.unit if self.unit else ''} (got {_show(value)})")
        return int(value) if self.integer else float(value)

    def check_optional(self, value, label: str | None = None):
        """None stays None (the default); anything else as ``check``."""
        return None if value is None else self.check(value, label)

    def check_flag(self, value):
        """For the command line: None when the flag was not given, else ``check`` with the flag's name."""
        return self.check_optional(value, self.flag or self.name)

    def check_setting(self, value):
        """For a stored setting: ``auto`` passes; ValueError (the settings key named) otherwise out of range."""
        if self.auto is not None and not isinstance(value, bool) and isinstance(value, numbers.Real) \
                and value == self.auto:
            return type(self.auto)(value)
        label = self.setting or self.name
        try:
            return self.check(value, label)
        except ValueError:
            if self.auto is None:
                raise
            raise ValueError(f"{label} must be {_show(self.auto)} (automatic) or between {_show(self.low)} and "
                             f"{_show(self.high)}{' ' + self.unit if self.unit else ''} (got {_show(value)})") from None


def positive_seconds(value, name: str) -> float:
    """A duration that must be more than zero (no upper bound), as a float, or a ValueError naming it."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{name} must be more than 0 seconds, got {value!r}")
    return seconds


def _show(value) -> str:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


# Chunk lengths, on every path (file jobs with or without VAD, live utterances): below a second
# there is nothing to transcribe and a file becomes thousands of requests; 20 minutes is the
# longest audio Qwen3-ASR takes in one request. A KV cache that cannot hold the longest chunk
# cuts it shorter, with a note (engine.pipelines.file_job).
MIN_CHUNK_SECONDS, MAX_CHUNK_SECONDS_LIMIT = 1.0, 1200.0
MAX_CHUNK_SECONDS = NumberRule("max_chunk_seconds", MIN_CHUNK_SECONDS, MAX_CHUNK_SECONDS_LIMIT, "seconds",
                               flag="--max-chunk-seconds", setting="transcribe/max_chunk_seconds", auto=0)
MAX_UTTERANCE_SECONDS = NumberRule("max_utterance_s", MIN_CHUNK_SECONDS, MAX_CHUNK_SECONDS_LIMIT, "seconds")

# The KV cache budget in MiB: 16 MiB holds a few hundred tokens of the 0.6B model; 1 TiB is
# beyond any machine this runs on (the engine also refuses more than the device's memory).
KV_CACHE_MB = NumberRule("kv_cache_mb", 16, 1 << 20, "MiB", integer=True, flag="--kv-cache-mb",
                         setting="model/kv_cache_mb", auto=0)

MAX_NEW_TOKENS = NumberRule("max_new_tokens", 1, 1 << 20, integer=True)
PRIORITY = NumberRule("priority", -(1 << 31), (1 << 31) - 1, integer=True)

# The app's "Files at once": the engine's file admission (EngineConfig.max_decoding_files,
# set on the loaded engine by the app's worker).
PARALLEL_FILES = NumberRule("parallel_files", 1, 64, integer=True, setting="transcribe/parallel_files")
# App settings that the engine does not take, bounded as their controls are; the subtitle cue
# options also as CLI flags (checked by engine.arguments.check_cli_numbers where the parser has them).
LIVE_FONT_SIZE = NumberRule("font_size", 8, 72, "pt", integer=True, setting="live/font_size")
MAX_LINE_CHARS = NumberRule("max_line_chars", 10, 200, integer=True, flag="--max-line-chars",
                            setting="cues/max_line_chars")
MAX_LINES = NumberRule("max_lines", 1, 5, integer=True, flag="--max-lines", setting="cues/max_lines")
MIN_DURATION = NumberRule("min_duration", 0, 30, "seconds", flag="--min-cue-seconds", setting="cues/min_duration")
MAX_DURATION = NumberRule("max_duration", 0.1, 60, "seconds", flag="--max-cue-seconds",
                          setting="cues/max_duration")
MIN_GAP = NumberRule("min_gap", 0, 2, "seconds", flag="--cue-gap-seconds", setting="cues/min_gap")

# The transcription server's limits (qwen3-asr serve, server.settings.ServerSettings): each a
# positive bound; the upper ones only keep a typo (an extra zero or three) from meaning "no limit".
PORT = NumberRule("port", 1, 65535, integer=True, flag="--port")
MAX_UPLOAD_MB = NumberRule("max_upload_mb", 1, 1 << 20, "MiB", integer=True, flag="--max-upload-mb")
MAX_UPLOAD_BYTES = NumberRule("max_upload_bytes", 1, 1 << 40, "bytes", integer=True)
REQUEST_TIMEOUT_S = NumberRule("request_timeout_s", 0.01, 7 * 86400, "seconds", flag="--timeout")
MAX_QUEUED_FILES = NumberRule("max_queued_files", 1, 1 << 20, integer=True, flag="--max-queue")
DECODE_WORKERS = NumberRule("decode_workers", 1, 256, integer=True, flag="--decode-workers")
MAX_LIVE_SESSIONS = NumberRule("max_live_sessions", 1, 1 << 16, integer=True, flag="--max-live-sessions")
SHUTDOWN_GRACE_S = NumberRule("shutdown_grace_s", 0.01, 3600, "seconds")
SERVER_RULES = (PORT, MAX_UPLOAD_BYTES, REQUEST_TIMEOUT_S, MAX_QUEUED_FILES, DECODE_WORKERS, MAX_LIVE_SESSIONS,
                SHUTDOWN_GRACE_S)     # by ServerSettings' field names
SERVE_FLAG_RULES = (PORT, MAX_UPLOAD_MB, REQUEST_TIMEOUT_S, MAX_QUEUED_FILES, DECODE_WORKERS, MAX_LIVE_SESSIONS)

SETTING_RULES = {rule.setting: rule for rule in (MAX_CHUNK_SECONDS, KV_CACHE_MB, PARALLEL_FILES, LIVE_FONT_SIZE,
                                                 MAX_LINE_CHARS, MAX_LINES, MIN_DURATION, MAX_DURATION, MIN_GAP)}
