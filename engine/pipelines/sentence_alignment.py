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

from dataclasses import dataclass

import numpy as np

from engine.network.features import SAMPLE_RATE
from engine.text.alignment_check import alignment_problem, fallback_note, widen_instant_words
from engine.text.prompt import ALIGNER_LANGUAGES
from engine.text.types import Segment
from engine.text.word_split import split_words
from engine.text.words import submit_alignment, words_from_alignment

MARGIN = 0.3          # seconds of audio added on each side of a sentence's place, at most
MIN_MARGIN = 0.15     # ... even where the neighbouring sentence is that close
GROUPINGS = ("sentence", "run", "run+retry")
GROUPING = "sentence"  # the default (tests/bench/timing_table.py --grouping measures the others)


def _clip(islands, a: float, b: float) -> list[tuple[float, float]]:
    return [(max(x, a), min(y, b)) for x, y in islands if y > a and x < b]


def aligner_limit_seconds(aligner) -> float:
    """The longest audio the aligner can time: its number of time classes times a class's length
    (config ``num_labels`` x ``timestamp_segment_ms``; 375 x 80 ms = 30 s for the shipped tiny one)."""
    config = aligner.config
    return float(config.num_labels or 0) * float(getattr(config, "timestamp_segment_ms", 80.0) or 80.0) / 1000.0


@dataclass
class _Pending:
    """One aligner request: the sentences it times (one, or a run of neighbours), the stretch it
    covers, and each sentence's own stretch (for its checks) and word count."""

    sentences: list[Segment]
    piece: Segment
    request: object
    islands: list                     # the VAD's speech inside each sentence's own stretch
    stretches: list[tuple[float, float]]
    retry: list | None = None         # samples and chunk start, to align a refused sentence alone


class SentenceAligner:
    """The aligner requests of one file's sentences, and what became of them.

    ``grouping``: "sentence" aligns each sentence over its own stretch; "run" aligns runs of
    neighbouring sentences of a chunk in one request (up to the aligner's limit) and checks each
    sentence's share; "run+retry" does that and aligns a sentence the checks refused alone."""

    def __init__(self, aligner, problems: list[str], *, grouping: str | None = None):
        self.aligner = aligner
        self.problems = problems          # failures to run (errors): shown in the words note
        self.grouping = grouping or GROUPING
        if self.grouping not in GROUPINGS:
            raise ValueError(f"grouping must be one of {GROUPINGS}, got {self.grouping!r}")
        self._pending: list[_Pending] = []
        self._refused: dict[int, str] = {}   # id(sentence) -> why its word times were not kept

    @property
    def busy(self) -> bool:
        return bool(self._pending)

    def cancel(self) -> None:
        for p in self._pending:
            p.request.cancel()
        self._pending = []

    def submit(self, sentences: list[Segment], samples: np.ndarray, chunk_start: float, islands) -> None:
        """Queue the alignments of a chunk's sentences; its audio is ``samples`` from ``chunk_start``."""
        chunk_end = chunk_start + len(samples) / SAMPLE_RATE
        stretches = []
        for i, sent in enumerate(sentences):
            before = sentences[i - 1].end if i else chunk_start - MARGIN
            after = sentences[i + 1].start if i + 1 < len(sentences) else chunk_end + MARGIN
            a = max(chunk_start, sent.start - min(MARGIN, max(MIN_MARGIN, (sent.start - before) / 2)))
            b = min(chunk_end, sent.end + min(MARGIN, max(MIN_MARGIN, (after - sent.end) / 2)))
            if len(sentences) == 1:      # a chunk of one sentence is its own stretch
                a, b = chunk_start, chunk_end
            stretches.append((a, b))
        runs = [[i] for i in range(len(sentences))]
        if self.grouping != "sentence" and len(sentences) > 1:
            limit = aligner_limit_seconds(self.aligner) - 2 * MARGIN
            runs = []
            for i, (a, b) in enumerate(stretches):
                if runs and b - stretches[runs[-1][0]][0] <= limit:
                    runs[-1].append(i)
                else:
                    runs.append([i])
        retry = [samples, chunk_start, islands] if self.grouping == "run+retry" else None
        for run in runs:
            self._submit_run([sentences[i] for i in run], [stretches[i] for i in run], samples, chunk_start,
                             islands, retry if len(run) > 1 else None)

    def _submit_run(self, sentences, stretches, samples, chunk_start, islands, retry) -> None:
        a, b = stretches[0][0], stretches[-1][1]
        lo, hi = int(round((a - chunk_start) * SAMPLE_RATE)), int(round((b - chunk_start) * SAMPLE_RATE))
        if hi - lo < SAMPLE_RATE // 10:
            return
        piece = Segment(start=lo / SAMPLE_RATE + chunk_start, end=hi / SAMPLE_RATE + chunk_start,
                        text=" ".join(s.text for s in sentences), language=sentences[0].language)
        req = submit_alignment(self.aligner, samples[lo:hi], piece, self.problems)
        if req is not None:
            self._pending.append(_Pending(sentences, piece, req, [_clip(islands, x, y) for x, y in stretches],
                                          stretches, retry))

    def _shares(self, p: _Pending, words) -> list[list] | None:
        """The run's aligned words cut into each sentence's words (None when the counts do not add up)."""
        if len(p.sentences) == 1:
            return [words]
        counts = []
        for sent in p.sentences:
            try:
                counts.append(len(split_words(sent.text, sent.language if sent.language in ALIGNER_LANGUAGES
                                              else None)))
            except ImportError:
                return None
        if sum(counts) != len(words):
            return None
        out, at = [], 0
        for n in counts:
            out.append(words[at:at + n])
            at += n
        return out

    def collect(self) -> None:
        """Take the finished alignments: plausible word times go onto their sentence, others are refused."""
        still = []
        for p in self._pending:
            if not p.request.answered:     # the aligner pushes its finished output
                still.append(p)
                continue
            words = words_from_alignment(self.aligner, p.request, p.piece, self.problems)
            if not words:
                continue
            step_ms = self.aligner.config.timestamp_segment_ms
            raw = [float(c) * step_ms for c in p.request.result] if step_ms and p.request.result else None
            shares = self._shares(p, words)
            if shares is None:    # a run whose words cannot be shared out: align its sentences one by one
                for sent, stretch in zip(p.sentences, p.stretches):
                    self._again(p, sent, stretch, still)
                continue
            at = 0
            for sent, share, islands, stretch in zip(p.sentences, shares, p.islands, p.stretches):
                mine = raw[2 * at:2 * (at + len(share))] if raw else None
                at += len(share)
                problem = alignment_problem(share, islands, mine) if share else "no words"
                if problem and p.retry is not None:
                    self._again(p, sent, stretch, still)
                    continue
                if problem:
                    self._refused[id(sent)] = problem
                    continue
                widen_instant_words(share, (step_ms or 80.0) / 1000.0)
                sent.words, sent.timing = share, "aligned"
                sent.start, sent.end = share[0].start, max(share[0].start, share[-1].end)
        self._pending = still

    def _again(self, p: _Pending, sent: Segment, stretch, still: list) -> None:
        """Align one sentence of a run alone (its share of the run was refused, or could not be cut)."""
        if p.retry is None:
            self._refused[id(sent)] = "its words could not be told apart from its neighbours'"
            return
        samples, chunk_start, islands = p.retry
        before = len(self._pending)
        self._submit_run([sent], [stretch], samples, chunk_start, islands, None)
        still.extend(self._pending[before:])
        del self._pending[before:]

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
