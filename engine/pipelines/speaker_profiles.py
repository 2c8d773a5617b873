"""Names for speakers from their voices: renames kept across re-runs, and remembered voices.

A diarized file leaves one voice (the unit mean GE2E embedding of its windows) per speaker
label (``Diarizer.voices``). Two uses:

- ``carry_names``: a file transcribed again gets new clusters; each new label takes the name the
  user gave the old speaker whose voice is most similar (one to one, above ``threshold``).
- ``VoiceProfiles``: "remember this voice" stores a named voice in a JSON file; a later file's
  speaker is named after the profile it matches confidently. Names the user already gave
  (``Transcript.speaker_names``) are never replaced.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

# A GE2E speaker's mean voice in two recordings of the same espeak voice: 0.95-0.99; two
# different voices: 0.56-0.88 (tests/conversations.py). Confident = above this.
DEFAULT_MATCH_THRESHOLD = 0.9


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / max(float(np.linalg.norm(v)), 1e-12)


def match_voices(voices: dict[str, np.ndarray], known: dict[str, np.ndarray],
                 threshold: float = DEFAULT_MATCH_THRESHOLD) -> dict[str, str]:
    """``{label: known key}`` pairing each voice with at most one known voice (and each known
    voice with at most one label), most similar pairs first, only pairs at ``threshold`` or above."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"the voice match threshold must be in (0, 1], got {threshold!r}")
    pairs = sorted(((float(_unit(v) @ _unit(k_v)), label, key)
                    for label, v in voices.items() for key, k_v in known.items()), reverse=True)
    out: dict[str, str] = {}
    for sim, label, key in pairs:
        if sim < threshold:
            break
        if label not in out and key not in out.values():
            out[label] = key
    return out


def carry_names(old_names: dict[str, str], old_voices: dict[str, np.ndarray], new_voices: dict[str, np.ndarray],
                threshold: float = DEFAULT_MATCH_THRESHOLD) -> dict[str, str]:
    """The new run's ``speaker_names``: each new label whose voice matches a renamed old speaker
    takes that speaker's name."""
    named = {label: old_voices[label] for label in old_names if label in old_voices}
    return {new: old_names[old] for new, old in match_voices(new_voices, named, threshold).items()}


class VoiceProfiles:
    """Named voices kept in one JSON file (``{"name": [256 floats], ...}``) in the app's data folder."""

    def __init__(self, path):
        self.path = Path(path)
        self.voices: dict[str, np.ndarray] = {}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ValueError(f"voice profiles in {self.path} could not be read: {exc}") from None
            self.voices = {str(k): _unit(v) for k, v in data.items()}

    def remember(self, name: str, voice) -> None:
        """Store (or replace) ``name``'s voice and save the file at once (atomically)."""
        name = str(name).strip()
        if not name:
            raise ValueError("a voice profile needs a name")
        self.voices[name] = _unit(voice)
        self._save()

    def forget(self, name: str) -> None:
        if self.voices.pop(name, None) is not None:
            self._save()

    def names_for(self, transcript, voices: dict[str, np.ndarray],
                  threshold: float = DEFAULT_MATCH_THRESHOLD) -> dict[str, str]:
        """Set ``transcript.speaker_names`` for speakers whose voice matches a profile, skipping
        labels the user already named and profile names already in use; returns what was set."""
        given = dict(transcript.speaker_names)
        taken = set(given.values())
        free = {label: v for label, v in voices.items() if label not in given}
        known = {name: v for name, v in self.voices.items() if name not in taken}
        found = match_voices(free, known, threshold)
        transcript.speaker_names.update(found)
        return found

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({k: [round(float(x), 6) for x in v] for k, v in self.voices.items()}),
                       encoding="utf-8")
        os.replace(tmp, self.path)
