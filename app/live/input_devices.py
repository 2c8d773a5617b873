"""The live window's inputs: a picker of microphones, system audio and "a file", kept
current, and their failures in words.

PortAudio lists devices once, so a microphone plugged in after the window opened never
appeared, and one pulled out stayed listed. While the window is shown and not capturing,
a timer asks PortAudio to look again (engine.audio.microphone.rescan_devices) and
rebuilds the list only when it changed, keeping the user's choice where it still exists.
"""
from __future__ import annotations

import logging

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QComboBox

log = logging.getLogger(__name__)
FILE_ITEM = "__file__"
SYSTEM_AUDIO_ITEM = "__system_audio__"
PULSE_PREFIX = "pulse:"   # item data "pulse:NAME": that sound-server source (a monitor or a microphone)
MIC_PREFIX = "mic:"       # a remembered microphone: "mic:NAME|HOST API" (PortAudio's numbers change)
POLL_MS = 2000   # a plugged-in microphone shows up within two seconds
CHOOSE_INPUT = "Choose a microphone and press Start."
NO_MICROPHONE = "No microphone found: press Start to caption an audio file instead."
IDLE_HINTS = (CHOOSE_INPUT, NO_MICROPHONE)


def base_input_name(dev) -> str:
    """A PortAudio input as a person would name it: "default (ALSA)" is the system's microphone."""
    name = dev.name.strip()
    if name.lower() in ("default", "sysdefault"):
        return "System microphone"
    if name.lower() == "pulse":
        return "Sound server microphone"
    return name.split(":")[0].strip() or name  # "USB Mic: Audio (hw:2,0)" -> "USB Mic"


def friendly_input_name(dev) -> str:
    """The list entry: the person's name for the input, and which one the system uses."""
    return base_input_name(dev) + (" (default)" if dev.is_default else "")


def describe_input_error(source) -> str:
    """The input's failure in words: a microphone that went away is "disconnected"."""
    error = source.error or ""
    if type(source).__name__ == "MicrophoneSource" and any(
            s in error for s in ("ended unexpectedly", "no audio received", "delivers no audio",
                                 "closing the stream failed")):
        name = getattr(getattr(source, "device", None), "name", "") or "The microphone"
        return (f"Microphone disconnected: {name} stopped sending sound. Plug it back in or "
                "choose another input, then press Start.")
    return f"Input stopped: {error}"


def vanished_text(name: str) -> str:
    """The chosen microphone left the list (unplugged while the window was idle)."""
    return (f"Microphone disconnected: {name} is no longer available. Plug it back in or "
            "choose another input.")


def _devices(rescan: bool) -> list:
    """PortAudio's inputs now; none without PortAudio or a sound server (files still work)."""
    try:
        # Looked up on the module at each call: tests replace list_input_devices there.
        from engine.audio import microphone

        if rescan:
            microphone.rescan_devices()
        return list(microphone.list_input_devices())
    except Exception as exc:
        log.info("no input devices: %s", exc)
        return []


def _system_audio_label() -> str:
    try:
        from engine.audio.system_audio import LABEL, system_audio_available

        return LABEL if system_audio_available() else ""
    except Exception as exc:  # no sound server: the item is simply not offered
        log.info("no system audio input: %s", exc)
        return ""


def _sound_server_sources() -> list:
    """The pulse server's sources (monitors included), for the list; none without a server."""
    try:
        from engine.audio.system_audio import list_sound_server_sources

        return list_sound_server_sources()
    except Exception as exc:
        log.info("no sound-server sources: %s", exc)
        return []


def source_label(source) -> str:
    return f"Sound server: {source.description}"


