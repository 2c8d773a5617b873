"""Word times for a chunk's sentences: each sentence aligned over its own stretch of speech, then checked.

Recognition runs on VAD chunks of up to 30 s whether or not word times are wanted, so the words never
depend on the aligner. The chunk's sentences are first placed on its speech (engine.text.placement);
each sentence is then aligned over the audio of its place, widened a little into the pauses around it.
A short stretch with one sentence is what forced aligners do best (a small aligner that loses track
over 30 s of several sentences still times one sentence well), and a wrong time stays inside its
sentence. An alignment that fails the checks of engine.text.alignment_check leaves its sentence with
the estimated times, and the transcript gets a note naming the stretch.
"""
from __future__ import annotations

import numpy as np

from engine.network.features import SAMPLE_RATE
from engine.text.alignment_check import alignment_problem, fallback_note, widen_instant_words
from engine.text.types import Segment
from engine.text.words import submit_alignment, words_from_alignment

MARGIN = 0.3          # seconds of audio added on each side of a sentence's place, at most
MIN_MARGIN = 0.15     # ... even where the neighbouring sentence is that close


def _clip(islands, a: float, b: float) -> list[tuple[float, float]]:
    return [(max(x, a), min(y, b)) for x, y in islands if y > a and x < b]


class SentenceAligner:
    """The aligner requests of one file's sentences, and what became of them."""

    def __init__(self, aligner, problems: list[str]):
        self.aligner = aligner
        self.problems = problems          # failures to run (errors): shown in the words note
        self._pending: list[tuple[Segment, Segment, object, list]] = []
        self._refused: dict[int, str] = {}   # id(sentence) -> why its word times were not kept

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def cancel(self) -> None:
        for _, _, req, _ in self._pending:
            req.cancel()
        self._pending = []

    def submit(self, sentences: list[Segment], samples: np.ndarray, chunk_start: float, islands) -> None:
        """Queue one alignment per sentence of a chunk whose audio is ``samples`` from ``chunk_start``."""
        chunk_end = chunk_start + len(samples) / SAMPLE_RATE
        for i, sent in enumerate(sentences):
            before = sentences[i - 1].end if i else chunk_start - MARGIN
            after = sentences[i + 1].start if i + 1 < len(sentences) else chunk_end + MARGIN
            a = max(chunk_start, sent.start - min(MARGIN, max(MIN_MARGIN, (sent.start - before) / 2)))
            b = min(chunk_end, sent.end + min(MARGIN, max(MIN_MARGIN, (after - sent.end) / 2)))
            if len(sentences) == 1:      # a chunk of one sentence is its own stretch
                a, b = chunk_start, chunk_end
            lo, hi = int(round((a - chunk_start) * SAMPLE_RATE)), int(round((b - chunk_start) * SAMPLE_RATE))
            if hi - lo < SAMPLE_RATE // 10:
                continue
            piece = Segment(start=lo / SAMPLE_RATE + chunk_start, end=hi / SAMPLE_RATE + chunk_start,
                            text=sent.text, language=sent.language)
            req = submit_alignment(self.aligner, samples[lo:hi], piece, self.problems)
            if req is not None:
                self._pending.append((sent, piece, req, _clip(islands, piece.start, piece.end)))

    def collect(self) -> None:
        """Take the finished alignments: plausible word times go onto their sentence, others are refused."""
        still = []
        for sent, piece, req, islands in self._pending:
            if not req.finished:
                still.append((sent, piece, req, islands))
                continue
            words = words_from_alignment(self.aligner, req, piece, self.problems)
            if not words:
                continue
            step_ms = getattr(self.aligner.config, "timestamp_segment_ms", None)
            raw = [float(c) * step_ms for c in req.result] if step_ms and req.result else None
            problem = alignment_problem(words, islands, raw)
            if problem:
                self._refused[id(sent)] = problem
                continue
            widen_instant_words(words, (step_ms or 80.0) / 1000.0)
            sent.words, sent.timing = words, "aligned"
            sent.start, sent.end = words[0].start, max(words[0].start, words[-1].end)
        self._pending = still

    def notes(self, sentences: list[Segment]) -> list[str]:
        """One note per run of neighbouring sentences whose word times were refused (time order)."""
        out, run = [], []
        for sent in sorted(sentences, key=lambda s: s.start) + [None]:
            if sent is not None and id(sent) in self._refused:
                run.append(sent)
                continue
            if run:
                problem = self._refused[id(run[0])]
                if len(run) > 1:
                    problem += f", and {len(run) - 1} more sentence{'s' if len(run) > 2 else ''} there"
                out.append(fallback_note(run[0].start, run[-1].end, problem))
                run = []
        return out
