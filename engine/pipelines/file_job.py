"""A queued file: decoded block by block, cut into speech chunks, transcribed inside engine steps.

The job layer (engine.pipelines.jobs) calls ``advance()`` between engine steps. The file's
reader (engine.pipelines.file_reader) decodes it, cuts speech chunks and computes their
log-mel on a thread of its own, a few blocks ahead, so ``advance()`` only turns ready chunks
into requests and a step's time is model time; only the chunks read ahead or in flight hold
samples: a two-hour file does not need all its samples in memory at once. A queued
job holds only its path: the job layer starts it (opens the file) when the engine can take
its chunks (engine.pipelines.admission), and the file is closed once its chunks are cut.
A job uses the engine only through its port (engine.pipelines.port): it makes and adds
chunk requests, and the engine pushes each request's outputs back to the job.
"""
from __future__ import annotations

import copy
import errno
import itertools
import time

import numpy as np

from engine.network.config import audio_token_count
from engine.network.features import SAMPLE_RATE, num_frames
from engine.pipelines.port import EnginePort
from engine.pipelines.job_progress import ProgressMeter
from engine.serving.heap import release_freed_memory
from engine.serving.request import RequestOutput
from engine.text.types import Segment

_job_ids = itertools.count(1)
# Failures of the process, not of the file: another file finishing frees what they lack.
_PROCESS_LIMITS = {errno.EMFILE: "open files", errno.ENFILE: "open files", errno.ENOMEM: "memory"}