class InputCombo(QComboBox):
    """Item data: a PortAudio index, SYSTEM_AUDIO_ITEM, FILE_ITEM, or None (no microphone)."""

    selected_vanished = Signal(str)   # the name of the chosen microphone, no longer listed
    devices_changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._devices: list = []
        self._system_audio = _system_audio_label()   # asked once: it runs ``pactl``
        self._sources = _sound_server_sources() if self._system_audio else []
        self._fill(_devices(rescan=False))
        self.poll = QTimer(self, interval=POLL_MS)
        self.poll.timeout.connect(self.check_devices)

    def selected_device(self):
        """The chosen InputDevice, or None for system audio, a file or no microphone."""
        index = self.currentData()
        if isinstance(index, str) or index is None:
            return None
        return next((d for d in self._devices if d.index == index), None)

    def choice_key(self) -> str:
        """The current choice as a string that survives restarts (for Settings)."""
        device = self.selected_device()
        if device is not None:
            return f"{MIC_PREFIX}{device.name}|{device.host_api}"
        data = self.currentData()
        return data if isinstance(data, str) else ""

    def select_key(self, key: str) -> bool:
        """Choose the input ``choice_key`` gave, if it is still there; True when found."""
        if not key:
            return False
        if key.startswith(MIC_PREFIX):
            name, _, api = key[len(MIC_PREFIX):].rpartition("|")
            device = next((d for d in self._devices if (d.name, d.host_api) == (name, api)), None)
            index = self.findData(device.index) if device is not None else -1
        else:
            index = self.findData(key)
        if index >= 0:
            self.setCurrentIndex(index)
        return index >= 0

    def idle_hint(self) -> str:
        """The status line before Start: with no microphone, Start plays a file."""
        return CHOOSE_INPUT if self._devices else NO_MICROPHONE

    def check_devices(self) -> bool:
        """Look for added or removed inputs; True when the list changed."""
        if not self.isEnabled() or self.view().isVisible():
            return False  # capturing, or the user is choosing from the open list right now
        devices = _devices(rescan=True)
        sources = _sound_server_sources() if self._system_audio else []
        if _key(devices) == _key(self._devices) and sources == self._sources:
            return False
        before, choice, had_any = self.selected_device(), self.currentData(), bool(self._devices)
        self._sources = sources
        self._fill(devices)
        if before is not None:
            # Match by name: PortAudio numbers the devices afresh after a rescan.
            same = next((d for d in devices
                         if (d.name, d.host_api) == (before.name, before.host_api)), None)
            if same is not None:
                self.setCurrentIndex(self.findData(same.index))
            else:
                self.selected_vanished.emit(base_input_name(before))
        elif isinstance(choice, str) and (had_any or choice.startswith(PULSE_PREFIX)):
            # System audio or a file chosen over a microphone stays chosen; the file that
            # stood in for "no microphone" gives way to the one just plugged in.
            self.setCurrentIndex(max(0, self.findData(choice)))
        self.devices_changed.emit()
        return True

    def _fill(self, devices) -> None:
        self._devices = list(devices)
        self.blockSignals(True)   # a rebuild is not the user choosing another input
        try:
            self.clear()
            for dev in devices:
                self.addItem(friendly_input_name(dev), dev.index)
                self.setItemData(self.count() - 1, f"{dev.name} ({dev.host_api})",
                                 Qt.ItemDataRole.ToolTipRole)
                if dev.is_default:
                    self.setCurrentIndex(self.count() - 1)
            if not devices:
                # Say so, but leave it unselectable: Start then plays a file, which works.
                self.addItem("No microphone found", None)
                self.model().item(0).setEnabled(False)
            if self._system_audio:
                self.addItem(self._system_audio, SYSTEM_AUDIO_ITEM)
                self.setItemData(self.count() - 1, "Caption a video or a call: the sound going "
                                 "to your speakers or headphones", Qt.ItemDataRole.ToolTipRole)
            for source in self._sources:
                self.addItem(source_label(source), PULSE_PREFIX + source.name)
                self.setItemData(self.count() - 1, f"{source.name}: " + (
                    "what this output plays" if source.is_monitor else "a sound-server input"),
                    Qt.ItemDataRole.ToolTipRole)
            self.addItem("Audio file (played as a microphone)…", FILE_ITEM)
            if not devices:
                self.setCurrentIndex(self.count() - 1)
        finally:
            self.blockSignals(False)


def _key(devices) -> list:
    return [(d.index, d.name, d.host_api, d.is_default) for d in devices]
