"""Speaker names from voices: renames carried to a new run of the same voices, and remembered
voice profiles naming a later file's speakers (never over a name the user gave)."""
from __future__ import annotations

import numpy as np
import pytest
from conversations import make_conversation
from speaker_weights import ge2e_weights

from engine.pipelines.speaker_profiles import VoiceProfiles, carry_names, match_voices
from engine.text.types import Transcript


def _diarize(embedder, samples, ref_turns, count):
    """(label -> reference speaker, voices) of one diarization."""
    from engine.pipelines.diarize import Diarizer

    d = Diarizer(embedder)
    d.add(samples)
    who: dict[str, dict[str, float]] = {}
    for t in d.finish(count):
        for s, a, b in ref_turns:
            overlap = max(0.0, min(b, t.end) - max(a, t.start))
            who.setdefault(t.speaker, {}).setdefault(s, 0.0)
            who[t.speaker][s] += overlap
    return {label: max(v, key=v.get) for label, v in who.items()}, d.voices


@pytest.fixture(scope="module")
def two_runs():
    """One 3-voice conversation diarized twice (the second time from its middle on, then its
    start: a re-run numbers speakers differently), and a later 2-voice conversation of two of
    the same voices."""
    from engine.pipelines.diarize import GE2EEmbedder

    embedder = GE2EEmbedder(str(ge2e_weights()))
    conv = make_conversation(3, 0.35, seed=21, turn_range=(1.0, 6.0))
    n = len(conv.samples)
    cut = int(16000 * (conv.turns[len(conv.turns) // 2][1] - 0.15))     # in the pause before a turn
    rotated = np.concatenate([conv.samples[cut:], conv.samples[:cut]])
    shift = lambda t: t - cut / 16000 if t >= cut / 16000 else t + (n - cut) / 16000
    rotated_turns = [(s, shift(a), shift(b)) for s, a, b in conv.turns]
    later = make_conversation(2, 0.35, seed=23, turn_range=(1.0, 6.0))
    return (_diarize(embedder, conv.samples, conv.turns, 3), _diarize(embedder, rotated, rotated_turns, 3),
            _diarize(embedder, later.samples, later.turns, 2))


def test_renames_are_kept_across_a_rerun(two_runs):
    (who1, voices1), (who2, voices2), _ = two_runs
    assert sorted(voices1) == sorted(voices2) == ["S1", "S2", "S3"]
    assert sorted(who1.values()) == sorted(who2.values()) == ["spk1", "spk2", "spk3"]
    names = {label: f"Person {who1[label]}" for label in ("S1", "S3")}     # two of three renamed
    carried = carry_names(names, voices1, voices2)
    assert sorted(carried.values()) == sorted(names.values())
    for label, name in carried.items():
        assert name == f"Person {who2[label]}"                             # the same voice


def test_a_remembered_voice_names_a_later_file_but_not_over_a_rename(two_runs, tmp_path):
    (who1, voices1), _, (who3, voices3) = two_runs
    assert sorted(who3.values()) == ["spk1", "spk2"]
    first = {ref: label for label, ref in who1.items()}
    later = {ref: label for label, ref in who3.items()}
    profiles = VoiceProfiles(tmp_path / "voices.json")
    profiles.remember("Bob", voices1[first["spk1"]])
    profiles.remember("Alice", voices1[first["spk2"]])
    profiles.remember("Carol", voices1[first["spk3"]])                  # not in the later file
    profiles = VoiceProfiles(tmp_path / "voices.json")                    # read back from disk
    transcript = Transcript("", None, 0.0, [])
    transcript.speaker_names[later["spk1"]] = "Robert"                    # the user's own name stays
    found = profiles.names_for(transcript, voices3)
    assert found == {later["spk2"]: "Alice"}
    assert transcript.speaker_names == {later["spk1"]: "Robert", later["spk2"]: "Alice"}


def test_no_name_without_a_confident_match():
    a, b = np.eye(3)[0], np.eye(3)[1]
    assert match_voices({"S1": a}, {"Alice": b}) == {}
    assert match_voices({"S1": a, "S2": a}, {"Alice": a}) in ({"S1": "Alice"}, {"S2": "Alice"})
    with pytest.raises(ValueError):
        match_voices({"S1": a}, {"Alice": a}, threshold=0)
