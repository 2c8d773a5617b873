"""Audio decoding: any file a user drops becomes float32 mono 16 kHz samples.

soundfile (libsndfile) is tried first because it is fast and sample-exact for
WAV/FLAC/OGG/AIFF; PyAV (FFmpeg) handles MP3 (see `_native_blocks`) and
everything else (m4a, mp4, webm, mkv, wma...). Both paths feed the same mono mix and the same streaming
soxr resampler, so `load_audio` and `stream_audio` agree sample for sample.

Every failure on a file is an `AudioLoadError` naming the file with a reason a
user can act on; library exception text is only ever appended in parentheses.
"""
from __future__ import annotations

import math
import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

import av
import numpy as np
import soundfile as sf
import soxr

from engine.audio.frames import packed_converter, packed_mono
from engine.audio.tracks import TrackChoice, choose_audio_track
from engine.errors import AudioLoadError

SAMPLE_RATE = 16000
# Native-rate block length used when decoding a whole file; big enough that
# per-call overhead is negligible, small enough to bound the transient copies.
_LOAD_BLOCK_SECONDS = 30.0
_RESAMPLE_QUALITY = "HQ"
_ARRAY_NAME = "<array>"  # stands in for a file name when the source is an array
_NOT_AUDIO = "is not an audio file, or its format is unsupported or corrupt"

SUPPORTED_EXTENSIONS = frozenset({
    ".wav", ".wave", ".flac", ".mp3", ".mp2", ".ogg", ".oga", ".opus", ".spx",
    ".m4a", ".m4b", ".aac", ".alac", ".mp4", ".m4v", ".mkv", ".mka", ".webm",
    ".mov", ".avi", ".wma", ".wmv", ".asf", ".aiff", ".aif", ".aifc", ".caf",
    ".au", ".snd", ".w64", ".rf64", ".amr", ".3gp", ".3g2", ".ac3", ".eac3",
    ".dts", ".wv", ".ape", ".mpg", ".mpeg", ".ts", ".mts", ".flv",
})

AudioSource = Union[str, os.PathLike, np.ndarray]


@dataclass(frozen=True)
class AudioInfo:
    """What a file holds, read from its header where possible."""

    duration: float  # seconds
    sample_rate: int  # native rate of the file, before any resampling
    channels: int
    codec: str  # e.g. "PCM_16", "MPEG_LAYER_III", "aac", "opus"
    container: str  # e.g. "WAV", "MP3", "mov", "matroska"
    track: int = 1  # the audio track decoded (1-based), when a file has several
    tracks: int = 1  # audio tracks in the file
    track_note: str = ""  # which track was used and why; empty for one track


def is_supported(path: Union[str, os.PathLike]) -> bool:
    """True when the file name's extension is one users may drop on the app."""
    return Path(path).suffix.lower() in SUPPORTED_EXTENSIONS


def load_audio(source: AudioSource, notes: list[str] | None = None) -> np.ndarray:
    """Return `source` as a contiguous float32 mono 16 kHz array.

    `source` is a path to an audio/video file, or an array already at 16 kHz
    (float32/float64/int16; 2-D arrays are (samples, channels)). Very short
    audio is returned as is: deciding whether it is too short is the caller's
    (a 1-sample file at 16 kHz gives 1 sample; at 44.1 kHz it resamples to 0).
    """
    if not isinstance(source, (str, os.PathLike)):
        return _array_to_mono(source)
    pieces = list(_resampled_pieces(source, _LOAD_BLOCK_SECONDS, notes))
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    return np.ascontiguousarray(audio, dtype=np.float32)


