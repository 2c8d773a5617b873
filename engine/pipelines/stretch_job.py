"""Word times for one stretch of a recording whose text is known, as a job beside the engine's other work.

An edited transcript line gets new word times from the loaded aligner (engine.text.stretch_alignment
says how they are checked). Aligned by a blocking call on the engine's thread, one edit would stall
every file and live caption for as long as its audio takes to decode and align; as a job it costs them
nothing: the stretch is decoded (the file up to the stretch's end) and its speech detected on a thread
of its own, then the job layer submits the alignment to the aligner, which it steps beside the core,
and the next advance reads the answer. ``result`` is then what ``align_stretch`` gives for the same
stretch and text.
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

from engine.audio.stretch import read_stretch, speech_islands
from engine.network.features import SAMPLE_RATE
from engine.text.stretch_alignment import (
    StretchWords,
    aligner_failure,
    aligner_language,
    checked_stretch,
    stretch_problem,
)

_ids = itertools.count(1)


class StretchAlignmentJob:
    """One stretch (``start``..``end`` s of ``source``: a path, or the whole recording's samples) and
    its ``text``. Read ``state`` ("reading", "aligning", "done"), ``finished`` and ``result``
    (engine.text.stretch_alignment.StretchWords, once finished: words, or the problem why none)."""

    def __init__(self, aligner, source, start: float, end: float, text: str, language: str | None = None,
                 *, wake: threading.Event | None = None):
        self.id = next(_ids)
        self.aligner = aligner
        self.start, self.end, self.text, self.language = start, end, text, language
        self.result: StretchWords | None = None
        self._wake = wake                 # set when the audio is read, for an idle engine waiting on it
        self._samples: np.ndarray | None = None
        self._speech: list = []
        self._read_error: Exception | None = None
        self._pending = None              # the aligner's PendingAlignment, once submitted
        self._read_done = threading.Event()
        if isinstance(source, np.ndarray):
            lo, hi = int(start * SAMPLE_RATE), int(end * SAMPLE_RATE)
            self._reader = None
            self._read(lambda: np.asarray(source[lo:hi], np.float32))
        else:
            self._reader = threading.Thread(target=self._read, args=(lambda: read_stretch(source, start, end),),
                                            name=f"stretch-{self.id}", daemon=True)
            self._reader.start()

    @property
    def finished(self) -> bool:
        return self.result is not None

    @property
    def busy(self) -> bool:
        """Unfinished: the engine has work (reading, or an alignment to step)."""
        return self.result is None

    @property
    def awaiting_audio(self) -> bool:
        """Its audio is still being read: nothing for a step to do for it yet."""
        return self.result is None and not self._read_done.is_set()

    @property
    def state(self) -> str:
        if self.result is not None:
            return "done"
        return "aligning" if self._pending is not None else "reading"

    def cancel(self) -> None:
        """Stop: the result says the alignment was cancelled (its aligner request is dropped)."""
        if self.result is None:
            if self._pending is not None:
                self._pending.cancel()
            self.result = StretchWords(problem="the alignment was cancelled")

    def advance(self) -> None:
        """Between engine steps: submit the alignment once the audio is read, read the answer once it
        is there. Never raises: any failure becomes the result's problem."""
        if self.result is not None or not self._read_done.is_set():
            return
        try:
            if self._pending is None:
                self._submit()
            elif self._pending.finished:
                self._collect()
        except Exception as exc:         # a failed alignment never costs the edit
            self.result = aligner_failure(exc)

    def _read(self, read) -> None:
        try:
            samples = read()
            self._speech = speech_islands(samples, self.start)
            self._samples = samples
        except Exception as exc:         # unreadable now (moved, truncated, another format)
            self._read_error = exc
        finally:
            self._read_done.set()
            if self._wake is not None:
                self._wake.set()

    def _submit(self) -> None:
        if self._read_error is not None:
            self.result = StretchWords(problem=f"its audio could not be read: {self._read_error}")
            return
        problem = stretch_problem(self._samples, self.text, self.language)
        if problem:
            self.result = StretchWords(problem=problem)
            return
        self._pending = self.aligner.submit_text(self._samples, self.text,
                                                 language=aligner_language(self.language))
        if self._pending is None:
            self.result = StretchWords(problem="the text has no words to align")

    def _collect(self) -> None:
        aligned = self.aligner.aligned_words(self._pending)
        self.result = checked_stretch(self.aligner, aligned, self._samples, self.start, self.text, self._speech)
        self._samples = None
