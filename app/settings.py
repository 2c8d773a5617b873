"""Typed access to the app's QSettings, with every default in one place."""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QSettings

from app.paths import settings_file

ORGANIZATION = "Qwen3ASR"
APPLICATION = "Qwen3 ASR Desktop"

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
THEMES = ("system", "light", "dark")


@dataclass(frozen=True)
class Key:
    name: str
    default: object


MODEL = Key("model/path", "")            # a local folder (downloads land in models_dir())
ALIGNER = Key("model/aligner", "")       # optional Qwen3-ForcedAligner folder
DEVICE = Key("model/device", "auto")
DTYPE = Key("model/dtype", "auto")
LANGUAGE = Key("transcribe/language", "")   # "" = detect
CONTEXT = Key("transcribe/context", "")
WORD_TIMESTAMPS = Key("transcribe/word_timestamps", True)
PARALLEL_FILES = Key("transcribe/parallel_files", 4)
MAX_LINE_CHARS = Key("cues/max_line_chars", 42)
MAX_LINES = Key("cues/max_lines", 2)
MIN_DURATION = Key("cues/min_duration", 1.0)
MAX_DURATION = Key("cues/max_duration", 7.0)
MIN_GAP = Key("cues/min_gap", 0.08)
EXPORT_DIR = Key("export/dir", "")       # "" = next to the source file
EXPORT_TEMPLATE = Key("export/template", "{stem}.{ext}")
THEME = Key("ui/theme", "system")
LIVE_FONT_SIZE = Key("live/font_size", 20)
LIVE_STAY_ON_TOP = Key("live/stay_on_top", False)
LIVE_RECORD_AUDIO = Key("live/record_audio", True)
LIVE_DEVICE = Key("live/device", "")


class Settings:
    """QSettings wrapper that converts values back to the type of their default."""

    def __init__(self, qsettings: QSettings | None = None):
        if qsettings is None:
            path = settings_file()
            if path is not None:
                qsettings = QSettings(str(path), QSettings.Format.IniFormat)
            else:
                qsettings = QSettings(ORGANIZATION, APPLICATION)
        self.q = qsettings

    def get(self, key: Key):
        value = self.q.value(key.name, key.default)
        return _convert(value, key.default)

    def set(self, key: Key, value) -> None:
        self.q.setValue(key.name, value)

    def sync(self) -> None:
        self.q.sync()

    def raw(self, name: str, default=None):
        return self.q.value(name, default)

    def set_raw(self, name: str, value) -> None:
        self.q.setValue(name, value)

    def cue_options(self):
        from engine.text.cues import CueOptions

        return CueOptions(max_line_chars=self.get(MAX_LINE_CHARS), max_lines=self.get(MAX_LINES),
                          min_duration=self.get(MIN_DURATION), max_duration=self.get(MAX_DURATION),
                          min_gap=self.get(MIN_GAP))


def _convert(value, default):
    # INI files give strings back ("true", "4"); native stores may give the real type.
    if value is None:
        return default
    if isinstance(default, bool):
        if isinstance(value, str):
            return value.strip().lower() in ("1", "true", "yes", "on")
        return bool(value)
    try:
        if isinstance(default, int):
            return int(float(value))
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError):
        return default
    return str(value)