def stream_audio(path: Union[str, os.PathLike], block_seconds: float = 30.0,
                 notes: list[str] | None = None) -> Iterator[np.ndarray]:
    """Decode `path` incrementally, yielding float32 mono 16 kHz blocks.

    Every block holds exactly round(block_seconds * 16000) samples except the
    last, which is shorter; concatenated they equal `load_audio(path)`. Only a
    block or two is ever held in memory, so hours-long files are fine.

    What a user should know about the decoding (the audio track used when a file
    has several, a level brought back into range) is appended to ``notes``;
    without a list it is given as a warning.
    """
    if not (isinstance(block_seconds, (int, float)) and math.isfinite(block_seconds)
            and block_seconds > 0):
        raise ValueError(f"block_seconds must be a positive number, got {block_seconds!r}")
    block_len = max(1, round(block_seconds * SAMPLE_RATE))
    pending: list[np.ndarray] = []
    pending_len = 0
    for piece in _resampled_pieces(path, block_seconds, notes):
        pending.append(piece)
        pending_len += len(piece)
        if pending_len >= block_len:
            joined = np.concatenate(pending)
            full = (len(joined) // block_len) * block_len
            for start in range(0, full, block_len):
                yield np.ascontiguousarray(joined[start:start + block_len])
            rest = joined[full:]
            pending, pending_len = ([rest] if len(rest) else []), len(rest)
    if pending_len:
        yield np.ascontiguousarray(np.concatenate(pending))


def audio_info(path: Union[str, os.PathLike]) -> AudioInfo:
    """Describe `path` from its header; decodes only when no duration is recorded."""
    path = _checked_path(path)
    try:
        info = sf.info(str(path))
    except (sf.SoundFileError, RuntimeError, ValueError, TypeError, OSError):
        info = None  # not a libsndfile format: ask FFmpeg below
    if info is not None and info.samplerate > 0:
        return AudioInfo(info.frames / info.samplerate, int(info.samplerate),
                         int(info.channels), info.subtype, info.format)
    rate, channels, codec, form, duration, choice = _pyav_header(path)
    if rate <= 0:
        raise AudioLoadError(path, f"{_NOT_AUDIO} (no sample rate)")
    if duration is None:
        # No duration in the header (some streamed containers): count samples.
        samples = sum(len(block) for _, block in _native_blocks(path, _LOAD_BLOCK_SECONDS))
        duration = samples / rate
    return AudioInfo(duration, rate, channels, codec, form, choice.number, choice.count, choice.note)


def save_wav(path: Union[str, os.PathLike], audio: np.ndarray,
             sample_rate: int = SAMPLE_RATE) -> Path:
    """Write `audio` as 16-bit PCM WAV, atomically: readers never see half a file.

    Floats are clipped to [-1, 1] (libsndfile would otherwise wrap around) and
    NaN becomes silence, because losing a recorded session over one bad sample
    is worse than a click. int16 input is written unchanged.
    """
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)) \
            or sample_rate <= 0:
        raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
    data = np.asarray(audio)
    if data.ndim not in (1, 2):
        raise ValueError(f"audio must be 1-D or (samples, channels), got shape {data.shape}")
    if data.dtype != np.int16:
        data = np.clip(np.nan_to_num(data.astype(np.float32), nan=0.0, posinf=1.0, neginf=-1.0),
                       -1.0, 1.0)
    path = Path(path)
    # Same folder as the target so os.replace is a rename, never a copy.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "xb") as handle:
            sf.write(handle, data, int(sample_rate), format="WAV", subtype="PCM_16")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


# --- internals -------------------------------------------------------------

