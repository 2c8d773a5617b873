"""Audio decoding: formats, content fidelity, streaming, and plain-worded errors."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf
import soxr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.audio.decode import (
    SAMPLE_RATE,
    SUPPORTED_EXTENSIONS,
    AudioInfo,
    audio_info,
    is_supported,
    load_audio,
    save_wav,
    stream_audio,
)
from engine.errors import AudioLoadError

# --- helpers ---------------------------------------------------------------

def sine(rate: int, seconds: float, freq: float = 440.0, channels: int = 1,
         amplitude: float = 0.5) -> np.ndarray:
    """(samples, channels) float32 sine; channels get different phases so mixing is real work."""
    t = np.arange(int(rate * seconds)) / rate
    cols = [amplitude * np.sin(2 * np.pi * freq * t + 0.3 * c) for c in range(channels)]
    return np.stack(cols, axis=1).astype(np.float32)


def peak_hz(audio: np.ndarray, rate: int = SAMPLE_RATE) -> float:
    spectrum = np.abs(np.fft.rfft(audio * np.hanning(len(audio))))
    return float(np.fft.rfftfreq(len(audio), 1 / rate)[np.argmax(spectrum)])


def expected_16k(samples: np.ndarray, rate: int) -> np.ndarray:
    """What load_audio should return for (samples, channels) at `rate`."""
    mono = samples.mean(axis=1).astype(np.float32)
    return mono if rate == SAMPLE_RATE else soxr.resample(mono, rate, SAMPLE_RATE, "HQ")


def write_with_pyav(path: Path, samples: np.ndarray, rate: int, codec: str,
                    container_format: str | None = None) -> Path:
    """Encode (samples, channels) float audio with FFmpeg (AAC/Opus have no soundfile writer)."""
    layout = {1: "mono", 2: "stereo"}[samples.shape[1]]
    planar = np.ascontiguousarray(samples.T)
    with av.open(str(path), "w", format=container_format) as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        for start in range(0, planar.shape[1], 1024):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(planar[:, start:start + 1024]),
                                               format="fltp", layout=layout)
            frame.rate, frame.pts = rate, start
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def write_video_only(path: Path) -> Path:
    """An mp4 holding five tiny video frames and no audio track."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for _ in range(5):
            frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


# --- formats and content ---------------------------------------------------

@pytest.mark.parametrize("suffix,fmt,subtype", [
    (".wav", "WAV", "PCM_16"), (".wav", "WAV", "FLOAT"), (".flac", "FLAC", "PCM_24"),
    (".aiff", "AIFF", "PCM_16"),
])
@pytest.mark.parametrize("rate,channels", [(44100, 2), (48000, 1), (16000, 1)])
def test_lossless_files_match_the_source(tmp_path, suffix, fmt, subtype, rate, channels):
    source = sine(rate, 1.5, channels=channels) + 0.01 * np.random.default_rng(0).standard_normal(
        (int(rate * 1.5), channels)).astype(np.float32)
    path = tmp_path / f"clip{suffix}"
    sf.write(path, source, rate, format=fmt, subtype=subtype)
    audio = load_audio(path)
    assert audio.dtype == np.float32 and audio.ndim == 1 and audio.flags.c_contiguous
    expected = expected_16k(source, rate)
    assert len(audio) == len(expected)
    assert np.corrcoef(audio, expected)[0, 1] > 0.9999
    assert np.abs(audio - expected).max() < 1e-3  # 16-bit quantisation at worst
    info = audio_info(path)
    assert (info.sample_rate, info.channels) == (rate, channels)
    assert info.duration == pytest.approx(1.5, abs=1e-3)


