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


@dataclass(eq=False)
class FinalPass:
    """One utterance's final pass: samples ``[start, end)`` of the stream, transcribed with ``context``.

    ``request`` keeps the finished engine request (its ``token_ids``) so a caller
    can reproduce the transcription offline; ``segment`` is what was committed
    (None while pending, and for passes that produced no text).
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

    def resolve(self, engine) -> bool:
        """Advance this pass; True once it is ready to commit (or to drop: no text)."""
        request = self.request
        if not request.finished:
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
            if not self.align.finished:
                return False
            if not self.align.error:            # without word times the text still commits
                from engine.text.words import words_from_alignment

                self.segment.words = words_from_alignment(engine.aligner, self.align, self.segment)
            self.align = None
        self.samples = None
        return True

    def cancel(self) -> None:
        self.request.cancel()
        if self.align is not None:
            self.align.cancel()
