"""Speaker labels for the app's files: the Settings choice and the speaker model's location."""
from __future__ import annotations

from engine.text.speakers import check_speakers


def speakers_setting(settings):
    """The Settings default for new files: None (off), "auto" or a count; a bad stored value is off."""
    from app import settings as keys

    value = str(settings.get(keys.SPEAKERS) if settings is not None else "off").strip().lower()
    if value in ("", "off", "none"):
        return None
    try:
        return check_speakers(value)
    except ValueError:
        return None


def voice_match_setting(settings) -> float:
    """Settings' voice match threshold: how alike a new speaker's voice must be to a renamed or
    remembered one to take its name; a bad stored value gives the default."""
    from app import settings as keys
    from app.transcript.speaker_names import check_threshold

    try:
        return check_threshold(settings.get(keys.VOICE_MATCH))
    except ValueError:
        return keys.VOICE_MATCH.default


def voice_match_spin():
    """The Settings control for the voice match threshold (0.50-0.99)."""
    from PySide6.QtWidgets import QDoubleSpinBox

    spin = QDoubleSpinBox()
    spin.setRange(0.5, 0.99)
    spin.setSingleStep(0.01)
    spin.setDecimals(2)
    spin.setToolTip("How alike two voices must be (0-1) for a speaker to take the name of a renamed or "
                    "remembered voice. Higher: fewer, surer names.")
    return spin


def speaker_choice(value) -> str:
    """The stored form of a speaker choice: "off", "auto" or a count ("3"); None and "" are off.

    Raises:
        ValueError: not one of those (a count must be 1-32, as the engine takes)."""
    text = "off" if value is None else str(value).strip().lower()
    if text in ("", "off", "none"):
        return "off"
    return str(check_speakers(text))


def speakers_option(choice):
    """What the engine takes for a stored choice: None (off), "auto" or a count."""
    choice = speaker_choice(choice)
    return None if choice == "off" else check_speakers(choice)


def speaker_choice_text(choice) -> str:
    """A queue cell's text for a stored choice: "Off", "Auto" or the count."""
    choice = speaker_choice(choice)
    return {"off": "Off", "auto": "Auto"}.get(choice, choice)


def prepare_speakers(engine, speakers):
    """Point ``engine`` at the GE2E weights (installed wheel, or the model manager's download);
    raises SpeakerModelMissing with how to get them, which fails that file with the message."""
    from engine.network.speaker_encoder import find_weights
    from modelhub.speaker_model import speaker_models_dir

    if getattr(engine, "speaker_model", None) is None:
        engine.speaker_model = str(find_weights(data_dir=speaker_models_dir()))
    return speakers


SPEAKER_CHOICES = [("Off", "off"), ("Automatic count", "auto")] + [(f"{n} speakers", str(n)) for n in range(1, 9)]


def speaker_count_combo(value=None):
    """A combo box with Off / Automatic count / 1-8 speakers; ``currentData()`` is the stored form."""
    from PySide6.QtWidgets import QComboBox

    combo = QComboBox()
    for text, data in SPEAKER_CHOICES:
        combo.addItem(text, data)
    combo.setToolTip("Label who speaks in new files: off, a count found from the voices, or a count you know")
    set_speaker_choice(combo, value)
    return combo


def set_speaker_choice(combo, value) -> None:
    """Select ``value`` ("off", "auto", a count, or None for off) in a speaker_count_combo."""
    value = "off" if value is None else str(value).strip().lower()
    combo.setCurrentIndex(max(0, combo.findData(value)))