@pytest.mark.parametrize("name,rate,channels", [
    ("ogg-vorbis", 44100, 2), ("mp3", 44100, 2), ("mp3-48k", 48000, 1),
    ("m4a", 48000, 2), ("mp4", 44100, 1), ("webm", 48000, 2), ("mkv", 44100, 2),
])
def test_lossy_files_keep_duration_and_pitch(tmp_path, name, rate, channels):
    source = sine(rate, 2.0, channels=channels)
    if name == "ogg-vorbis":
        path = tmp_path / "clip.ogg"
        sf.write(path, source, rate, format="OGG", subtype="VORBIS")
    elif name.startswith("mp3"):
        path = tmp_path / "clip.mp3"
        sf.write(path, source, rate, format="MP3", subtype="MPEG_LAYER_III")
    elif name == "webm":
        path = write_with_pyav(tmp_path / "clip.webm", source, rate, "libopus", "webm")
    elif name == "mkv":
        path = write_with_pyav(tmp_path / "clip.mkv", source, rate, "aac", "matroska")
    else:
        path = write_with_pyav(tmp_path / f"clip.{name}", source, rate, "aac", "mp4")
    audio = load_audio(path)
    assert audio.dtype == np.float32 and np.isfinite(audio).all()
    assert len(audio) / SAMPLE_RATE == pytest.approx(2.0, abs=0.1)  # codec padding only
    assert peak_hz(audio) == pytest.approx(440.0, abs=2.0)
    # RMS, not peak: FFmpeg's AAC encoder leaves brief overshoots on a pure tone.
    assert np.sqrt(np.mean(audio[4000:-4000] ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.1)
    info = audio_info(path)
    assert info.duration == pytest.approx(2.0, abs=0.1)
    assert (info.sample_rate, info.channels) == (rate, channels)
    assert info.codec and info.container


def test_mp3_loads_the_same_in_any_block_size(tmp_path):
    # Guards the FFmpeg route for MP3: libsndfile's decoder corrupts piecewise reads.
    path = tmp_path / "tone.mp3"
    sf.write(path, sine(44100, 5.3, amplitude=0.3), 44100, format="MP3")
    whole = load_audio(path)
    pieces = np.concatenate(list(stream_audio(path, block_seconds=0.25)))
    assert np.abs(whole - pieces).max() < 1e-4
    assert peak_hz(whole) == pytest.approx(440.0, abs=2.0)


def test_edge_shapes_load(tmp_path):
    one = tmp_path / "one.wav"
    sf.write(one, np.array([0.25], np.float32), 16000, subtype="PCM_16")
    assert load_audio(one).shape == (1,)
    assert audio_info(one).duration == pytest.approx(1 / 16000)

    u8 = tmp_path / "phone.wav"
    sf.write(u8, sine(8000, 1.0)[:, 0], 8000, subtype="PCM_U8")
    audio = load_audio(u8)
    assert len(audio) == 16000 and peak_hz(audio) == pytest.approx(440.0, abs=2.0)
    assert abs(float(audio.mean())) < 0.02  # unsigned samples were re-centred on zero

    surround = tmp_path / "surround.wav"
    sf.write(surround, sine(96000, 0.5, channels=6), 96000, subtype="PCM_24")
    audio = load_audio(surround)
    assert len(audio) == 8000 and peak_hz(audio) == pytest.approx(440.0, abs=3.0)
    assert audio_info(surround).channels == 6


def test_arrays_are_accepted_as_16k(tmp_path):
    tone = sine(16000, 0.5)[:, 0]
    assert np.array_equal(load_audio(tone), tone)
    assert load_audio(tone.astype(np.float64)).dtype == np.float32
    as_int = (tone * 32767).astype(np.int16)
    assert np.abs(load_audio(as_int) - tone).max() < 1e-3
    stereo = np.stack([tone, -tone * 0.5], axis=1)
    assert np.allclose(load_audio(stereo), tone * 0.25, atol=1e-7)
    with pytest.raises(AudioLoadError, match="NaN or infinite"):
        load_audio(np.array([0.0, np.nan], np.float32))
    with pytest.raises(ValueError):
        load_audio(np.zeros((2, 2, 2), np.float32))


# --- streaming ---------------------------------------------------------------

def test_stream_equals_load_on_a_long_file(tmp_path):
    rng = np.random.default_rng(3)
    rate = 44100
    source = 0.1 * rng.standard_normal((rate * 70 + 123, 2)).astype(np.float32)
    path = tmp_path / "long.flac"
    sf.write(path, source, rate, subtype="PCM_16")
    whole = load_audio(path)
    blocks = list(stream_audio(path, block_seconds=30.0))
    assert [len(b) for b in blocks[:-1]] == [30 * SAMPLE_RATE] * (len(blocks) - 1)
    assert 0 < len(blocks[-1]) <= 30 * SAMPLE_RATE
    assert all(b.dtype == np.float32 for b in blocks)
    streamed = np.concatenate(blocks)
    assert len(streamed) == len(whole)
    assert np.abs(streamed - whole).max() < 1e-4


def test_stream_equals_load_through_ffmpeg(tmp_path):
    path = write_with_pyav(tmp_path / "talk.m4a", sine(48000, 4.0, channels=2), 48000, "aac", "mp4")
    whole = load_audio(path)
    streamed = list(stream_audio(path, block_seconds=1.0))
    assert all(len(b) == SAMPLE_RATE for b in streamed[:-1])
    assert np.abs(np.concatenate(streamed) - whole).max() < 1e-4


def test_stream_rejects_bad_block_length(tmp_path):
    with pytest.raises(ValueError):
        next(stream_audio(tmp_path / "x.wav", block_seconds=0))


# --- errors ------------------------------------------------------------------

def _empty(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _truncated_wav(path: Path) -> Path:
    sf.write(path, sine(16000, 0.2), 16000)
    path.write_bytes(path.read_bytes()[:20])
    return path


def _random_mp3(path: Path) -> Path:
    path.write_bytes(np.random.default_rng(7).bytes(6000))
    return path


def _nan_wav(path: Path) -> Path:
    samples = sine(16000, 0.2)[:, 0]
    samples[100] = np.nan
    sf.write(path, samples, 16000, subtype="FLOAT")
    return path


def _inf_wav(path: Path) -> Path:
    samples = sine(16000, 0.2)[:, 0]
    samples[5] = np.inf
    sf.write(path, samples, 16000, subtype="DOUBLE")
    return path


@pytest.mark.parametrize("make,name,reason", [
    (lambda p: p, "missing.wav", "not found"),
    (_empty, "empty.wav", "empty"),
    (_truncated_wav, "cut.wav", "not an audio file"),
    (_random_mp3, "noise.mp3", "not an audio file"),
    (write_video_only, "silent-film.mp4", "no audio track"),
    (_nan_wav, "nan.wav", "NaN or infinite"),
    (_inf_wav, "inf.wav", "NaN or infinite"),
    (lambda p: (p.mkdir(), p)[1], "folder.wav", "folder"),
])
def test_bad_files_raise_audio_load_error_naming_the_file(tmp_path, make, name, reason):
    path = make(tmp_path / name)
    for attempt in (lambda: load_audio(path), lambda: list(stream_audio(path))):
        with pytest.raises(AudioLoadError) as caught:
            attempt()
        assert name in str(caught.value) and reason in str(caught.value)
        assert isinstance(caught.value, ValueError)
    if reason != "NaN or infinite":  # audio_info reads headers only; those are fine
        with pytest.raises(AudioLoadError, match=reason):
            audio_info(path)


# --- extensions and saving -----------------------------------------------------

def test_supported_extensions():
    assert all(ext.startswith(".") and ext == ext.lower() for ext in SUPPORTED_EXTENSIONS)
    for name in ("a.wav", "B.MP3", "c.m4a", "d.webm", "e.Flac", "f.opus", "g.aif", "h.mkv"):
        assert is_supported(name) and is_supported(Path(name))
    for name in ("notes.txt", "image.png", "noextension", "archive.zip"):
        assert not is_supported(name)


def test_save_wav_round_trips_atomically(tmp_path):
    path = tmp_path / "session.wav"
    path.write_bytes(b"old contents")  # replaced whole, never appended to
    tone = sine(16000, 0.5)[:, 0]
    tone[10] = 3.0  # out of range: must clip, not wrap around
    save_wav(path, tone)
    assert os.listdir(tmp_path) == ["session.wav"]  # no temporary file left behind
    info = sf.info(path)
    assert (info.samplerate, info.subtype, info.frames) == (16000, "PCM_16", len(tone))
    back = load_audio(path)
    assert back[10] == pytest.approx(32767 / 32768)
    assert np.abs(np.delete(back - tone, 10)).max() < 1e-4
    assert isinstance(audio_info(path), AudioInfo)
    with pytest.raises(ValueError):
        save_wav(path, tone, sample_rate=0)


# --- fuzz ----------------------------------------------------------------------

def _valid_bytes(fmt: str, subtype: str) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"seed.{fmt.lower()}"
        sf.write(path, sine(16000, 0.3), 16000, format=fmt, subtype=subtype)
        return path.read_bytes()


_SEEDS = [_valid_bytes("WAV", "PCM_16"), _valid_bytes("WAV", "FLOAT"),
          _valid_bytes("FLAC", "PCM_16"), _valid_bytes("MP3", "MPEG_LAYER_III")]


@st.composite
def _damaged_file(draw):
    """A real file cut short and with a few bytes overwritten: reaches past the header checks."""
    data = bytearray(draw(st.sampled_from(_SEEDS)))
    data = data[:draw(st.integers(1, len(data)))]
    for _ in range(draw(st.integers(0, 8))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    return bytes(data)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.one_of(st.binary(max_size=2048), _damaged_file()),
       suffix=st.sampled_from([".wav", ".mp3", ".flac"]))
def test_arbitrary_bytes_load_or_raise_audio_load_error(data, suffix):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"fuzz{suffix}"
        path.write_bytes(data)
        try:
            audio = load_audio(path)
        except AudioLoadError as error:
            assert path.name in str(error)
        else:
            assert audio.dtype == np.float32 and np.isfinite(audio).all()
        try:
            audio_info(path)
        except AudioLoadError:
            pass
