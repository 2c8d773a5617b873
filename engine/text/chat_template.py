"""Rendering a checkpoint's chat template: bounded in time, and once per prompt shape.

A checkpoint's ``chat_template.jinja`` is code from the download. One with a huge
nested loop used to hang every request, since prompts were rendered per request
with no limit. Here every rendering runs under a time limit (a trace function
raises in the rendering thread once the limit has passed: jinja templates compile
to Python, so every loop iteration is seen), and the ASR prompt is rendered once per
shape (with or without context, per language) with a marker where the context goes;
a request only substitutes its context. The shapes without a language are rendered
when the engine loads, so a template that never finishes fails the load, clearly.
"""
from __future__ import annotations

import sys
import threading
import time
import weakref

from engine.errors import CheckpointError

TEMPLATE_SECONDS = 5.0
AUDIO_PAD = "<|audio_pad|>"
# Private-use characters: a tokenizer's template passes them through untouched.
CONTEXT_MARK = "\ue000context\ue001"
_PROBE_CONTEXT = "Probe: names, terms & <tags>."


class _OutOfTime(BaseException):
    """Raised inside the template by the tracer; BaseException, so no ``except Exception``
    in the template machinery swallows it."""


def bounded(render, seconds: float = TEMPLATE_SECONDS, what: str = "the chat template"):
    """``render()``, or CheckpointError when it runs longer than ``seconds``."""
    deadline = time.monotonic() + seconds
    calls = 0

    def tracer(frame, event, arg):
        nonlocal calls
        calls += 1
        if calls % 256 == 0 and time.monotonic() > deadline:
            raise _OutOfTime
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return render()
    except _OutOfTime:
        raise CheckpointError(f"{what} did not finish rendering a prompt within {seconds:g} s (a loop that "
                              f"never ends in chat_template.jinja?); fix or remove the template") from None
    finally:
        sys.settrace(previous)


def render_around_audio(tokenizer, messages: list[dict], **options) -> tuple[str, str] | None:
    """The checkpoint's chat template rendered for ``messages`` (one audio item), split at the
    audio placeholder; None when the tokenizer has no template or it renders no single placeholder.

    Raises:
        CheckpointError: the template did not finish within TEMPLATE_SECONDS.
    """
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        text = bounded(lambda: tokenizer.apply_chat_template(messages, tokenize=False, **options),
                       what=f"the chat template of {getattr(tokenizer, 'name_or_path', 'the checkpoint')}")
    except CheckpointError:
        raise
    except Exception:  # a template that cannot render this conversation: use the built-in format
        return None
    if not isinstance(text, str) or text.count(AUDIO_PAD) != 1:
        return None
    before, after = text.split(AUDIO_PAD)
    return before, after


def asr_messages(context: str, language: str | None, prefill_marker: str) -> list[dict]:
    """The conversation transformers' ``apply_transcription_request`` renders: a system turn only
    for a non-empty context, the forced language prefilled into the assistant turn."""
    messages = [{"role": "system", "content": [{"type": "text", "text": context}]}] if context else []
    messages.append({"role": "user", "content": [{"type": "audio"}]})
    prefill = f"language {language}{prefill_marker}" if language is not None else ""
    messages.append({"role": "assistant", "content": [{"type": "text", "text": prefill}]})
    return messages


class PromptShapes:
    """The rendered ASR prompt per shape (context or not, language) for one tokenizer."""

    def __init__(self, tokenizer, prefill_marker: str):
        self.tokenizer = tokenizer
        self.marker = prefill_marker
        self._lock = threading.Lock()
        self._shapes: dict[tuple[bool, str | None], object] = {}

    def parts(self, context: str, language: str | None) -> tuple[str, str] | None:
        """(before, after) the audio for this request, or None to use the built-in format."""
        shape = self._shape(bool(context), language)
        if shape == "per-request":   # a template that changes the context text: render this one
            return render_around_audio(self.tokenizer, asr_messages(context, language, self.marker),
                                       continue_final_message=True)
        if shape is None or not context:
            return shape
        before, after = shape
        return before.replace(CONTEXT_MARK, context), after.replace(CONTEXT_MARK, context)

    def _shape(self, has_context: bool, language: str | None):
        key = (has_context, language)
        with self._lock:
            if key not in self._shapes:
                self._shapes[key] = self._render(has_context, language)
            return self._shapes[key]

    def _render(self, has_context: bool, language: str | None):
        render = lambda context: render_around_audio(  # noqa: E731
            self.tokenizer, asr_messages(context, language, self.marker), continue_final_message=True)
        if not has_context:
            return render("")
        marked = render(CONTEXT_MARK)
        probe = render(_PROBE_CONTEXT)
        if probe is None:
            return None                  # no usable template for this shape: the built-in format
        if marked is None:
            return "per-request"
        if sum(p.count(CONTEXT_MARK) for p in marked) != 1 or \
                tuple(p.replace(CONTEXT_MARK, _PROBE_CONTEXT) for p in marked) != probe:
            return "per-request"
        return marked


_SHAPES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # tokenizer -> its PromptShapes


def prompt_shapes(tokenizer, prefill_marker: str) -> PromptShapes:
    """The tokenizer's PromptShapes, made once per tokenizer (kept here, not on the tokenizer)."""
    try:
        shapes = _SHAPES.get(tokenizer)
    except TypeError:            # a tokenizer that cannot be weakly referenced: render per request
        return PromptShapes(tokenizer, prefill_marker)
    if shapes is None:
        shapes = _SHAPES[tokenizer] = PromptShapes(tokenizer, prefill_marker)
    return shapes
