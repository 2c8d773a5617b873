"""Checks of the public calls' arguments, made at the call.

A wrong argument must fail the call that passed it, with a ValueError naming the
argument, and never reach the step loop: there a bad ``priority`` used to raise in
every later ``step()`` and stall every other request with it.
"""
from __future__ import annotations

from engine.pipelines.argument_rules import MAX_CHUNK_SECONDS, MAX_NEW_TOKENS, PRIORITY
from engine.text.prompt import language_name


def check_language(language):
    """The canonical language name, or None; ValueError names the argument."""
    if language is not None and not isinstance(language, str):
        raise ValueError(f"language must be a language name or code (str) or None, got {language!r}")
    return language_name(language)


def check_context(context) -> str:
    if not isinstance(context, str):
        raise ValueError(f"context must be a string, got {type(context).__name__}: {context!r:.80}")
    return context


def check_priority(priority) -> int:
    """Higher runs first (argument_rules.PRIORITY)."""
    return PRIORITY.check(priority)


def check_max_new_tokens(max_new_tokens) -> int | None:
    return MAX_NEW_TOKENS.check_optional(max_new_tokens)


def check_max_chunk_seconds(seconds) -> float | None:
    """None (the default) or seconds within argument_rules.MAX_CHUNK_SECONDS: one lower bound
    for every chunking path (VAD, quiet points, live)."""
    return MAX_CHUNK_SECONDS.check_optional(seconds)


def check_flag(value, name: str) -> bool:
    if not isinstance(value, (bool, int)) or isinstance(value, float):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_progress(progress):
    if progress is not None and not callable(progress):
        raise ValueError(f"progress must be a function of the fraction done, or None, got {progress!r}")
    return progress


def check_request_options(*, language=None, context="", priority=0, max_new_tokens=None) -> dict:
    """The options every request-building call shares, checked; returns them normalised."""
    return dict(language=check_language(language), context=check_context(context),
                priority=check_priority(priority), max_new_tokens=check_max_new_tokens(max_new_tokens))
