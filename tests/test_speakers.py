"""Speaker labels: merging turns into segments and words, exports with names, renames, DER.

The real-speech test transcribes a synthetic 3-voice conversation (espeak-ng voices, known
turns) with the trained tiny test model and labels it with the pretrained GE2E encoder; its
weights come from the resemblyzer wheel (tests/speaker_weights.py fetches it with pip once).
"""
from __future__ import annotations

import json

import pytest

from der import der
from engine.text.exports import to_json, to_srt, to_txt, to_vtt
from engine.text.speakers import (
    SpeakerTurn,
    assign_speakers,
    check_speakers,
    merge_speakers,
    rename_speaker,
    set_segment_speaker,
    speaker_list,
)
from engine.text.types import Segment, Transcript, Word

TURNS = [SpeakerTurn("S1", 0.0, 2.0), SpeakerTurn("S2", 2.2, 4.0)]


def _timed_segment():
    words = [Word("Hello", 0.1, 0.5), Word("there.", 0.6, 1.0), Word("Good", 1.2, 1.6),
             Word("morning", 2.3, 2.9), Word("to", 3.0, 3.1), Word("you.", 3.2, 3.6)]
    return Segment(0.1, 3.6, "Hello there. Good morning to you.", words, "English", "aligned")


def test_a_sentence_spanning_a_speaker_change_is_split_at_the_word_where_it_changes():
    out = assign_speakers([_timed_segment()], TURNS)
    assert [(s.speaker, s.text) for s in out] == [("S1", "Hello there. Good"), ("S2", "morning to you.")]
    assert out[1].start == 2.3 and out[0].end == 1.6
    assert all(w.speaker == s.speaker for s in out for w in s.words)


def test_untimed_segments_are_split_by_the_share_of_each_turn():
    seg = Segment(0.0, 4.0, "one two three four five six seven eight")
    out = assign_speakers([seg], TURNS)
    assert [s.speaker for s in out] == ["S1", "S2"]
    assert " ".join(s.text for s in out) == seg.text
    assert out[0].end == pytest.approx(2.1) and all(s.timing == "estimated" for s in out)


def _labelled():
    segs = assign_speakers([_timed_segment(), Segment(4.5, 5.5, "Thank you.", [Word("Thank", 4.5, 4.9),
                                                                               Word("you.", 5.0, 5.5)])],
                           TURNS + [SpeakerTurn("S1", 4.4, 5.6)])
    return Transcript(" ".join(s.text for s in segs), "English", 6.0, segs)


def test_exports_carry_speakers_and_the_names_given_to_them():
    t = _labelled()
    rename_speaker(t, "S1", "Alice")
    assert to_txt(t) == "Alice: Hello there. Good\n\nS2: morning to you.\n\nAlice: Thank you.\n"
    srt, vtt = to_srt(t), to_vtt(t)
    assert "Alice: Hello there. Good" in srt and "S2: morning to you." in srt
    assert "<v Alice>Hello there. Good" in vtt and "<v S2>morning to you." in vtt
    assert "<v Alice>Thank you." in to_vtt(t, karaoke=True).replace("<00:00:05.000>", "")
    data = json.loads(to_json(t))
    assert [s["speaker"] for s in data["segments"]] == ["Alice", "S2", "Alice"]
    assert data["segments"][1]["speaker_label"] == "S2"
    assert {w["speaker"] for w in data["segments"][1]["words"]} == {"S2"}
    assert data["speakers"] == [{"label": "S1", "name": "Alice", "speaking_time": 2.5},
                                {"label": "S2", "name": "S2", "speaking_time": 1.3}]


def test_merge_and_reassign_and_rename_back():
    t = _labelled()
    set_segment_speaker(t, 2, "S2")
    assert t.segments[2].speaker == "S2" and {w.speaker for w in t.segments[2].words} == {"S2"}
    merge_speakers(t, "S1", "S2")
    assert {s.speaker for s in t.segments} == {"S1"} and len(speaker_list(t)) == 1
    rename_speaker(t, "S1", "Bob")
    rename_speaker(t, "S1", "")
    assert t.speaker_names == {}
    assert Transcript.from_dict(t.to_dict()).segments[0].speaker == "S1"


def test_transcripts_without_speakers_export_as_before():
    t = Transcript("Hi there.", "English", 1.0, [Segment(0.0, 1.0, "Hi there.")])
    assert to_txt(t) == "Hi there.\n" and "speakers" not in json.loads(to_json(t))
    assert "<v" not in to_vtt(t) and ": Hi" not in to_srt(t)


@pytest.mark.parametrize("bad", ["0", "many", -1, 33, 2.5, True])
def test_speaker_counts_are_checked(bad):
    with pytest.raises(ValueError):
        check_speakers(bad)


def test_speaker_count_forms():
    assert check_speakers("AUTO") == "auto" and check_speakers("3") == 3 and check_speakers(2) == 2


def test_der_counts_miss_false_alarm_and_confusion():
    ref = [("a", 0.0, 10.0), ("b", 10.0, 20.0)]
    hyp = [("x", 0.0, 10.0), ("x", 10.0, 15.0), ("y", 21.0, 22.0)]
    r = der(ref, hyp, collar=0.0)
    assert r.missed == pytest.approx(5.0) and r.false_alarm == pytest.approx(1.0)
    assert r.confusion == pytest.approx(5.0) and r.der == pytest.approx(11 / 20)
    assert der(ref, [("q", 0, 10), ("p", 10, 20)]).der == 0.0


def test_a_missing_speaker_model_says_how_to_get_it(tmp_path, monkeypatch):
    from engine.network.speaker_encoder import SpeakerModelMissing, find_weights

    with pytest.raises(SpeakerModelMissing, match="pip install --no-deps resemblyzer"):
        find_weights(tmp_path / "nothing.pt")
