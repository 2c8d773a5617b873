"""engine.audio.system_audio: "what you hear" through a private PulseAudio null sink.

The sink's monitor carries whatever is played to it, as a desktop's default output does.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import soundfile as sf

from engine.audio.sources import SAMPLE_RATE, level_dbfs
from engine.audio.system_audio import SystemAudioSource, system_audio_available
from pulse_helpers import pulse_or_fail


@pytest.fixture
def pulse():
    with pulse_or_fail() as server:
        yield server


def test_system_audio_captures_what_is_played_to_the_default_output(pulse, tmp_path):
    assert system_audio_available()
    rate = 48000
    t = np.arange(int(1.5 * rate)) / rate
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    wav = tmp_path / "tone.wav"
    sf.write(wav, tone, rate, subtype="PCM_16")

    source = SystemAudioSource()
    source.start()
    try:
        time.sleep(0.3)
        player = pulse.play(wav)
        chunks, levels = [], []
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            chunks.append(source.read())
            levels.append(source.level)
            time.sleep(0.05)
        assert player.wait(timeout=10) == 0
    finally:
        source.stop()
    chunks.append(source.read())
    assert source.error is None, source.error
    audio = np.concatenate(chunks)
    assert audio.dtype == np.float32 and audio.ndim == 1
    assert max(levels) > -25 and level_dbfs(audio) > -30
    loud = np.flatnonzero(np.abs(audio) > 0.05)
    stretch = audio[loud[0]:loud[0] + SAMPLE_RATE]
    spectrum = np.abs(np.fft.rfft(stretch * np.hanning(stretch.size)))
    assert abs(np.argmax(spectrum) * SAMPLE_RATE / stretch.size - 440) < 3


def test_a_vanished_sound_server_is_said_in_words(pulse):
    source = SystemAudioSource(device="no-such-source")
    source.start()
    end = time.monotonic() + 10
    while source.error is None and time.monotonic() < end:
        source.read()
        time.sleep(0.05)
    source.stop()
    assert source.error and "System audio stopped" in source.error