def process_limit(error: BaseException) -> str | None:
    """What the process ran out of ("open files", "memory") when ``error`` or its causes say so."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MemoryError):
            return "memory"
        if isinstance(error, OSError) and error.errno in _PROCESS_LIMITS:
            return _PROCESS_LIMITS[error.errno]
        error = error.__cause__ or error.__context__
    return None


class ProcessLimitReached(Exception):
    """A file job's advance hit a limit of the process (``limit``: "open files", "memory"), not of its
    file; the job layer sends the job back to the queue behind another file, or fails it."""

    def __init__(self, limit: str, error: BaseException):
        super().__init__(f"this process ran out of {limit} ({error})")
        self.limit, self.error = limit, error

    def message(self, source: str) -> str:
        return (f"{source}: not read: this process ran out of {self.limit} ({self.error}); "
                "the file itself may be fine")


# What a chunk needs in the KV cache besides its audio tokens: the prompt's text and the
# engine's default cap on its answer (engine.api.default_max_new_tokens: 48 + 15 per second).
_PROMPT_TOKENS, _ANSWER_TOKENS, _ANSWER_TOKENS_PER_S = 64, 48, 15


def chunk_cache_tokens(port: EnginePort, seconds: float) -> int:
    """KV cache slots a chunk of ``seconds`` may need: prompt, audio tokens, and its longest answer."""
    audio = audio_token_count(num_frames(int(seconds * SAMPLE_RATE)), port.config.encoder)
    return audio + _PROMPT_TOKENS + _ANSWER_TOKENS + int(_ANSWER_TOKENS_PER_S * seconds)


def chunk_seconds_for_cache(engine: EnginePort, wanted: float) -> float:
    """``wanted``, or the longest whole number of seconds (at least 1) whose chunk the engine's
    KV cache can hold; ValueError when not even a 1 s chunk fits."""
    capacity = engine.cache_tokens()
    if chunk_cache_tokens(engine, wanted) <= capacity:
        return wanted
    if chunk_cache_tokens(engine, 1.0) > capacity:
        raise ValueError(f"the KV cache holds {capacity} tokens, too few for even a 1 s chunk "
                         f"({chunk_cache_tokens(engine, 1.0)}); raise the KV cache budget (--kv-cache-mb)")
    lo, hi = 1, int(wanted)          # lo fits, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if chunk_cache_tokens(engine, mid) <= capacity else (lo, mid)
    return float(lo)


class FileJob:
    """One file in the engine's queue. Read ``state``, ``progress``, ``transcript``, ``error``."""

    def __init__(self, engine: EnginePort, source, *, language=None, context: str = "", word_timestamps: bool = False,
                 priority: int = 0, max_chunk_seconds: float | None = None, use_vad: bool = True,
                 block_seconds: float = 30.0, samples: np.ndarray | None = None, speakers=None,
                 read_ahead: int = 2, wake=None):
        from engine.text.prompt import language_name

        self.id = next(_job_ids)
        self.port = engine
        self.source = str(source)
        self.language = language_name(language)     # raises ValueError early for unknown languages
        self.context = context
        self.word_timestamps = word_timestamps
        self.priority = priority
        self.use_vad = use_vad
        # The same chunks with or without word timestamps: the aligner only times the recognised text.
        self.max_chunk_seconds = max_chunk_seconds or 30.0
        self._asked_chunk_seconds = self.max_chunk_seconds   # before a cut to fit the KV cache (_open)
        self.block_seconds = block_seconds
        self._samples = samples            # audio already in memory (float32 16 kHz), else decode source
        # blocks the reader thread may prepare ahead (0: read on the engine thread, between steps);
        # ``wake`` (a threading.Event) is set when a block is ready, for an idle engine to wait on
        self.read_ahead, self.wake = read_ahead, wake
        self.state = "queued"
        self.duration: float | None = None
        self.transcript = None
        self.error: str | None = None
        self.started_at: float | None = None
        self.retry_gate: int | None = None   # after a process-wide failure: start once the engine's
        #                                      count of finished jobs passes this
        self.notes: list[str] = []             # for the transcript: track used, level fixed, repetition cut
        self.audio_track: int | None = None    # 1-based, when the file has several audio tracks
        self._reader = None                # ThreadedReader or InlineReader, while the file is read
        self._decoded = 0                  # samples decoded so far
        self._done_decoding = False
        self._inflight: list[tuple] = []   # (start, end, samples, speech islands in seconds, request)
        self._answered: set[int] = set()   # ids of chunk requests whose last output the engine pushed
        self._align = None                 # SentenceAligner, once a chunk's sentences are being aligned
        self.words_problems: list[str] = []   # alignments that failed: the transcript keeps segment times
        self._segments: list[Segment] = []
        self._transcribed = 0              # samples of finished chunks
        self._progress = ProgressMeter()   # never goes backwards
        # speakers: None (not labelled), "auto" or a count; the diarizer loads its model here, so a
        # missing speaker model fails the submit, not the file
        from engine.pipelines.diarize import file_diarizer

        self.speakers = speakers
        self.diarizer = file_diarizer(engine, speakers) if speakers is not None else None
        self.diarize_seconds = 0.0

    # ------------------------------------------------------------------ public
    @property
    def progress(self) -> float:
        if self.state == "done":
            return 1.0
        if not self.duration:
            return 0.0
        # chunks in flight count by their decoded tokens (engine/pipelines/job_progress.py)
        in_flight = ((end - start, sum(b - a for a, b in islands), req)
                     for start, end, _, islands, req in self._inflight)
        return self._progress.value(self.duration * SAMPLE_RATE, self._decoded, self._transcribed, in_flight)

    @property
    def finished(self) -> bool:
        return self.state in ("done", "failed", "cancelled")

    @property
    def segments_done(self) -> int:
        """How many segments have been transcribed so far (cheap: for polling)."""
        return len(self._segments)

    def partial_segments(self) -> list[Segment]:
        """Copies of the segments transcribed so far, in time order, so a UI can show the
        transcript growing while the file runs; word times arrive later, with the aligner."""
        return [copy.copy(s) for s in sorted(self._segments, key=lambda s: s.start)]

    @property
    def busy(self) -> bool:
        """Whether the engine still has work for this file."""
        return not self.finished

    @property
    def segments(self) -> list[Segment]:
        """The segments transcribed so far, in the order their chunks finished (``transcript`` sorts them)."""
        return list(self._segments)

    @property
    def waiting(self) -> bool:
        """Queued and not started: holds its path only (no open file, no samples)."""
        return self.state == "queued"

    @property
    def decoding(self) -> bool:
        """Started and still reading its file (an open decoder)."""
        return self.state == "running" and not self._done_decoding

    @property
    def awaiting_audio(self) -> bool:
        """Started, and its reader has no block ready yet: nothing to submit until it has."""
        return self.decoding and self._reader is not None and self._reader.waiting

    def cancel(self) -> None:
        if self.finished:
            return
        for *_, req in self._inflight:
            self.port.abort_request(req)
        if self._align:
            self._align.cancel()
        self._stop_reading()
        self.state = "cancelled"

    # ------------------------------------------------------------ job layer side
    def advance(self, wants_chunks: bool = True) -> None:
        """Bounded work between two engine steps; failures fail this job alone.

        ``wants_chunks``: whether the engine takes more chunks now; if not, samples wait in the
        file, not in memory. Raises ProcessLimitReached when the process (not the file) ran out
        of something: the job layer decides whether to retry later (``requeue``) or ``fail``."""
        if self.finished:
            return
        try:
            if self.state == "queued":
                self._open()
            if self.duration is None:             # the reader thread has read the header
                self.duration, self.audio_track = self._reader.duration, self._reader.audio_track
            if not self._done_decoding and wants_chunks:
                self._take_one_block()
            self._collect()
            if self._done_decoding and not self._inflight and not (self._align and self._align.busy):
                self._finish()
        except Exception as e:  # a broken file fails alone; the queue goes on
            limit = process_limit(e)
            if limit is not None:
                raise ProcessLimitReached(limit, e) from e
            self.fail(str(e) if self.source in str(e) else f"{self.source}: {e}")

    def fail(self, message: str) -> None:
        for *_, req in self._inflight:
            self.port.abort_request(req)
        if self._align:
            self._align.cancel()
        self._stop_reading()
        self.error, self.state = message, "failed"

    def requeue(self, gate: int) -> None:
        """Back to the queue as a path, holding nothing; it starts afresh after another job finishes."""
        for *_, req in self._inflight:
            self.port.abort_request(req)
        if self._align:
            self._align.cancel()
        self._stop_reading()
        self._inflight, self._align, self._segments = [], None, []
        self._answered.clear()
        self._decoded = self._transcribed = 0
        if self.diarizer is not None:
            self.diarizer.reset()
        self._done_decoding = False
        self.notes.clear()
        self.words_problems.clear()
        self.duration = self.started_at = None
        self.state, self.retry_gate = "queued", gate

    def _open(self) -> None:
        from engine.pipelines.file_reader import ChunkMaker, InlineReader, ThreadedReader

        self.state, self.started_at = "running", time.monotonic()
        self.max_chunk_seconds = self._asked_chunk_seconds
        fitting = chunk_seconds_for_cache(self.port, self.max_chunk_seconds)
        if fitting < self.max_chunk_seconds:
            self.notes.append(f"chunks were cut to at most {fitting:g} s (not {self.max_chunk_seconds:g} s) so "
                              f"that the KV cache can hold them; raise the KV cache budget (--kv-cache-mb, or "
                              f"the app's Settings) for longer chunks")
            self.max_chunk_seconds = fitting
        maker = ChunkMaker(self.source, self._samples, block_seconds=self.block_seconds,
                           max_chunk_seconds=self.max_chunk_seconds, use_vad=self.use_vad,
                           keep_regions=self.diarizer is not None)
        if self.read_ahead:
            self._reader = ThreadedReader(maker, self.read_ahead, self.wake)
        else:
            self._reader = InlineReader(maker)
        self.duration, self.audio_track = self._reader.duration, self._reader.audio_track

    def _take_one_block(self) -> None:
        block = self._reader.take()
        if block is None:          # the reader is still at it: the engine steps on meanwhile
            return
        self.notes += block.notes
        self._decoded += block.decoded
        if block.last:
            self._done_decoding = True
            self.duration = block.duration
            self._reader = None    # the file is closed; the reader's buffers go
        for chunk in block.chunks:
            if self.diarizer is not None:
                t0 = time.perf_counter()
                self.diarizer.add_chunk(chunk.samples, chunk.start, chunk.end, chunk)   # its VAD regions
                self.diarize_seconds += time.perf_counter() - t0
            self._submit_chunk(chunk.start, chunk.end, chunk.samples, chunk.speech, chunk.features)

    def _submit_chunk(self, start: int, end: int, samples: np.ndarray, speech=(), features=None) -> None:
        req = self.port.add_request(self.port.make_request(samples, language=self.language, context=self.context,
                                                           priority=self.priority, features=features),
                                    self._on_output)
        islands = [(a / SAMPLE_RATE, b / SAMPLE_RATE) for a, b in speech] or [(start / SAMPLE_RATE, end / SAMPLE_RATE)]
        self._inflight.append((start, end, samples if self.word_timestamps else None, islands, req))

    def _on_output(self, output: RequestOutput) -> None:
        """The engine's push for one of this job's chunk requests (taken in order by ``_collect``)."""
        if output.finished:
            self._answered.add(output.request.id)

    def _collect(self) -> None:
        from engine.text.placement import place_sentences

        still = []
        for start, end, samples, islands, req in self._inflight:
            if req.id not in self._answered:
                still.append((start, end, samples, islands, req))
                continue
            self._answered.discard(req.id)
            if req.error:
                raise RuntimeError(req.error)
            self._transcribed += end - start
            if req.finish_reason == "repetition":
                self.notes.append(f"the model kept repeating itself at {start / SAMPLE_RATE:.1f}-"
                                  f"{end / SAMPLE_RATE:.1f} s; that part was cut short")
            language, text = self.port.decode(req)
            if not text:
                continue
            chunk = Segment(start=start / SAMPLE_RATE, end=end / SAMPLE_RATE, text=text, language=language)
            sentences = place_sentences(chunk, islands)      # estimated times, on the chunk's speech
            self._segments += sentences
            if self.word_timestamps and self.port.aligner is not None:
                if self._align is None:
                    from engine.pipelines.sentence_alignment import SentenceAligner

                    self._align = SentenceAligner(self.port.aligner, self.words_problems)
                self._align.submit(sentences, samples, chunk.start, islands)
        self._inflight = still
        if self._align:
            self._align.collect()

    def _finish(self) -> None:
        from engine.text.transcript import make_transcript
        from engine.text.words import words_note

        self._segments.sort(key=lambda s: s.start)
        if self._align:
            self.notes += self._align.notes(self._segments)
        note = words_note(self.port.aligner, self._segments, self.words_problems) if self.word_timestamps else ""
        self.transcript = make_transcript(self._segments, self.duration or 0.0, self.port.model_dir, note)
        self.transcript.notes, self.transcript.audio_track = list(self.notes), self.audio_track
        if self.diarizer is not None:
            t0 = time.perf_counter()
            self.diarizer.label(self.transcript)
            self.diarize_seconds += time.perf_counter() - t0
        self.state = "done"
        self._reader = None
        release_freed_memory()    # else the heap grows with the number of files (engine/serving/heap.py)

    def _stop_reading(self) -> None:
        """Stop the reader (a reader thread closes the file itself, between two blocks)."""
        if self._reader is not None:
            self._reader.stop()
        self._reader = None


def array_job(engine: EnginePort, samples: np.ndarray, name: str = "<array>", **kwargs) -> FileJob:
    """A FileJob over samples already in memory (float32 mono 16 kHz)."""
    return FileJob(engine, name, samples=samples, **kwargs)
