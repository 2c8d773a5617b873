"""A queued file: decoded block by block, cut into speech chunks, transcribed inside engine steps.

The job layer (engine.pipelines.jobs) calls ``advance()`` between engine steps, so
decoding a long file never blocks the step loop for long, and only the chunks in flight
hold samples: a two-hour file does not need all its samples in memory at once. A queued
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
                 block_seconds: float = 30.0, samples: np.ndarray | None = None, speakers=None):
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
        self.state = "queued"
        self.duration: float | None = None
        self.transcript = None
        self.error: str | None = None
        self.started_at: float | None = None
        self.retry_gate: int | None = None   # after a process-wide failure: start once the engine's
        #                                      count of finished jobs passes this
        self.notes: list[str] = []             # for the transcript: track used, level fixed, repetition cut
        self.audio_track: int | None = None    # 1-based, when the file has several audio tracks
        self._blocks = None
        self._chunker = None
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

    def cancel(self) -> None:
        if self.finished:
            return
        for *_, req in self._inflight:
            self.port.abort_request(req)
        if self._align:
            self._align.cancel()
        self._close_blocks()
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
            if not self._done_decoding and wants_chunks:
                self._decode_one_block()
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
        self._close_blocks()
        self.error, self.state = message, "failed"

    def requeue(self, gate: int) -> None:
        """Back to the queue as a path, holding nothing; it starts afresh after another job finishes."""
        for *_, req in self._inflight:
            self.port.abort_request(req)
        if self._align:
            self._align.cancel()
        self._close_blocks()
        self._blocks = self._chunker = None
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
        from engine.audio.decode import audio_info, stream_audio

        self.state, self.started_at = "running", time.monotonic()
        self.max_chunk_seconds = self._asked_chunk_seconds
        fitting = chunk_seconds_for_cache(self.port, self.max_chunk_seconds)
        if fitting < self.max_chunk_seconds:
            self.notes.append(f"chunks were cut to at most {fitting:g} s (not {self.max_chunk_seconds:g} s) so "
                              f"that the KV cache can hold them; raise the KV cache budget (--kv-cache-mb, or "
                              f"the app's Settings) for longer chunks")
            self.max_chunk_seconds = fitting
        if self._samples is not None:
            arr, step = self._samples, int(self.block_seconds * SAMPLE_RATE)
            self.duration = len(arr) / SAMPLE_RATE
            self._blocks = iter([arr[i:i + step] for i in range(0, len(arr), step)])
        else:
            info = audio_info(self.source)
            self.duration = info.duration
            self.audio_track = info.track if info.tracks > 1 else None
            self._blocks = iter(stream_audio(self.source, block_seconds=self.block_seconds, notes=self.notes))
        if self.use_vad:
            from engine.audio.vad import SpeechDetector
            from engine.audio.vad_stream import StreamingChunker

            self._chunker = StreamingChunker(SpeechDetector.shared(), max_chunk_s=self.max_chunk_seconds)
        else:
            self._pending_audio = []

    def _decode_one_block(self) -> None:
        block = next(self._blocks, None)
        if block is None:
            self._done_decoding = True
            self._close_blocks()
            if self._decoded == 0:
                raise ValueError(f"{self.source}: contains no audio samples")
            header, self.duration = self.duration, self._decoded / SAMPLE_RATE
            if self._samples is None and header and header - self.duration > max(1.0, 0.05 * header):
                # the file shrank while it was read (or its header promises more than it holds)
                self.notes.append(f"the file ended at {self.duration:.1f} s although its header says "
                                  f"{header:.1f} s: it was truncated (or changed while being read); "
                                  f"the transcript covers what could be read")
            chunks = self._chunker.finish() if self._chunker else self._quiet_point_chunks()
        else:
            self._decoded += len(block)
            if self._chunker:
                chunks = self._chunker.push(block)
            else:
                self._pending_audio.append(block)
                chunks = []
        for chunk, samples in chunks:
            if self.diarizer is not None:
                t0 = time.perf_counter()
                self.diarizer.add_chunk(samples, chunk.start, chunk.end, self._chunker)
                self.diarize_seconds += time.perf_counter() - t0
            self._submit_chunk(chunk.start, chunk.end, samples, chunk.speech)

    def _quiet_point_chunks(self):
        from engine.audio.chunking import split_at_quiet_points
        from engine.audio.vad import Chunk

        audio = np.concatenate(self._pending_audio) if self._pending_audio else np.zeros(0, np.float32)
        self._pending_audio = []
        return [(Chunk(a, b), audio[a:b]) for a, b in split_at_quiet_points(audio, self.max_chunk_seconds)]

    def _submit_chunk(self, start: int, end: int, samples: np.ndarray, speech=()) -> None:
        req = self.port.add_request(self.port.make_request(samples, language=self.language, context=self.context,
                                                           priority=self.priority), self._on_output)
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
        self._chunker = None
        release_freed_memory()    # else the heap grows with the number of files (engine/serving/heap.py)

    def _close_blocks(self) -> None:
        if self._blocks is not None and hasattr(self._blocks, "close"):   # a decoder generator, not a list iterator
            self._blocks.close()
        self._blocks = iter(())


def array_job(engine: EnginePort, samples: np.ndarray, name: str = "<array>", **kwargs) -> FileJob:
    """A FileJob over samples already in memory (float32 mono 16 kHz)."""
    return FileJob(engine, name, samples=samples, **kwargs)
