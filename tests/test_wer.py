"""The WER/CER arithmetic and text normalisation of tests/bench/wer.py (pure Python)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "bench"))

from wer import edit_distance, error_counts, find_pairs, normalize, rate


def test_normalize_lowercases_strips_punctuation_and_collapses_spaces():
    assert normalize("Hello, World!  This is   a TEST.") == "hello world this is a test"
    assert normalize("  Where is the story?\n") == "where is the story"
    assert normalize("Good luck! She left every morning.") == "good luck she left every morning"


def test_normalize_keeps_inner_apostrophes_and_digits():
    assert normalize("It's Tom's \u2019book\u2019, isn\u2019t it?") == "it's tom's book isn't it"
    assert normalize("Call 911 - now...") == "call 911 now"
    assert normalize("well-known e.g. co-op") == "well known e g co op"
    assert normalize("") == ""
    assert normalize("?!.,") == ""


def test_edit_distance():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], []) == 0
    assert edit_distance(["a", "b"], []) == 2
    assert edit_distance([], ["a"]) == 1
    assert edit_distance("abc", "abc") == 0
    assert edit_distance(["the", "cat", "sat"], ["the", "cat", "sat", "down"]) == 1
    assert edit_distance(["a", "b", "c", "d"], ["a", "x", "c"]) == 2
    assert edit_distance("flaw", "lawn") == edit_distance("lawn", "flaw") == 2


def test_error_counts_and_rates():
    words, n_words, chars, n_chars = error_counts("The cat sat on the mat.", "the cat sat on a mat")
    assert (words, n_words) == (1, 6)
    assert (chars, n_chars) == (3, len("the cat sat on the mat"))
    assert error_counts("Hello, world!", "hello world") == (0, 2, 0, 11)
    assert rate(1, 4) == 0.25
    assert rate(0, 0) == 0.0 and rate(3, 0) == 1.0


def test_find_pairs_reads_txt_and_librispeech_transcripts(tmp_path):
    (tmp_path / "a.wav").write_bytes(b"")
    (tmp_path / "a.txt").write_text("Hello there.\n")
    (tmp_path / "b.wav").write_bytes(b"")            # no reference: skipped
    book = tmp_path / "19" / "198"
    book.mkdir(parents=True)
    (book / "19-198-0000.flac").write_bytes(b"")
    (book / "19-198-0001.flac").write_bytes(b"")
    (book / "19-198.trans.txt").write_text("19-198-0000 NORTHANGER ABBEY\n19-198-0001 CHAPTER ONE\n"
                                           "19-198-0002 NO AUDIO FOR THIS ONE\n")
    pairs = [(p.relative_to(tmp_path).as_posix(), t) for p, t in find_pairs(tmp_path)]
    assert pairs == [("19/198/19-198-0000.flac", "NORTHANGER ABBEY"), ("19/198/19-198-0001.flac", "CHAPTER ONE"),
                     ("a.wav", "Hello there.")]