def _checked_path(source: Union[str, os.PathLike]) -> Path:
    """Fail early, with plain words, on paths that cannot hold audio at all."""
    path = Path(source)
    if not path.exists():
        raise AudioLoadError(path, "file not found")
    if path.is_dir():
        raise AudioLoadError(path, "is a folder, not an audio file")
    try:
        info = path.stat()  # stat, never open: opening a FIFO blocks until a writer comes
    except OSError as exc:
        raise AudioLoadError(path, f"cannot be read ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(info.st_mode):
        # /dev/zero or /dev/urandom behind a symlink would stream forever; a FIFO would block.
        raise AudioLoadError(path, f"not a regular file ({_file_kind(info.st_mode)})")
    size = info.st_size
    if size == 0:
        raise AudioLoadError(path, "file is empty (0 bytes)")
    if not os.access(path, os.R_OK):
        raise AudioLoadError(path, "cannot be read (permission denied)")
    return path


def path_problem(source: Union[str, os.PathLike]) -> str | None:
    """Why ``source`` cannot hold audio (the words the CLI shows, e.g. "not a regular file (a FIFO)"),
    or None when it may; never opens it."""
    try:
        _checked_path(source)
    except AudioLoadError as exc:
        return exc.reason
    return None


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a plain file"


def _array_to_mono(source) -> np.ndarray:
    """Validate an in-memory array (assumed 16 kHz) and make it float32 mono."""
    data = np.asarray(source)
    if data.ndim not in (1, 2):
        raise AudioLoadError(_ARRAY_NAME, f"must be 1-D or (samples, channels), got shape {data.shape}")
    if data.dtype == np.int16:
        data = data.astype(np.float32) / 32768.0
    elif data.dtype == np.int32:
        data = (data.astype(np.float64) / 2147483648.0).astype(np.float32)
    elif data.dtype == np.uint8:
        data = (data.astype(np.float32) - 128.0) / 128.0
    elif np.issubdtype(data.dtype, np.floating):
        data = data.astype(np.float32)
    else:
        raise AudioLoadError(_ARRAY_NAME, f"unsupported sample type {data.dtype}")
    if data.ndim == 2:
        data = data.mean(axis=1, dtype=np.float32) if data.shape[1] else np.zeros(len(data), np.float32)
    _check_finite(_ARRAY_NAME, data)
    return np.ascontiguousarray(data, dtype=np.float32)


def _check_finite(path, samples: np.ndarray) -> None:
    if not np.isfinite(samples).all():
        raise AudioLoadError(path, "contains NaN or infinite samples")


def _resampled_pieces(path, block_seconds: float, notes: list[str] | None = None) -> Iterator[np.ndarray]:
    """Native-rate mono blocks, level-checked, run through one streaming soxr resampler."""
    resampler = None
    level = _LevelGuard(path, notes)
    for rate, block in _native_blocks(path, block_seconds, notes):
        block = level.apply(block)
        if rate == SAMPLE_RATE:
            out = block
        else:
            if resampler is None:
                resampler = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32",
                                                quality=_RESAMPLE_QUALITY)
            out = resampler.resample_chunk(block, last=False)
        if len(out):
            yield out
    if resampler is not None:
        tail = resampler.resample_chunk(np.zeros(0, np.float32), last=True)
        if len(tail):
            yield tail


class _LevelGuard:
    """Brings absurd float levels back into range (speech x 1e30 would overflow the log-mel
    power and transcribe as nothing): once a block peaks above ``MAX_PEAK`` the file is
    scaled to peak at ``TARGET_PEAK``, the gain only ever lowered as louder blocks come."""

    MAX_PEAK = 4.0      # float files may overshoot full scale a little; 12 dB over is no mastering
    TARGET_PEAK = 0.9

    def __init__(self, path, notes: list[str] | None):
        self.path, self.notes = path, notes
        self.gain: float | None = None
        self.loudest = 0.0

    def apply(self, block: np.ndarray) -> np.ndarray:
        peak = float(np.max(np.abs(block))) if len(block) else 0.0
        if self.gain is None and peak <= self.MAX_PEAK:
            return block
        if peak > self.loudest:
            self.loudest = peak
        if self.gain is None or peak * self.gain > self.TARGET_PEAK:
            first = self.gain is None
            self.gain = self.TARGET_PEAK / self.loudest
            if first:
                self._note(f"audio level out of range (samples peak at {peak:.3g}, full scale is 1); "
                           f"normalised to peak {self.TARGET_PEAK}")
        return (block.astype(np.float64) * self.gain).astype(np.float32)

    def _note(self, text: str) -> None:
        if self.notes is None:
            import warnings

            warnings.warn(f"{self.path}: {text}", stacklevel=4)
        elif text not in self.notes:
            self.notes.append(text)


