"""Transcripts show a row per sentence, with start and end, whether word times exist or not."""
from __future__ import annotations

from engine.text.sentences import sentence_spans, split_into_sentences
from engine.text.transcript import make_transcript
from engine.text.types import Segment, Word


def _words(text: str, start: float, step: float) -> list[Word]:
    out, t = [], start
    for piece in text.split():
        out.append(Word(piece, round(t, 3), round(t + step * 0.8, 3)))
        t += step
    return out


def test_sentence_spans_cut_only_at_sentence_ends():
    text = "Hello world. It costs 3.5 dollars! Is that right? “Yes.” Fine"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Hello world.", "It costs 3.5 dollars!", "Is that right?", "“Yes.”", "Fine"]
    assert [("你好。世界！")[a:b] for a, b in sentence_spans("你好。世界！")] == ["你好。", "世界！"]
    assert sentence_spans("   ") == []


def test_timed_chunk_becomes_sentences_with_their_words():
    text = "The cat sat. A dog ran fast. Birds sing."
    chunk = Segment(10.0, 20.0, text, words=_words(text, 10.5, 1.0), language="English")
    parts = split_into_sentences(chunk)
    assert [p.text for p in parts] == ["The cat sat.", "A dog ran fast.", "Birds sing."]
    assert [len(p.words) for p in parts] == [3, 4, 2]
    for p in parts:
        assert p.start == p.words[0].start and p.end == p.words[-1].end
        assert " ".join(w.text for w in p.words) == p.text      # words join to the segment text
        assert p.language == "English"
    starts = [p.start for p in parts]
    assert starts == sorted(starts) and parts[0].end <= parts[1].start


def test_untimed_chunk_shares_its_time_by_characters():
    chunk = Segment(0.0, 30.0, "Short one. " + "A much longer second sentence here." , language="English")
    parts = split_into_sentences(chunk)
    assert [p.text for p in parts] == ["Short one.", "A much longer second sentence here."]
    assert parts[0].start == 0.0 and parts[-1].end == 30.0
    assert parts[0].end == parts[1].start and 0 < parts[0].end < 15.0


def test_one_sentence_or_unmatched_words_stay_whole():
    one = Segment(0.0, 5.0, "No end mark here")
    assert split_into_sentences(one) == [one]
    odd = Segment(0.0, 5.0, "One. Two.", words=[Word("zzz", 0.1, 0.5)])
    assert split_into_sentences(odd) == [odd]


def test_transcript_rows_are_sentences_and_text_is_unchanged():
    chunks = [Segment(0.0, 30.0, "First sentence. Second sentence."), Segment(31.0, 40.0, "Third one.")]
    t = make_transcript(chunks, 40.0, "m")
    assert [s.text for s in t.segments] == ["First sentence.", "Second sentence.", "Third one."]
    assert t.text == "First sentence. Second sentence. Third one."
    assert all(s.end > s.start for s in t.segments)
