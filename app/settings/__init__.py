"""Typed access to the app's QSettings, with every default in one place."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QSettings

from app.paths import settings_file

log = logging.getLogger(__name__)

ORGANIZATION = "Qwen3ASR"
APPLICATION = "Qwen3 ASR Desktop"

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZE_CHOICES = ("none", "int8")   # engine quantize=None or "int8" (CPU only, not token-exact)
LEGACY_INT8_DTYPE = "int8 (CPU)"      # once a Precision choice; read as auto precision + int8
THEMES = ("system", "light", "dark")


@dataclass(frozen=True)
class Key:
    name: str
    default: object


MODEL = Key("model/path", "")            # a local folder (downloads land in models_dir())
ALIGNER = Key("model/aligner", "")       # optional Qwen3-ForcedAligner folder
DEVICE = Key("model/device", "auto")
DTYPE = Key("model/dtype", "auto")
QUANTIZE = Key("model/quantize", "none")
LANGUAGE = Key("transcribe/language", "")   # "" = detect
CONTEXT = Key("transcribe/context", "")
WORD_TIMESTAMPS = Key("transcribe/word_timestamps", True)
PARALLEL_FILES = Key("transcribe/parallel_files", 4)
MAX_CHUNK_SECONDS = Key("transcribe/max_chunk_seconds", 0)   # 0 = automatic (engine default)
SPEAKERS = Key("transcribe/speakers", "off")   # "off", "auto" or a count: label who speaks
# how alike two voices must be (cosine, 0-1) to carry a name (engine DEFAULT_MATCH_THRESHOLD)
VOICE_MATCH = Key("transcribe/voice_match", 0.9)
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
LIVE_RECORD_AUDIO = Key("live/record_audio", False)  # opt in: it copies every input to disk
CONFIRM_QUIT = Key("ui/confirm_quit", True)   # ask before quitting with files unfinished
LIVE_DEVICE = Key("live/device", "")   # InputCombo.choice_key(): the input chosen last
LIVE_SHOW_TIMES = Key("live/show_times", True)   # each caption line starts with its time
WATCH_DIR = Key("watch/folder", "")              # "" = no watch folder
WATCH_OUTPUT_DIR = Key("watch/output_dir", "")   # "" = next to each audio file
WATCH_FORMATS = Key("watch/formats", "srt,txt")  # names as on the command line: srt,vtt,vtt-karaoke,json,txt,...
WATCH_SETTLE_SECONDS = Key("watch/settle_seconds", 5.0)   # unchanged this long = no longer being written
DELETE_RECORDINGS_AFTER_DAYS = Key("history/delete_recordings_after_days", 0)   # 0 = keep them
KV_CACHE_MB = Key("model/kv_cache_mb", 0)   # 0 = automatic (engine default); else MiB, 16 or more


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
        if self.q.status() != QSettings.Status.NoError:   # a hand-edited file that does not parse
            log.warning("settings: %s could not be read (%s); using defaults where values are missing",
                        self.q.fileName(), self.q.status().name)
        self._reported: set[str] = set()

    def get(self, key: Key):
        value = self.q.value(key.name, key.default)
        converted = _convert(value, key.default)
        if converted is _BAD:
            self._report_bad(key.name, value, f"expected {type(key.default).__name__}")
            return key.default
        return self._in_range(key, value, converted)

    def _in_range(self, key: Key, stored, value):
        """Numbers within the same rule as the engine's argument (engine.arguments), else the default:
        an out-of-range value never reaches a Qt control (whose ints are 32-bit) or the engine."""
        from engine.arguments import SETTING_RULES

        rule = SETTING_RULES.get(key.name)
        if rule is None or isinstance(key.default, bool):
            return value
        try:
            return type(key.default)(rule.check_setting(value))
        except ValueError as e:
            self._report_bad(key.name, stored, str(e))
            return key.default

    def raw_bytes(self, name: str) -> QByteArray | None:
        """A stored binary value (window geometry, splitter state), or None when it is missing
        or not binary (hand-edited): a bad value is ignored with a log line."""
        value = self.q.value(name)
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            value = QByteArray(bytes(value))
        if not isinstance(value, QByteArray) or value.isEmpty():
            self._report_bad(name, value, "expected a saved window state")
            return None
        return value

    def report_bad(self, name: str, value, why: str) -> None:
        """Log (once) that a stored value was ignored; callers that validate values themselves use it."""
        self._report_bad(name, value, why)

    def _report_bad(self, name: str, value, why: str) -> None:
        if name not in self._reported:
            self._reported.add(name)
            log.warning("settings: ignored the bad value %s=%r in %s (%s); using the default",
                        name, value, self.q.fileName(), why)

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


_BAD = object()   # a stored value that does not convert to its key's type
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _convert(value, default):
    # INI files give strings back ("true", "4"); native stores may give the real type.
    if value is None:
        return default
    if isinstance(default, bool):
        if isinstance(value, str):
            word = value.strip().lower()
            return True if word in _TRUE else False if word in _FALSE else _BAD
        return bool(value)
    try:
        if isinstance(default, int):
            number = float(value)
            return int(number) if math.isfinite(number) else _BAD
        if isinstance(default, float):
            number = float(value)
            return number if math.isfinite(number) else _BAD
    except (TypeError, ValueError):
        return _BAD
    if isinstance(value, (list, dict)):   # "a, b" in an INI file reads back as a list
        return _BAD
    return str(value)


def model_precision(settings: "Settings") -> tuple[str, str]:
    """(dtype, quantize) for ``engine.load``: "" for automatic, and "" or "int8". A Precision
    of "int8 (CPU)" saved by an older version means automatic precision with int8 weights."""
    dtype, quantize = settings.get(DTYPE), settings.get(QUANTIZE)
    if dtype == LEGACY_INT8_DTYPE:
        dtype, quantize = "auto", "int8"
    return ("" if dtype == "auto" else dtype), ("int8" if quantize == "int8" else "")


# Modules other screens may import besides this one; the rest are this screen's own
# (tests/test_layers.py).
PUBLIC = ('view_prefs',)