def _native_blocks(path, block_seconds: float, notes: list[str] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (native sample rate, float32 mono block) pairs for a file.

    soundfile first; PyAV for MPEG audio, or when libsndfile cannot open the
    file or decodes nothing from it.
    """
    path = _checked_path(path)
    try:
        handle = sf.SoundFile(str(path))
    except (sf.SoundFileError, RuntimeError, ValueError, TypeError, OSError):
        handle = None
    if handle is not None and (handle.subtype or "").startswith("MPEG"):
        # libsndfile 1.2's MP3 decoder returns wrong samples when a file is read
        # in pieces (bit-reservoir errors from mpg123), and streaming needs
        # pieces; FFmpeg decodes MP3 to the same samples (within 1e-6) in any
        # block size, so both loading and streaming use it for MPEG audio.
        handle.close()
        handle = None
    if handle is not None:
        produced = False
        with handle:
            rate = int(handle.samplerate)
            block_frames = max(1, int(block_seconds * rate))
            while True:
                try:
                    data = handle.read(block_frames, dtype="float32", always_2d=True)
                except (sf.SoundFileError, RuntimeError, ValueError) as exc:
                    if not produced:
                        break  # let FFmpeg try; it tolerates more damage
                    raise AudioLoadError(path, f"is corrupt partway through ({exc})") from exc
                if not len(data):
                    break
                block = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
                _check_finite(path, block)
                produced = True
                yield rate, np.ascontiguousarray(block)
        if produced:
            return
    yield from _pyav_native_blocks(path, block_seconds, notes)


def _open_with_pyav(path: Path):
    try:
        return av.open(str(path), mode="r")
    except Exception as exc:  # FFmpeg reports bad input through many exception types
        raise AudioLoadError(path, f"{_NOT_AUDIO} ({_ffmpeg_reason(exc)})") from exc


def _ffmpeg_reason(exc: Exception) -> str:
    """FFmpeg's own words for a failure, without the errno and the repeated path PyAV adds."""
    return getattr(exc, "strerror", None) or str(exc)


def _pyav_header(path: Path) -> tuple[int, int, str, str, float | None, TrackChoice]:
    """(rate, channels, codec, container, duration or None, track choice) of the audio track used."""
    container = _open_with_pyav(path)
    with container:
        if not container.streams.audio:
            raise AudioLoadError(path, "contains no audio track")
        try:
            choice = choose_audio_track(path, container)
            stream = container.streams.audio[choice.index]
            context = stream.codec_context
            if context is None:  # FFmpeg found a track but knows no decoder for it
                raise AudioLoadError(path, f"{_NOT_AUDIO} (unknown audio codec)")
            duration = None
            if stream.duration and stream.time_base:
                duration = float(stream.duration * stream.time_base)
            elif container.duration:
                duration = container.duration / av.time_base
            return (int(context.sample_rate or stream.rate or 0), int(context.channels or 0),
                    str(context.name), container.format.name.split(",")[0], duration, choice)
        except AudioLoadError:
            raise
        except Exception as exc:  # damaged headers surface as assorted attribute errors
            raise AudioLoadError(path, f"{_NOT_AUDIO} ({_ffmpeg_reason(exc)})") from exc


def _pyav_native_blocks(path: Path, block_seconds: float,
                        notes: list[str] | None = None) -> Iterator[tuple[int, np.ndarray]]:
    """Decode the chosen audio track (see engine.audio.tracks) with FFmpeg, skipping undecodable packets."""
    container = _open_with_pyav(path)
    with container:
        if not container.streams.audio:
            raise AudioLoadError(path, "contains no audio track")
        choice = choose_audio_track(path, container)
        if choice.note and notes is not None and choice.note not in notes:
            notes.append(choice.note)
        packets = container.demux(container.streams.audio[choice.index])
        converter = None  # created from the first frame; pins rate and layout
        rate, block_frames = 0, 1
        pending: list[np.ndarray] = []
        pending_len = produced = bad_packets = 0
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except Exception as exc:  # demuxer gave up: a truncated tail keeps what came before
                if produced or pending_len:
                    break
                raise AudioLoadError(path, f"{_NOT_AUDIO} ({_ffmpeg_reason(exc)})") from exc
            try:
                frames = packet.decode()
                if converter is None and frames:
                    rate = int(frames[0].sample_rate)
                    block_frames = max(1, int(block_seconds * rate))
                    converter = packed_converter(frames[0])   # packed: see engine.audio.frames
                monos = [packed_mono(out) for frame in frames for out in converter.resample(frame)]
            except Exception:  # one corrupt packet should not lose the whole file
                bad_packets += 1
                continue
            for mono in monos:
                pending.append(mono)
                pending_len += len(mono)
            if pending_len >= block_frames:
                block = np.concatenate(pending)
                _check_finite(path, block)
                produced += len(block)
                pending, pending_len = [], 0
                yield rate, block
        if converter is not None:
            try:
                pending.extend(packed_mono(out) for out in converter.resample(None))
            except Exception:
                pass  # nothing buffered worth failing over
        if pending:
            block = np.concatenate(pending)
            if len(block):
                _check_finite(path, block)
                produced += len(block)
                yield rate, block
    if not produced:
        reason = f"{_NOT_AUDIO} (no packet could be decoded)" if bad_packets else \
            "contains no audio samples"
        raise AudioLoadError(path, reason)
