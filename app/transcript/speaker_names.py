"""Names for a new transcript's speakers: the user's renames from the file's last run, then the
voices the user asked the app to remember.

The matching is the engine's (engine.pipelines.speaker_profiles, reached through the ``engine``
package); this module only decides where the names come from and keeps the profiles file in the
app's data folder. A name the user already gave is never replaced.
"""
from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

PROFILES_FILE = "voice_profiles.json"


def default_profiles_path() -> Path:
    from app.paths import data_dir

    return data_dir() / PROFILES_FILE


def check_threshold(value) -> float:
    """A voice match threshold in (0, 1]; else ValueError."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"the voice match threshold must be a number, got {value!r:.40}") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"the voice match threshold must be in (0, 1], got {value!r}")
    return value


class SpeakerNamer:
    """Names speakers of finished transcripts; ``profiles`` is the remembered voices (loaded on
    first use; a file that cannot be read is moved aside, the profiles start empty, and
    ``problem`` says so)."""

    def __init__(self, path=None, threshold: float | None = None):
        from engine import DEFAULT_MATCH_THRESHOLD

        self.path = Path(path) if path is not None else default_profiles_path()
        self.threshold = check_threshold(DEFAULT_MATCH_THRESHOLD if threshold is None else threshold)
        self.problem = ""
        self._profiles = None

    @property
    def profiles(self):
        """The ``engine.VoiceProfiles`` kept in ``path``."""
        if self._profiles is None:
            from engine import VoiceProfiles

            try:
                self._profiles = VoiceProfiles(self.path)
            except ValueError as exc:      # damaged: kept aside under another name, start empty
                aside = self.path.with_name(self.path.stem + ".damaged.json")
                self.path.replace(aside)
                self.problem = f"{exc}; it was kept as {aside.name}"
                log.warning("%s", self.problem)
                self._profiles = VoiceProfiles(self.path)
        return self._profiles

    def name(self, transcript, previous=None) -> dict[str, str]:
        """Set ``transcript.speaker_names`` from ``previous`` (the file's last transcript: its
        renames follow the same voices) and then from the remembered voices; returns what was set."""
        if not transcript.voices:
            return {}
        from engine import carry_names

        found: dict[str, str] = {}
        if previous is not None and previous.speaker_names and previous.voices:
            carried = carry_names(previous.speaker_names, previous.voices, transcript.voices, self.threshold)
            carried = {k: v for k, v in carried.items() if k not in transcript.speaker_names}
            transcript.speaker_names.update(carried)
            found.update(carried)
        found.update(self.profiles.names_for(transcript, transcript.voices, self.threshold))
        return found

    def remember(self, transcript, label: str) -> str:
        """Remember the voice of ``label`` under its name; returns the name ("" when it has no
        name or no voice)."""
        name = transcript.speaker_names.get(label, "")
        voice = transcript.voices.get(label)
        if not name or voice is None:
            return ""
        self.profiles.remember(name, voice)
        return name

    def forget(self, name: str) -> None:
        self.profiles.forget(name)

    def is_remembered(self, name: str) -> bool:
        return bool(name) and name in self.profiles.voices
