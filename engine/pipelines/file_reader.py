"""A file job's reading: decode the file block by block, cut speech chunks (VAD) and compute
their log-mel features, so that the engine thread only turns ready chunks into requests.

``ChunkMaker`` does the reading one block at a time. ``ThreadedReader`` runs it on a thread
of its own, a few blocks ahead of the job (a bounded queue, so a three-hour file is never
in memory), and ``InlineReader`` runs it on the caller's thread between engine steps
(``EngineConfig.file_read_ahead=0``: the same chunks, for tests and comparisons).

One thread per started file rather than one shared reader: admission already bounds the
started files (``max_decoding``), a file's thread ends with its file, and one slow file
(a network share, a long FFmpeg seek) cannot hold back the chunks of the others.

The reader's torch work (Silero VAD, log-mel) keeps torch's thread count. ``torch.set_num_threads``
cannot lower it for one thread (it sets MKL's count for the whole process); lowering only this
thread's OpenMP count made the reader the bottleneck of a small model's file and did not make the
model's steps measurably faster (tests/bench/RESULTS.md, "File reading off the engine thread").
"""
from __future__ import annotations

import atexit
import queue
import threading
from dataclasses import dataclass, field

import numpy as np

from engine.network.features import SAMPLE_RATE, log_mel
from engine.network.openmp_team import release_team


@dataclass
class ReadyChunk:
    """A chunk ``[start, end)`` (file samples) ready to become a request."""

    start: int
    end: int
    samples: np.ndarray
    speech: tuple = ()                  # VAD speech ranges inside it (sample indices)
    features: object = None             # its log-mel (torch [mels, frames]), made off the engine thread
    regions: tuple | None = None        # closed VAD regions that reach into it, for the diarizer


@dataclass
class ReadBlock:
    """What one decoded block gave: its chunks, its samples count and the decoder's notes."""

    chunks: list[ReadyChunk]
    decoded: int                        # samples in this block
    notes: list[str] = field(default_factory=list)
    last: bool = False                  # the end of the audio: the file is closed
    duration: float | None = None       # with ``last``: the length actually read, in seconds


class ChunkMaker:
    """Reads ``source`` (a path) or ``samples`` (float32 16 kHz) one block per ``read_block()``."""

    def __init__(self, source: str, samples: np.ndarray | None, *, block_seconds: float, max_chunk_seconds: float,
                 use_vad: bool, keep_regions: bool):
        self.source, self._samples = source, samples
        self.block_seconds, self.max_chunk_seconds = block_seconds, max_chunk_seconds
        self.use_vad, self.keep_regions = use_vad, keep_regions
        self.duration: float | None = None          # from the header, once opened
        self.audio_track: int | None = None
        self._notes: list[str] = []                 # the decoder appends here while it reads
        self._blocks = None
        self._chunker = None
        self._pending_audio: list[np.ndarray] = []
        self._decoded = 0

    def open(self) -> None:
        from engine.audio.decode import audio_info, stream_audio

        if self._samples is not None:
            arr, step = self._samples, int(self.block_seconds * SAMPLE_RATE)
            self.duration = len(arr) / SAMPLE_RATE
            self._blocks = iter([arr[i:i + step] for i in range(0, len(arr), step)])
        else:
            info = audio_info(self.source)
            self.duration, self.audio_track = info.duration, (info.track if info.tracks > 1 else None)
            self._blocks = iter(stream_audio(self.source, block_seconds=self.block_seconds, notes=self._notes))
        if self.use_vad:
            from engine.audio.vad import SpeechDetector
            from engine.audio.vad_stream import StreamingChunker

            self._chunker = StreamingChunker(SpeechDetector.shared(), max_chunk_s=self.max_chunk_seconds)

    def read_block(self) -> ReadBlock:
        """The next block's chunks; the one after the audio ends has ``last`` set (and closes the file)."""
        block = next(self._blocks, None)
        if block is None:
            self.close()
            if self._decoded == 0:
                raise ValueError(f"{self.source}: contains no audio samples")
            header, self.duration = self.duration, self._decoded / SAMPLE_RATE
            if self._samples is None and header and header - self.duration > max(1.0, 0.05 * header):
                # the file shrank while it was read (or its header promises more than it holds)
                self._notes.append(f"the file ended at {self.duration:.1f} s although its header says "
                                   f"{header:.1f} s: it was truncated (or changed while being read); "
                                   f"the transcript covers what could be read")
            cut = self._chunker.finish() if self._chunker else self._quiet_point_chunks()
            return ReadBlock(self._ready(cut), 0, self._take_notes(), last=True, duration=self.duration)
        self._decoded += len(block)
        if self._chunker:
            cut = self._chunker.push(block)
        else:
            self._pending_audio.append(block)
            cut = []
        return ReadBlock(self._ready(cut), len(block), self._take_notes())

    def close(self) -> None:
        """Close the decoder (its file); call it on the thread that reads."""
        if self._blocks is not None and hasattr(self._blocks, "close"):   # a decoder generator, not a list iterator
            self._blocks.close()
        self._blocks = iter(())

    def _take_notes(self) -> list[str]:
        notes = list(self._notes)
        self._notes.clear()          # in place: the decoder holds this list
        return notes

    def _ready(self, cut) -> list[ReadyChunk]:
        ready = []
        for chunk, samples in cut:
            regions = None
            if self.keep_regions and self._chunker is not None:
                # regions ending before the chunk can neither overlap it nor be the last one it sees
                regions = tuple(r for r in self._chunker.regions if r[1] > chunk.start)
            ready.append(ReadyChunk(chunk.start, chunk.end, samples, chunk.speech, log_mel(samples), regions))
        return ready

    def _quiet_point_chunks(self):
        from engine.audio.chunking import split_at_quiet_points
        from engine.audio.vad import Chunk

        audio = np.concatenate(self._pending_audio) if self._pending_audio else np.zeros(0, np.float32)
        self._pending_audio = []
        return [(Chunk(a, b), audio[a:b]) for a, b in split_at_quiet_points(audio, self.max_chunk_seconds)]


