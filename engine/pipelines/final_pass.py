"""One utterance's final pass in a live stream: its request, then its text, then (optionally) word times.

The stream submits a final pass when an utterance ends and commits the passes in utterance
order; each is resolved here step by step: the request finishes, its text is decoded, word
alignment (when the engine has an aligner) runs as its own request, and the segment is ready.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.network.features import SAMPLE_RATE
from engine.serving.request import Request
from engine.text.types import Segment

# How much audio past an utterance's end (the VAD's, already padded by 0.1 s) an update may hold and
# still serve as its final pass. More trailing silence changes what a model says (0.5 s cost WER
# on the test model; 0.1 s did not). Never more than keeps a segment out of the next one's padded
# start (live_stream.Stream._covering_extra).
COVERING_EXTRA_S = 0.1


@dataclass(eq=False)
class FinalPass:
    """One utterance's final pass: samples ``[start, end)`` of the stream, transcribed with ``context``.

    ``request`` keeps the finished engine request (its ``token_ids``) so a caller
    can reproduce the transcription offline; ``segment`` is what was committed
    (None while pending, and for passes that produced no text). ``answered`` turns True
    when the engine pushes the request's finished output to the stream (``take``).
    """

    start: int
    end: int
    context: str
    request: Request
    heard_at: int                         # stream position (samples) when the end was detected
    preview: str = ""                     # the last tentative text, shown until the final commits
    samples: np.ndarray | None = None     # kept only until word alignment has run
    segment: Segment | None = None
    align: object = None
    answered: bool = False                # the engine pushed the request's finished output

    def take(self, output) -> None:
        """The engine's push (a RequestOutput) for this pass's request."""
        if output.finished:
            self.answered = True

    def resolve(self, engine) -> bool:
        """Advance this pass; True once it is ready to commit (or to drop: no text)."""
        request = self.request
        if not self.answered:
            return False
        if self.segment is None and self.align is None:
            if request.error:
                raise RuntimeError(request.error)
            request.audio_embeds = None          # a finished request is never recomputed: free the big part
            language, text = engine.decode(request)
            if not text:
                return True
            self.segment = Segment(start=self.start / SAMPLE_RATE, end=self.end / SAMPLE_RATE,
                                   text=text, language=language)
            if self.samples is not None:
                from engine.text.words import submit_alignment

                self.align = submit_alignment(engine.aligner, self.samples, self.segment)
        if self.align is not None:
            if not self.align.answered:       # pushed by the aligner
                return False
            if not self.align.error:            # without word times the text still commits
                from engine.text.words import words_from_alignment

                self.segment.words = words_from_alignment(engine.aligner, self.align, self.segment)
                if self.segment.words:
                    self.segment.timing = "aligned"
            self.align = None
        self.samples = None
        return True

    def cancel(self) -> None:
        self.request.cancel()
        if self.align is not None:
            self.align.cancel()


def covers(span: tuple[int, int], context: str, start: int, end: int, final_context: str, extra: int) -> bool:
    """Whether a pass over ``span`` with ``context`` is the final pass of the utterance ``[start, end)``
    with ``final_context``: the whole utterance and at most ``extra`` samples more (of silence: the
    utterance ended, it was not cut short), with the same context."""
    s, e = span
    return s == start and end <= e <= end + extra and context == final_context


def covering_update(last: tuple | None, start: int, end: int, context: str,
                    extra: int) -> tuple[Request, int] | None:
    """The last finished update of the utterance ``[start, end)``, and where its audio ends, when it
    can serve as the final pass (``covers``): it is the offline pass over ``[start, its end)``
    already done, and its text commits at once."""
    if last is None or extra <= 0:
        return None
    request, span, ctx = last
    if covers(span, ctx, start, end, context, extra) and request.finish_reason in ("stop", "length"):
        return request, span[1]
    return None
