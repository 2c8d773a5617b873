"""The live window's input list follows microphones being plugged in and out, and PortAudio
is only re-initialised when no stream is open (that would kill a running capture)."""
from __future__ import annotations

import types

import pytest

pytest.importorskip("pytestqt")


import engine.audio.microphone as microphone  # noqa: E402
from app.settings import Settings  # noqa: E402
from engine.audio.microphone import InputDevice, MicrophoneSource  # noqa: E402
from app_fixtures import client, data_dir  # noqa: E402,F401  (fixtures, found by name)




def mic(index, name, default=False):
    return InputDevice(index=index, name=name, host_api="ALSA", default_samplerate=48000.0,
                       channels=2, is_default=default)


BUILT_IN = "HDA Intel PCH: ALC257 Analog (hw:0,0)"
USB = "USB Audio Device: Audio (hw:2,0)"


@pytest.fixture
def inputs(monkeypatch):
    """What PortAudio lists; the test changes ``inputs[0]`` as if plugging devices in and out."""
    state = [[mic(0, BUILT_IN, default=True)]]
    rescans = []
    monkeypatch.setattr(microphone, "list_input_devices", lambda: list(state[0]))
    monkeypatch.setattr(microphone, "rescan_devices", lambda: rescans.append(1) or True)
    # Whether this machine has a sound server must not change the list under test.
    monkeypatch.setattr("app.live.input_devices._system_audio_label", lambda: "")
    state.append(rescans)
    return state


def names(combo):
    return [combo.itemText(i) for i in range(combo.count())]


def test_plugged_in_microphone_appears_and_the_choice_is_kept(client, qtbot, inputs):
    from app.live.live_window import FILE_ITEM, LiveWindow

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    combo = live.device_combo
    assert combo.currentText() == "HDA Intel PCH (default)"
    # The USB microphone is plugged in; PortAudio numbers the devices afresh.
    inputs[0] = [mic(0, USB), mic(1, BUILT_IN, default=True)]
    assert combo.check_devices()
    assert names(combo)[:2] == ["USB Audio Device", "HDA Intel PCH (default)"]
    assert combo.currentText() == "HDA Intel PCH (default)" and combo.currentData() == 1
    assert not combo.check_devices(), "an unchanged list is left alone"
    combo.setCurrentIndex(0)   # the user picks the USB microphone
    assert live.status.text() == "Choose a microphone and press Start."

    # ...and pulls it out again: said so, and the system microphone is chosen instead.
    inputs[0] = [mic(0, BUILT_IN, default=True)]
    assert combo.check_devices()
    assert names(combo)[0] == "HDA Intel PCH (default)" and combo.currentData() == 0
    assert live.status.text().startswith("Microphone disconnected: USB Audio Device")
    assert len(inputs[1]) == 3   # every check asked PortAudio to look again

    # Every microphone gone: a file is offered instead; one coming back is chosen again.
    inputs[0] = []
    assert combo.check_devices() and combo.currentData() == FILE_ITEM
    inputs[0] = [mic(0, USB, default=True)]
    live.status.setText("No microphone found: press Start to caption an audio file instead.")
    assert combo.check_devices() and combo.currentText() == "USB Audio Device (default)"
    assert live.status.text() == "Choose a microphone and press Start."


def test_file_or_system_audio_choice_survives_a_change(client, qtbot, inputs):
    from app.live.live_window import FILE_ITEM, LiveWindow

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    combo = live.device_combo
    combo.setCurrentIndex(combo.findData(FILE_ITEM))
    inputs[0] = [mic(0, USB), mic(1, BUILT_IN, default=True)]
    assert combo.check_devices() and combo.currentData() == FILE_ITEM


def test_the_window_polls_only_while_shown_and_idle(client, qtbot, inputs, monkeypatch):
    from app.live import input_devices
    from app.live.live_window import LiveWindow

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.device_combo.poll.setInterval(50)
    assert not live.device_combo.poll.isActive()
    live.show()
    qtbot.waitExposed(live)
    assert live.device_combo.poll.isActive()
    inputs[0] = [mic(0, USB, default=True), mic(1, BUILT_IN)]
    qtbot.waitUntil(lambda: live.device_combo.count() == 3, timeout=3000)   # two mics and a file
    assert live.device_combo.currentText() == "HDA Intel PCH"   # still the user's choice

    live.device_combo.setEnabled(False)   # what Start does while capturing
    before = len(inputs[1])
    inputs[0] = []
    qtbot.wait(300)
    assert len(inputs[1]) == before and live.device_combo.count() == 3
    live.hide()
    assert not live.device_combo.poll.isActive()
    assert input_devices.POLL_MS <= 2000


class FakeSd:
    """Just enough of sounddevice for rescan_devices: counts re-initialisations."""

    def __init__(self, playing=None):
        self.reinits, self.stopped, self.playing = 0, 0, playing

    def get_stream(self):
        if self.playing is None:
            raise RuntimeError("play()/rec()/playrec() was not called yet")
        return self.playing

    def stop(self):
        self.stopped += 1
        self.playing.closed = True

    def _terminate(self):
        self.reinits += 1

    def _initialize(self):
        pass


def test_rescan_waits_while_a_stream_is_open(monkeypatch):
    sd = FakeSd()
    monkeypatch.setattr(microphone, "_sounddevice", lambda: sd)
    monkeypatch.setattr(microphone, "_linux_sound_fingerprint", lambda: None)
    capturing = MicrophoneSource()
    capturing._stream = object()   # as start() leaves it
    microphone._OPEN_SOURCES.add(capturing)
    try:
        assert microphone.rescan_devices() is False and sd.reinits == 0
    finally:
        microphone._OPEN_SOURCES.discard(capturing)
    assert microphone.rescan_devices() is True and sd.reinits == 1

    sd.playing = types.SimpleNamespace(closed=False, active=True)   # the player is playing
    assert microphone.rescan_devices() is False and sd.reinits == 1
    sd.playing.active = False    # played to the end: closed first, then rescanned
    assert microphone.rescan_devices() is True and sd.stopped == 1 and sd.reinits == 2


def test_rescan_is_skipped_while_the_kernel_lists_the_same_sound_devices(monkeypatch):
    sd = FakeSd()
    cards = ["0 [PCH]: HDA-Intel"]
    monkeypatch.setattr(microphone, "_sounddevice", lambda: sd)
    monkeypatch.setattr(microphone, "_linux_sound_fingerprint", lambda: cards[0])
    monkeypatch.setattr(microphone, "_last_fingerprint", None)
    assert microphone.rescan_devices() and sd.reinits == 1
    assert microphone.rescan_devices() and sd.reinits == 1   # nothing plugged: no probing
    cards[0] += "\n1 [Device]: USB-Audio"
    assert microphone.rescan_devices() and sd.reinits == 2
