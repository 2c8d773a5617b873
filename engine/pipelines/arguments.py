"""Checks of the public calls' arguments, made at the call.

A wrong argument must fail the call that passed it, with a ValueError naming the
argument, and never reach the step loop: there a bad ``priority`` used to raise in
every later ``step()`` and stall every other request with it.
"""
from __future__ import annotations

import math
import numbers

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
    if isinstance(priority, bool) or not isinstance(priority, numbers.Integral):
        raise ValueError(f"priority must be an int (higher runs first), got {priority!r}")
    return int(priority)


def check_max_new_tokens(max_new_tokens) -> int | None:
    if max_new_tokens is None:
        return None
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) \
            or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int of at least 1 or None, got {max_new_tokens!r}")
    return int(max_new_tokens)


def check_max_chunk_seconds(seconds) -> float | None:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real) \
            or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"max_chunk_seconds must be a number of seconds above 0 or None, got {seconds!r}")
    return float(seconds)


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
