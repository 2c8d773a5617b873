"""A stand-in for the engine contract, for fast widget tests.

Same surface as ``engine.load`` / ``Engine`` / ``FileJob`` / ``Stream``, but it
"transcribes" by naming the file, and each step advances progress by a fixed
amount so tests can watch jobs run, cancel them and fail them on purpose. Which
queued files start is decided by the engine's own file admission
(engine.pipelines.admission.FileAdmission: ``admission.max_decoding`` at once, in
queue order), as in the real engine; a fake file decodes until it is done.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.errors import CheckpointError
from engine.pipelines.admission import FileAdmission
from engine.text.types import Segment, Transcript, Word

SAMPLE_RATE = 16000


class FakeFileJob:
    def __init__(self, engine, source, language, context, word_timestamps, priority):
        self.engine = engine
        self.source = str(source)
        self.language = language
        self.context = context
        self.word_timestamps = word_timestamps
        self.priority = priority
        self.duration: float | None = None
        self.progress = 0.0
        self.state = "queued"
        self.transcript: Transcript | None = None
        self.error: str | None = None
        self.retry_gate = None          # as FileJob: never set here (no process-wide failures)

    @property
    def waiting(self) -> bool:
        return self.state == "queued"

    @property
    def decoding(self) -> bool:
        return self.state == "running"

    def cancel(self):
        if self.state in ("queued", "running"):
            self.state = "cancelled"

    @property
    def segments_done(self) -> int:
        return len(self.partial_segments())

    def partial_segments(self) -> list[Segment]:
        """As FileJob: the first segment is "transcribed" once half the file is done."""
        if self.state == "running" and self.progress >= 0.5:
            return [Segment(0.0, 1.5, f"Partly {Path(self.source).stem}.", [], self.language or "English")]
        return []

    def _advance(self):
        if self.state == "queued":
            if "corrupt" in Path(self.source).name or not Path(self.source).exists():
                self.state = "failed"
                self.error = f"{self.source}: is not an audio file, or its format is unsupported or corrupt"
                return
            self.state = "running"
            self.duration = 2.0
        self.progress = min(1.0, self.progress + self.engine.progress_per_step)
        if self.progress >= 1.0:
            name = Path(self.source).stem
            words = [Word("Fake", 0.1, 0.6), Word(f"{name}.", 0.7, 1.4)]
            seg = Segment(0.0, 1.5, f"Fake {name}.", words, self.language or "English")
            seg2 = Segment(1.5, 2.0, "Second segment.", [], self.language or "English")
            self.transcript = Transcript(text=f"Fake {name}. Second segment.",
                                         language=seg.language, duration=2.0,
                                         segments=[seg, seg2], model=self.engine.model_dir)
            self.state = "done"


class FakeStream:
    LAG_SECONDS = 0.0       # what lag_seconds reports (tests of the "behind by" label set it)

    def __init__(self, engine, language, context):
        self.engine = engine
        self.lag_seconds = self.LAG_SECONDS
        self.language = language
        self.committed: list[Segment] = []
        self.tentative = ""
        self.finished = False
        self._closing = False
        self._pending = 0
        self._fed = 0

    def feed(self, pcm: np.ndarray):
        self._pending += len(pcm)

    def close(self):
        self._closing = True

    def _advance(self):
        # Every full second of audio becomes one committed segment; the rest is tentative.
        while self._pending >= SAMPLE_RATE:
            start = self._fed / SAMPLE_RATE
            self.committed.append(Segment(start, start + 1.0, f"second {len(self.committed) + 1}"))
            if getattr(self, "label_speakers", False):
                self.committed[-1].speaker = f"S{2 - len(self.committed) % 2}"
            self._pending -= SAMPLE_RATE
            self._fed += SAMPLE_RATE
        self.tentative = "and more" if self._pending else ""
        if self._closing:
            if self._pending:
                start = self._fed / SAMPLE_RATE
                self.committed.append(Segment(start, start + self._pending / SAMPLE_RATE, "the end"))
                self._fed += self._pending
                self._pending = 0
            self.tentative = ""
            self.finished = True

    @property
    def busy(self):
        return not self.finished and (self._pending >= SAMPLE_RATE or self._closing
                                      or (self._pending and self.tentative == ""))


class FakeEngine:
    speaker_model = "fake-ge2e.pt"     # app.transcript.speaker_setup.prepare_speakers looks no further

    def __init__(self, model_dir, device, dtype, aligner=None):
        self.model_dir = str(model_dir)
        self.device = device or "cpu"
        self.dtype = dtype or "float32"
        self.aligner = aligner
        self.jobs: list[FakeFileJob] = []
        self.admission = FileAdmission(max_decoding=2)
        self.started_order: list[str] = []     # file names in the order admission started them
        self.most_running = 0                  # the most files running at once so far
        self.streams: list[FakeStream] = []
        self.progress_per_step = 0.25
        self.fail_next_step: Exception | None = None
        self.steps = 0
        self.alignments: list = []    # the engine's own StretchAlignmentJobs, stepped as the engine does
        self.default_chunk_seconds = 30.0

    def submit_stretch_alignment(self, source, start, end, text, *, language=None):
        """As Engine.submit_stretch_alignment: the real job, with the real aligner this fake was given."""
        from engine.pipelines.stretch_job import StretchAlignmentJob

        if self.aligner is None:
            raise ValueError("no forced aligner is loaded")
        job = StretchAlignmentJob(self.aligner, source, start, end, text, language)
        self.alignments.append(job)
        return job

    def submit_file(self, source, *, language=None, context="", word_timestamps=False, priority=0,
                    max_chunk_seconds=None):
        job = FakeFileJob(self, source, language, context, word_timestamps, priority)
        job.max_chunk_seconds = max_chunk_seconds
        self.jobs.append(job)
        return job

    def reorder_files(self, jobs):
        """As Engine.reorder_files: the given jobs take their current places in the given order."""
        from engine.pipelines.jobs import reordered

        self.jobs = reordered(self.jobs, jobs, key=id)

    def open_stream(self, *, language=None, context="", speakers=False):
        stream = FakeStream(self, language, context)
        stream.label_speakers = speakers        # alternating S1/S2, as if two people took turns
        self.streams.append(stream)
        return stream

    def has_work(self) -> bool:
        return (any(j.state in ("queued", "running") for j in self.jobs)
                or any(s.busy for s in self.streams) or any(a.busy for a in self.alignments))

    def step(self) -> list:
        self.steps += 1
        if self.fail_next_step is not None:
            exc, self.fail_next_step = self.fail_next_step, None
            raise exc
        started = self.admission.admit(self.jobs, True)     # the engine's policy, not the app's
        self.started_order += [Path(job.source).name for job in started]
        touched = [j for j in self.jobs if j.state == "running" or j in started]
        for job in touched:
            job._advance()       # a started one opens (or fails, if broken) and makes progress
        self.most_running = max(self.most_running, sum(j.state == "running" for j in self.jobs))
        for stream in self.streams:
            if stream.busy:
                stream._advance()
                touched.append(stream)
        for job in [a for a in self.alignments if a.busy]:   # as engine.pipelines.jobs.JobLayer.advance
            job.advance()
        if self.aligner is not None and self.aligner.has_work():
            self.aligner.step()
        return touched


def load(model_dir, device=None, dtype=None, *, aligner=None) -> FakeEngine:
    path = Path(model_dir)
    if not path.is_dir():
        raise CheckpointError(f"{model_dir}: no such model folder")
    return FakeEngine(model_dir, device, dtype, aligner)
