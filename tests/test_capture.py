"""engine.audio.microphone: real PortAudio capture through a private PulseAudio null sink,
the callback ring buffer, file playback as a microphone, errors and recording."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import types
import wave
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
from pulse_helpers import pulse_or_fail

from engine.audio import microphone as capture
from engine.audio.microphone import (
    CaptureError,
    MicrophoneSource,
    default_input_device,
    level_dbfs,
    list_input_devices,
)
from engine.audio.recorder import FileSource, SessionRecorder

SR = 16000


@pytest.fixture
def pulse():
    """A private PulseAudio server; failing to start it is a test failure, not a skip."""
    with pulse_or_fail() as server:
        yield server


def _probe_signal(rate: int) -> np.ndarray:
    """1.5 s of 440 Hz then a 1 s 300->3000 Hz chirp, amplitude 0.5, faded edges."""
    t1 = np.arange(int(1.5 * rate)) / rate
    t2 = np.arange(rate) / rate
    sig = np.concatenate([np.sin(2 * np.pi * 440 * t1),
                          np.sin(2 * np.pi * (300 * t2 + 1350 * t2 ** 2))])
    fade = np.minimum(1.0, np.minimum(np.arange(sig.size), sig.size - 1 - np.arange(sig.size))
                      / (0.02 * rate))
    return (0.5 * sig * fade).astype(np.float32)


def _read_until(src, seconds: float, levels: list | None = None) -> list[np.ndarray]:
    chunks, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        chunks.append(src.read())
        if levels is not None:
            levels.append(src.level)
        time.sleep(0.05)
    return chunks


def _start_and_wait_for_audio(mic: MicrophoneSource, timeout: float = 10.0) -> None:
    """The first PortAudio/ALSA-pulse stream of a process can take ~2 s to deliver."""
    mic.start()
    deadline = time.monotonic() + timeout
    while mic.read().size == 0:
        assert mic.error is None, mic.error
        assert time.monotonic() < deadline, "no audio arrived from the pulse device"
        time.sleep(0.02)


# --------------------------------------------------------------- real PortAudio path

def test_microphone_records_what_pulse_plays(pulse, tmp_path):
    probe = _probe_signal(48000)
    wav = tmp_path / "probe.wav"
    sf.write(wav, probe, 48000, subtype="PCM_16")

    names = [d.name for d in list_input_devices()]
    assert "pulse" in names, names
    assert default_input_device() is not None

    mic = MicrophoneSource(device="pulse")
    _start_and_wait_for_audio(mic)
    silence_level = mic.level
    player = pulse.play(wav)
    levels: list[float] = []
    chunks, deadline = [], time.monotonic() + 60
    while player.poll() is None:        # as long as it plays (its start is slow on a busy machine)
        assert time.monotonic() < deadline, "paplay did not finish"
        chunks += _read_until(mic, 0.05, levels)
    assert player.returncode == 0, player.stderr.read()
    chunks += _read_until(mic, 1.5, levels)     # what is still on its way through the sound server
    mic.stop()
    chunks.append(mic.read())
    assert mic.error is None, mic.error
    assert mic.device.name == "pulse" and mic.sample_rate == SR
    audio = np.concatenate(chunks)
    assert audio.dtype == np.float32 and audio.ndim == 1

    assert silence_level < -60
    assert max(levels) > -25, levels            # 0.5-amplitude sine is -9 dBFS at unity
    assert level_dbfs(audio) > -30

    # The 440 Hz tone: the loudest spectral peak of the captured tone stretch.
    loud = np.flatnonzero(np.abs(audio) > 0.05)
    tone = audio[loud[0]:loud[0] + SR]
    spectrum = np.abs(np.fft.rfft(tone * np.hanning(tone.size)))
    assert abs(np.argmax(spectrum) * SR / tone.size - 440) < 3

    # Cross-correlation with the played signal: the captured audio is the probe.
    ref = soxr.resample(probe, 48000, SR).astype(np.float32)
    n = 1 << int(np.ceil(np.log2(audio.size + ref.size)))
    xc = np.fft.irfft(np.fft.rfft(audio, n) * np.conj(np.fft.rfft(ref, n)), n)
    lag = int(np.argmax(xc[:audio.size]))
    seg = audio[lag:lag + ref.size]
    assert seg.size == ref.size, "capture ended before the probe finished"
    corr = float(np.dot(seg, ref) / (np.linalg.norm(seg) * np.linalg.norm(ref)))
    assert corr > 0.9, corr


def test_device_disappearing_sets_error(pulse):
    mic = MicrophoneSource(device="pulse", stall_timeout_s=2.0)
    _start_and_wait_for_audio(mic)
    pulse.kill()
    deadline = time.monotonic() + 8
    while mic.error is None and time.monotonic() < deadline:
        mic.read()                      # must not raise in the caller's thread
        time.sleep(0.05)
    assert mic.error is not None and mic.error.startswith("Microphone 'pulse' stopped:")
    mic.stop()
    mic.read()


# ------------------------------------------------------------------- FileSource

def test_file_source_manual_releases_exact_samples():
    audio = (np.arange(3 * SR) / (3 * SR)).astype(np.float32)
    src = FileSource(audio, manual=True)
    src.start()
    assert src.read().size == 0
    src.advance(0.5)
    np.testing.assert_array_equal(src.read(), audio[:8000])
    assert src.read().size == 0
    src.advance(0.25)
    src.advance(0.1)
    np.testing.assert_array_equal(src.read(), audio[8000:13600])
    assert src.position == pytest.approx(0.85)
    src.advance(100)
    np.testing.assert_array_equal(src.read(), audio[13600:])
    assert src.finished and src.error is None and src.sample_rate == SR
    assert src.level > -10
    with pytest.raises(ValueError):
        src.advance(-1)
    with pytest.raises(ValueError):
        FileSource(audio).advance(1)


def test_file_source_real_time_speed(monkeypatch):
    # on a clock the test moves (a wall-clock rate compared in a test failed when the machine paused it)
    from engine.audio import recorder

    now = [100.0]
    monkeypatch.setattr(recorder, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    audio = np.arange(20 * SR, dtype=np.float32)
    src = FileSource(audio, speed=8.0)
    now[0] += 5
    assert src.read().size == 0                       # the clock runs from start()
    src.start()
    now[0] += 0.5                                     # half a second at 8x: 4 s of audio
    np.testing.assert_array_equal(src.read(), audio[:4 * SR])
    now[0] += 0.25
    np.testing.assert_array_equal(src.read(), audio[4 * SR:6 * SR])
    src.stop()
    now[0] += 10
    assert src.read().size == 0                       # stopped: nothing more comes
    src.start()
    now[0] += 0.125
    np.testing.assert_array_equal(src.read(), audio[6 * SR:7 * SR])   # on from where it stopped
    now[0] += 100
    assert src.read().size == 13 * SR and src.finished


def test_file_source_from_file_and_infinite_speed(tmp_path):
    t = np.arange(int(2 * 44100)) / 44100
    stereo = np.stack([0.3 * np.sin(2 * np.pi * 300 * t)] * 2, axis=1)
    sf.write(tmp_path / "s.wav", stereo, 44100)
    src = FileSource(tmp_path / "s.wav", speed=float("inf"))
    src.start()
    out = src.read()
    assert abs(out.size - 2 * SR) <= 2 and src.finished and src.read().size == 0
    with pytest.raises(ValueError):
        FileSource(np.zeros((10, 2), np.float32))
    with pytest.raises(ValueError):
        FileSource(np.zeros(10, np.float32), speed=0)


# ------------------------------------------------------------- ring buffer / callback

def _flags(*names: str):
    sd = pytest.importorskip("sounddevice")
    value = 0
    for name in names:
        value |= getattr(sd._lib, name)
    return sd.CallbackFlags(value)


def _stereo_blocks(mono: np.ndarray, block: int):
    diff = 0.1 * np.cos(np.arange(mono.size) * 0.01).astype(np.float32)
    stereo = np.stack([mono + diff, mono - diff], axis=1).astype(np.float32)
    for i in range(0, len(stereo), block):
        yield stereo[i:i + block]


def test_callback_ring_buffer_resamples_in_order():
    t = np.arange(48000) / 48000
    mono = (0.5 * np.sin(2 * np.pi * (200 * t + 1000 * t ** 2))).astype(np.float32)
    mic = MicrophoneSource(device="unused", block_ms=50, buffer_s=2.0)
    mic._prepare(48000, 2)
    parts = []
    for i, blk in enumerate(_stereo_blocks(mono, 2400)):
        mic._callback(blk, len(blk), None, _flags())
        if i % 3 == 0:
            parts.append(mic.read())
    mic.stop()
    parts.append(mic.read())
    out = np.concatenate(parts)
    assert out.dtype == np.float32 and out.size == SR
    np.testing.assert_allclose(out, soxr.resample(mono, 48000, SR), atol=1e-5)
    assert mic.overflows == 0 and mic.read().size == 0


def test_ring_buffer_overflow_keeps_newest_audio():
    mono = (np.arange(48000) / 48000).astype(np.float32) - 0.5
    mic = MicrophoneSource(device="unused", buffer_s=0.5)
    mic._prepare(48000, 2)
    for blk in _stereo_blocks(mono, 2400):          # 1 s into a 0.5 s buffer, no reads
        mic._callback(blk, len(blk), None, _flags())
    assert mic.overflows == 10 and mic.dropped_s == pytest.approx(0.5)
    frames = mic._ring.read()
    np.testing.assert_allclose(frames.mean(axis=1), mono[24000:], atol=1e-6)
    assert mic.error is None


def test_callback_status_errors():
    mic = MicrophoneSource(device="Test Mic")
    mic._prepare(16000, 1)
    block = np.zeros((800, 1), np.float32)
    mic._callback(block, 800, None, _flags("paInputOverflow"))
    assert mic.xruns == 1 and mic.error is None          # a glitch, not a failure
    for _ in range(19):
        mic._callback(block, 800, None, _flags("paInputUnderflow"))
    assert mic.error is None
    mic._callback(block, 800, None, _flags("paInputUnderflow"))   # 1 s of no real audio
    assert mic.error.startswith("Microphone 'Test Mic' stopped: the device delivers no audio")


def test_stream_abort_and_stall_set_error():
    class FakeStream:
        def abort(self):
            raise RuntimeError("device gone")

        close = abort

    mic = MicrophoneSource(device="Desk Mic", stall_timeout_s=1.0)
    mic._prepare(16000, 1)
    mic._finished_callback()                  # PortAudio ended the stream on its own
    assert "Desk Mic" in mic.error and "ended unexpectedly" in mic.error

    mic = MicrophoneSource(device="Desk Mic", stall_timeout_s=1.0)
    mic._prepare(16000, 1)
    mic._stream = FakeStream()
    mic._last_callback -= 5
    assert mic.read().size == 0
    assert mic.error == "Microphone 'Desk Mic' stopped: no audio received for 5.0 s"
    mic.stop()                                 # closing a dead stream does not raise
    mic._finished_callback()                   # after stop(): no new error
    assert "no audio received" in mic.error


def test_missing_device_raises_capture_error():
    with pytest.raises(CaptureError, match="No Such Mic 42"):
        MicrophoneSource(device="No Such Mic 42").start()
    with pytest.raises(CaptureError, match="9999"):
        MicrophoneSource(device=9999).start()
    with pytest.raises(ValueError):
        MicrophoneSource(block_ms=0)


def test_missing_portaudio_says_how_to_install(monkeypatch):
    def no_portaudio(name):
        raise OSError("PortAudio library not found")

    monkeypatch.setattr(capture, "importlib", types.SimpleNamespace(import_module=no_portaudio))
    with pytest.raises(CaptureError, match="libportaudio2"):
        list_input_devices()


def test_capture_imports_neither_sounddevice_nor_qt():
    code = ("import sys, engine.audio.microphone; bad = [m for m in sys.modules "
            "if m == 'sounddevice' or m.startswith(('PySide6', 'PyQt'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).parent.parent, check=True).stdout
    assert out.strip() == "[]"


def test_level_dbfs():
    assert level_dbfs(np.zeros(0)) == level_dbfs(np.zeros(100)) == capture.SILENCE_DBFS
    assert level_dbfs(np.ones(100)) == pytest.approx(0.0)
    t = np.arange(SR) / SR
    assert level_dbfs(np.sin(2 * np.pi * 100 * t)) == pytest.approx(-3.01, abs=0.01)


# ---------------------------------------------------------------- SessionRecorder

def test_session_recorder_finalizes_on_close(tmp_path):
    audio = (0.5 * np.sin(np.arange(2 * SR) * 0.05)).astype(np.float32)
    with SessionRecorder(tmp_path / "a" / "rec.wav", flush_interval_s=100) as rec:
        for i in range(0, audio.size, 800):
            rec.write(audio[i:i + 800])
    assert rec.closed and rec.duration == pytest.approx(2.0)
    with wave.open(str(tmp_path / "a" / "rec.wav")) as w:     # strict header check
        assert (w.getnframes(), w.getframerate(), w.getsampwidth()) == (2 * SR, SR, 2)
    back, rate = sf.read(tmp_path / "a" / "rec.wav", dtype="float32")
    np.testing.assert_allclose(back, audio, atol=1 / 32768 + 1e-6)
    with pytest.raises(ValueError):
        rec.write(audio)


def test_session_recorder_survives_a_crash(tmp_path):
    path = tmp_path / "crash.wav"
    script = textwrap.dedent(f"""
        import os, time, numpy as np
        from engine.audio.recorder import SessionRecorder
        rec = SessionRecorder({str(path)!r}, flush_interval_s=0.05)
        for i in range(30):                  # 1.5 s in 50 ms blocks, flushed as it goes
            rec.write(np.full(800, 0.25, np.float32))
            time.sleep(0.01)
        rec.flush()
        rec.write(np.full(800, 0.25, np.float32))   # after the last flush
        os._exit(0)                                  # die without close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True,
                   cwd=Path(__file__).parent.parent, timeout=60)
    with wave.open(str(path)) as w:          # header was rewritten at the flush
        assert w.getnframes() >= 30 * 800
        data = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    assert np.all(np.abs(data / 32768 - 0.25) < 1e-3)
    assert sf.info(path).frames >= 30 * 800
