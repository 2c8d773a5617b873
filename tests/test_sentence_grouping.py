"""A chunk's sentences aligned one by one (the default) or in runs up to the aligner's limit.

tests/bench/timing_table.py --grouping measures which times better; these tests keep every
grouping correct: each sentence gets its own words (its text, in order, inside the chunk) or is
refused with a note, never another sentence's words.
"""
from __future__ import annotations

import numpy as np
import pytest

from engine.pipelines import sentence_alignment
from engine.pipelines.aligner import Aligner
from engine.pipelines.sentence_alignment import SentenceAligner, aligner_limit_seconds
from engine.text.types import Segment
from real_speech import ALIGNER_DIR, SR, speak

TEXTS = ["See you soon, Nina.", "Where is the story?", "Can you take the cat, please?"]


@pytest.fixture(scope="module")
def aligner():
    return Aligner(ALIGNER_DIR, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def chunk():
    """Three sentences with 0.8 s pauses, the chunk starting 10 s into its file; the true sentence times."""
    parts, times, pos = [np.zeros(SR // 4, np.float32)], [], SR // 4
    for text, voice in zip(TEXTS, ["en", "en+m5", "en-us+f2"]):
        clip = speak(text, voice)
        times.append((10.0 + pos / SR, 10.0 + (pos + len(clip)) / SR))
        parts += [clip, np.zeros(int(0.8 * SR), np.float32)]
        pos += len(clip) + int(0.8 * SR)
    return np.concatenate(parts), times


def test_the_aligner_limit_is_read_from_its_config(aligner):
    assert aligner_limit_seconds(aligner) == pytest.approx(375 * 0.080)


@pytest.mark.parametrize("grouping", ["sentence", "run", "run+retry"])
def test_every_grouping_gives_each_sentence_its_own_words(aligner, chunk, grouping):
    samples, times = chunk
    sentences = [Segment(a - 0.05, b + 0.05, text, language="English") for text, (a, b) in zip(TEXTS, times)]
    islands = [(a, b) for a, b in times]
    problems: list[str] = []
    job = SentenceAligner(aligner, problems, grouping=grouping)
    job.submit(sentences, samples, 10.0, islands)
    while job.busy:
        aligner.step()
        job.collect()
    assert problems == []
    notes = job.notes(sentences)
    aligned = [s for s in sentences if s.timing == "aligned"]
    assert len(aligned) + sum(1 for s in sentences if s.timing == "estimated") == len(TEXTS)
    assert len(notes) <= len(TEXTS) - len(aligned)
    for sent, text in zip(sentences, TEXTS):
        assert sent.text == text
        if sent.timing == "aligned":
            assert " ".join(w.text for w in sent.words) == text
            assert all(a.start <= b.start for a, b in zip(sent.words, sent.words[1:]))
            assert 10.0 <= sent.words[0].start and sent.words[-1].end <= 10.0 + len(samples) / SR
    if grouping == "sentence":
        assert aligned, "the tiny aligner times these short sentences one by one"


def test_an_unknown_grouping_is_refused(aligner):
    with pytest.raises(ValueError, match="grouping"):
        SentenceAligner(aligner, [], grouping="chunks")
    assert sentence_alignment.GROUPING == "sentence"
