"""The live window as a daily tool: a line per utterance with its start time, any sound-server
source (monitors included) picked from the list and captured for real, the choice remembered."""
from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import pytest
import soundfile as sf
from app_fixtures import client, data_dir  # noqa: F401
from pulse_helpers import pulse_or_fail

from app import settings as S
from app.settings import Settings
from engine.audio.system_audio import parse_sources

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

LISTING = """Source #0
\tState: SUSPENDED
\tName: virt.monitor
\tDescription: Monitor of Null Output
\tProperties:
\t\tdevice.description = "Monitor of Null Output"
Source #1
\tName: alsa_input.usb-mic
\tDescription: USB Mic Analog Mono
"""


def test_sources_are_read_from_pactls_listing_monitors_included():
    sources = parse_sources(LISTING)
    assert [(s.name, s.description, s.is_monitor) for s in sources] == [
        ("virt.monitor", "Monitor of Null Output", True), ("alsa_input.usb-mic", "USB Mic Analog Mono", False)]


@pytest.fixture
def loaded(client, qtbot, tmp_path):
    client.load_model(str(tmp_path))
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=5000)
    return client


def test_a_line_per_utterance_with_its_start_time_which_can_be_hidden(loaded, qtbot):
    from app.live.live_window import LiveWindow, clock_text
    from engine.audio.recorder import FileSource

    live = LiveWindow(loaded, Settings())
    qtbot.addWidget(live)
    audio = (0.1 * np.sin(np.arange(int(3.5 * 16000)) / 5.0)).astype(np.float32)
    assert live.start_source(FileSource(audio, speed=float("inf")))
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=5000)
    assert live.captions.toPlainText().splitlines() == [
        "0:00  second 1", "0:01  second 2", "0:02  second 3", "0:03  the end"]
    live.times_check.setChecked(False)
    assert live.captions.toPlainText().splitlines() == ["second 1", "second 2", "second 3", "the end"]
    assert Settings().get(S.LIVE_SHOW_TIMES) is False
    assert (clock_text(7.9), clock_text(765), clock_text(3723)) == ("0:07", "12:45", "1:02:03")


@pytest.fixture
def pulse():
    with pulse_or_fail() as server:
        server.pactl("load-module", "module-null-sink", "sink_name=calls",
                     "sink_properties=device.description=Calls")
        yield server


def test_a_chosen_monitor_is_captured_and_remembered(pulse, loaded, qtbot, tmp_path):
    from app.live.input_devices import PULSE_PREFIX
    from app.live.live_window import LiveWindow

    live = LiveWindow(loaded, Settings())
    qtbot.addWidget(live)
    combo = live.device_combo
    labels = [combo.itemText(i) for i in range(combo.count())]
    assert "Sound server: Monitor of Calls" in labels and "Sound server: Monitor of Null Output" in labels
    combo.setCurrentIndex(combo.findData(PULSE_PREFIX + "calls.monitor"))
    assert Settings().get(S.LIVE_DEVICE) == "pulse:calls.monitor"

    rate = 48000
    tone = (0.5 * np.sin(2 * np.pi * 440 * np.arange(int(2.0 * rate)) / rate)).astype(np.float32)
    sf.write(tmp_path / "tone.wav", tone, rate, subtype="PCM_16")
    live.toggle()                                  # Start, as the button does
    assert live.source is not None and live.source.device == "calls.monitor"
    # the tone again and again until the window has both seen it and taken a second of audio: on a
    # busy machine the capture can take a while to connect
    levels, player, deadline = [], None, time.monotonic() + 60
    while not (levels and max(levels) > 50 and live._session_samples > 16000):
        assert time.monotonic() < deadline, f"the tone played to 'calls' never reached the window: {levels[-20:]}"
        if player is None or player.poll() is not None:
            player = subprocess.Popen(["paplay", "--device=calls", str(tmp_path / "tone.wav")])
        qtbot.wait(100)
        levels.append(live.meter.value())
    player.terminate()
    player.wait(timeout=10)
    live.toggle()                                  # Stop
    live.close()

    again = LiveWindow(loaded, Settings())
    qtbot.addWidget(again)
    assert again.device_combo.currentData() == "pulse:calls.monitor", "the input chosen last time"