class InlineReader:
    """Reads on the caller's thread: ``take()`` decodes a block there and then."""

    def __init__(self, maker: ChunkMaker):
        self.maker = maker
        maker.open()

    @property
    def duration(self) -> float | None:
        return self.maker.duration

    @property
    def audio_track(self) -> int | None:
        return self.maker.audio_track

    @property
    def waiting(self) -> bool:
        return False

    def take(self) -> ReadBlock:
        return self.maker.read_block()

    def stop(self) -> None:
        self.maker.close()


_running: set = set()              # readers whose thread has not ended (each thread removes its own)
_running_lock = threading.Lock()


@atexit.register
def _stop_readers_at_exit() -> None:
    """A daemon thread still inside torch when the interpreter ends aborts the process
    ("terminate called without an active exception"): stop and wait for the readers first."""
    with _running_lock:
        readers = list(_running)
    for reader in readers:
        reader.stop()
    for reader in readers:
        reader.join(timeout=30)


class ThreadedReader:
    """Runs a ChunkMaker on its own thread, at most ``ahead`` blocks ahead of ``take()``.

    ``wake`` is set whenever a block (or an error) is ready, so an idle engine can wait on it
    instead of spinning. The reader's errors come out of ``take()`` on the job's thread."""

    def __init__(self, maker: ChunkMaker, ahead: int, wake: threading.Event | None = None):
        self.maker = maker
        self._ready: queue.Queue = queue.Queue(maxsize=ahead)
        self._stop = threading.Event()
        self._wake = wake
        self.opened = threading.Event()     # duration and track are known
        # a daemon, so a job nobody finishes never holds the process open; stopped at exit
        self._thread = threading.Thread(target=self._run, name=f"read {maker.source}"[:60], daemon=True)
        with _running_lock:
            _running.add(self)
        self._thread.start()

    @property
    def duration(self) -> float | None:
        return self.maker.duration if self.opened.is_set() else None

    @property
    def audio_track(self) -> int | None:
        return self.maker.audio_track if self.opened.is_set() else None

    @property
    def waiting(self) -> bool:
        """Still reading and nothing ready yet: the job has nothing to submit."""
        return self._ready.empty() and self._thread.is_alive()

    def take(self) -> ReadBlock | None:
        """The next ready block, None when none is ready yet; raises what the reading raised."""
        try:
            item = self._ready.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """Stop reading soon (between blocks) and close the file there; returns at once."""
        self._stop.set()
        while True:                 # free a reader blocked on a full queue
            try:
                self._ready.get_nowait()
            except queue.Empty:
                break

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the reader thread to end (tests); whether it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            self.maker.open()
            self.opened.set()
            while not self._stop.is_set():
                block = self.maker.read_block()
                release_team()     # no OpenMP team kept while waiting for the engine (openmp_team.py)
                if not self._put(block) or block.last:
                    break
        except BaseException as error:   # a broken file: the job fails (or retries) on its own thread
            self.maker.close()
            self._put(error)
        finally:
            self.maker.close()       # the file is closed on the thread that read it
            with _running_lock:
                _running.discard(self)
            if self._wake is not None:
                self._wake.set()

    def _put(self, item) -> bool:
        """Queue ``item`` once there is room; False when stopped first."""
        while not self._stop.is_set():
            try:
                self._ready.put(item, timeout=0.1)
            except queue.Full:
                continue
            if self._wake is not None:
                self._wake.set()
            return True
        return False
