"""Sentence placement on speech islands, alignment checks, and the cue rules, on hand-made inputs."""
from __future__ import annotations

from cue_rules import cue_rule_breaks

from engine.text.alignment_check import alignment_problem, fallback_note
from engine.text.cues import CueOptions, build_cues
from engine.text.placement import place_sentences
from engine.text.types import Segment, Transcript, Word


def test_one_sentence_per_island_takes_the_island():
    chunk = Segment(0.0, 30.0, "The cat sat. A much longer sentence follows here. Yes.", language="English")
    islands = [(1.0, 2.0), (4.5, 8.0), (12.0, 12.6)]
    parts = place_sentences(chunk, islands)
    assert [(p.start, p.end) for p in parts] == islands
    assert all(p.timing == "estimated" and p.language == "English" for p in parts)
    assert " ".join(p.text for p in parts) == chunk.text


def test_sentences_never_sit_in_a_pause_and_share_an_island_by_length():
    chunk = Segment(10.0, 20.0, "Short one. A second and much longer sentence.")
    parts = place_sentences(chunk, [(11.0, 15.0)])        # both in one island: shared by characters
    assert parts[0].start == 11.0 and parts[-1].end == 15.0
    assert parts[0].end == parts[1].start and 11.5 < parts[0].end < 13.0
    # a pause inside a sentence (a comma) does not take a sentence boundary when another pause fits
    chunk = Segment(0.0, 10.0, "Today, we saw the river near the house. Where is Tom?")
    parts = place_sentences(chunk, [(0.5, 1.2), (1.5, 4.0), (5.5, 6.8)])
    assert [p.start for p in parts] == [0.5, 5.5] and parts[0].end == 4.0
    pauses = [(1.2, 1.5), (4.0, 5.5)]
    for p in parts:
        assert not any(lo < p.start < hi or lo < p.end < hi for lo, hi in pauses)


def test_more_sentences_than_islands_and_no_islands():
    chunk = Segment(0.0, 9.0, "One. Two. Three.")
    parts = place_sentences(chunk, [(1.0, 2.0), (5.0, 6.0)])
    assert len(parts) == 3 and parts[0].start == 1.0 and parts[-1].end == 6.0
    assert all(a.end <= b.start for a, b in zip(parts, parts[1:]))
    whole = place_sentences(Segment(2.0, 4.0, "Hello there."), None)
    assert [(p.start, p.end) for p in whole] == [(2.0, 4.0)]


def _words(n, start, step, length):
    return [Word(f"w{i}", round(start + i * step, 3), round(start + i * step + length, 3)) for i in range(n)]


def test_plausible_alignment_passes_and_collapsed_ones_are_named():
    speech = [(0.0, 3.0), (4.0, 7.0)]
    assert alignment_problem(_words(12, 0.1, 0.55, 0.4), speech) == ""
    assert "no duration" in alignment_problem(_words(10, 1.0, 0.1, 0.0), speech)
    assert "crowded" in alignment_problem(_words(10, 0.1, 0.1, 0.08), speech)
    assert "outside the speech" in alignment_problem(_words(6, 0.2, 0.45, 0.3) + _words(4, 8.0, 0.5, 0.3), speech)
    assert "back in time" in alignment_problem(_words(4, 0.1, 1.5, 0.4), speech, [0, 400, 300, 200, 100, 50, 40, 0])
    assert fallback_note(180.0, 210.0) == "word times for 3:00-3:30 could not be aligned; times there are estimated"


def test_cue_rules_without_word_times():
    segs = [Segment(0.5, 1.6, "Hello there, Tom."), Segment(1.7, 1.9, "!"),
            Segment(4.0, 4.4, "Yes."), Segment(4.45, 6.0, "We will help our house after lunch.")]
    t = Transcript(text=" ".join(s.text for s in segs), language="English", duration=8.0, segments=segs)
    cues = build_cues(t, CueOptions(min_duration=1.0))
    assert not cue_rule_breaks(cues, duration=8.0), [(c.start, c.end, c.text) for c in cues]
    assert all(any(ch.isalnum() for ch in c.text) for c in cues)
    assert " ".join(c.text.replace("\n", " ") for c in cues).replace(" !", "!") == t.text.replace(" !", "!")


def test_cue_rules_with_word_times():
    words = [Word("Good", 0.5, 0.8), Word("morning,", 0.8, 1.3), Word("Anna.", 1.3, 1.7),
             Word("Yes.", 3.0, 3.2), Word("The", 3.3, 3.4), Word("cat", 3.4, 3.7), Word("sat.", 3.7, 4.0)]
    segs = [Segment(0.5, 1.7, "Good morning, Anna.", words=words[:3], timing="aligned"),
            Segment(3.0, 3.2, "Yes.", words=words[3:4], timing="aligned"),
            Segment(3.3, 4.0, "The cat sat.", words=words[4:], timing="aligned")]
    t = Transcript(text=" ".join(s.text for s in segs), language="English", duration=5.0, segments=segs)
    cues = build_cues(t)
    assert not cue_rule_breaks(cues, duration=5.0), [(c.start, c.end, c.text) for c in cues]
    assert [c.text.replace("\n", " ") for c in cues][-1].startswith("Yes.")
