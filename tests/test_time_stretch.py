"""Issue 35, playback speed: 0.5-2x keeps the pitch. A 1 kHz tone played faster or slower stays at
1 kHz (its FFT peak) while its duration scales by 1 / speed, in the stretcher and through the
player's sound output."""
from __future__ import annotations

import numpy as np
import pytest

from app.transcript.time_stretch import Wsola, stretch

RATE = 16000


def tone(seconds: float, hz: float = 1000.0) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (0.5 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def peak_hz(samples: np.ndarray) -> float:
    middle = samples[len(samples) // 10:-len(samples) // 10]     # away from the fades
    spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle))))
    return float(np.fft.rfftfreq(len(middle), 1 / RATE)[spectrum.argmax()])


@pytest.mark.parametrize("speed", [0.5, 0.75, 1.5, 2.0])
def test_tone_keeps_its_pitch_and_its_duration_scales(speed):
    out = stretch(tone(2.0), speed)
    assert abs(peak_hz(out) - 1000.0) <= 4.0, peak_hz(out)            # resampling would say 1000 x speed
    assert len(out) / RATE == pytest.approx(2.0 / speed, rel=0.03)
    middle = out[len(out) // 10:-len(out) // 10]
    assert np.sqrt(np.mean(middle ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.05), "windows join in phase"


def test_read_in_blocks_gives_the_whole_stretch():
    x = np.random.default_rng(0).standard_normal(RATE).astype(np.float32)
    whole, wsola, parts = stretch(x, 1.5), Wsola(x, 1.5), []
    while not wsola.done:
        parts.append(wsola.read(333))
    assert np.array_equal(np.concatenate(parts), whole)
    with pytest.raises(ValueError):
        Wsola(x, 8.0)


def test_player_plays_1_5x_at_the_same_pitch(qtbot, tmp_path, monkeypatch):
    pytest.importorskip("pytestqt")
    import soundfile as sf

    import app.transcript.player as player_module

    class Stream:
        def __init__(self, samplerate, channels, dtype, callback, **options):
            self.samplerate, self.callback, self.closed = samplerate, callback, False
            streams.append(self)

        def start(self): pass
        def close(self): self.closed = True

    class FakeSoundDevice:   # what would reach the speakers
        OutputStream = Stream
        CallbackStop = type("CallbackStop", (Exception,), {})
        def play(self, samples, rate): played.append(rate)
        def stop(self): pass

    streams, played = [], []
    monkeypatch.setattr(player_module, "_qt_multimedia", lambda: None)
    monkeypatch.setattr(player_module, "_sounddevice_output", lambda rescan=False: FakeSoundDevice())
    path = tmp_path / "tone.wav"
    sf.write(path, tone(3.0), RATE, subtype="PCM_16")
    player = player_module.Player()
    player.set_rate(1.5)
    assert player.play(str(path), 0.0)
    qtbot.waitUntil(lambda: player.playing, timeout=10000)
    stream = streams[-1]
    assert stream.samplerate == RATE and not played, "never played faster by raising the sample rate"
    heard, buffer = [], np.zeros((512, 1), np.float32)
    for _ in range(200):
        try:
            stream.callback(buffer, 512, None, None)
        except FakeSoundDevice.CallbackStop:
            heard.append(buffer[:, 0].copy())
            break
        heard.append(buffer[:, 0].copy())
    out = np.concatenate(heard)
    assert abs(peak_hz(out) - 1000.0) <= 4.0
    assert (np.flatnonzero(out)[-1] + 1) / RATE == pytest.approx(3.0 / 1.5, rel=0.03)
    player.stop()
    assert stream.closed
