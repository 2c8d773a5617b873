"""espeak-ng recordings whose sentence times are known, and how far a transcript's times are from them.

Sentences come from the trained test model's vocabulary (tools/train_test_model.py), one sentence per
utterance, spoken by several voices and joined with pauses of known length, so each sentence's true
start and end are exact. ``sentence_start_errors`` pairs the transcript's segments with the spoken
sentences by their words (the test model gets some words wrong) and gives |start error| per pair.
"""
from __future__ import annotations

import difflib
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from real_speech import SR, heldout_sentences, speak

VOICES = ["en", "en-us+f2", "en+m5", "en-gb-x-rp+m3", "en-us+f3"]


@dataclass
class KnownTimes:
    path: Path
    samples: np.ndarray
    sentences: list[str]
    times: list[tuple[float, float]]      # (start, end) seconds of each sentence


def one_sentence_texts() -> list[str]:
    """Held-out sentences that are exactly one sentence (no "Hello! Tom ran." pairs)."""
    return [t for t in heldout_sentences() if not re.search(r"[.!?]\s", t)]


def known_times_recording(folder: Path, seconds: float, seed: int = 0, voices=VOICES,
                          pauses: tuple[float, float] = (0.5, 2.5), name: str = "known.wav") -> KnownTimes:
    """Sentences by ``voices`` in turn with pauses drawn from ``pauses`` until ``seconds`` long."""
    rng = random.Random(seed)
    texts = one_sentence_texts()
    rng.shuffle(texts)
    lead = int(SR * 0.4)
    parts, times, sentences, pos, i = [np.zeros(lead, np.float32)], [], [], lead, 0
    while pos < seconds * SR:
        text = texts[i % len(texts)]
        clip = speak(text, voices[i % len(voices)], speed=rng.randint(150, 185))
        gap = np.zeros(int(SR * rng.uniform(*pauses)), np.float32)
        parts += [clip, gap]
        times.append((pos / SR, (pos + len(clip)) / SR))
        sentences.append(text)
        pos += len(clip) + len(gap)
        i += 1
    samples = np.concatenate(parts)
    path = Path(folder) / name
    sf.write(path, samples, SR, subtype="PCM_16")
    return KnownTimes(path, sf.read(path, dtype="float32")[0], sentences, times)


def _norm_words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def sentence_start_errors(known: KnownTimes, segments) -> list[float]:
    """|start error| in seconds for each spoken sentence paired with a transcript segment.

    Words of the reference and of the transcript are matched in order (difflib); a sentence is
    paired with the segment holding most of its matched words, when those are at least half of its
    words and that segment's matched words belong mostly to this sentence (a segment spanning two
    sentences pairs with one at most; a misheard sentence with none)."""
    ref, hyp = [], []
    for k, s in enumerate(known.sentences):
        ref += [(w, k) for w in _norm_words(s)]
    for k, seg in enumerate(segments):
        hyp += [(w, k) for w in _norm_words(seg.text)]
    sm = difflib.SequenceMatcher(a=[w for w, _ in ref], b=[w for w, _ in hyp], autojunk=False)
    votes: dict[tuple[int, int], int] = {}
    for block in sm.get_matching_blocks():
        for d in range(block.size):
            key = (ref[block.a + d][1], hyp[block.b + d][1])
            votes[key] = votes.get(key, 0) + 1
    sizes = {k: len(_norm_words(s)) for k, s in enumerate(known.sentences)}
    votes = {key: n for key, n in votes.items() if n >= 0.5 * sizes[key[0]]}   # most of its words
    best_seg, best_ref = {}, {}
    for (r, h), n in votes.items():
        if n > votes.get((r, best_seg.get(r, -1)), 0):
            best_seg[r] = h
        if n > votes.get((best_ref.get(h, -1), h), 0):
            best_ref[h] = r
    return [abs(segments[h].start - known.times[r][0]) for r, h in best_seg.items() if best_ref.get(h) == r]


def zero_length_share(segments) -> tuple[int, int]:
    """(zero-length words, words) over the segments' word times."""
    words = [w for s in segments for w in s.words]
    return sum(1 for w in words if w.end - w.start <= 0.0), len(words)
