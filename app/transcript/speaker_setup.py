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
