"""Multi-sentence training clips made from cached single-sentence log-mel features.

The test model first learned one sentence per clip, and then turned a VAD chunk or a live
utterance holding several sentences with pauses into wrong words. Real recordings put several
sentences, with pauses, in one chunk, so the model must see that too. Re-synthesising long clips
with espeak-ng would cost minutes per thousand clips; joining the cached features costs nothing
and is exact for the parts of each clip (see ``join_features``).
"""
from __future__ import annotations

import random
from collections import defaultdict

import torch

FRAMES_PER_S = 100     # mel frames per second (hop 160 at 16 kHz)


def join_features(parts: list[torch.Tensor], gaps: list[int], lead: int = 0, tail: int = 0) -> torch.Tensor:
    """Log-mel of the clips' audio joined with digital silence between them.

    Each stored clip is ``(max(L, M_i - 8) + 4) / 4`` with ``L`` the log10 mel and ``M_i`` the clip's
    own maximum. The joined audio has the maximum ``M = max(M_i)`` and its floor ``M - 8`` is at or
    above every clip's own floor, so re-clamping each part at the new floor gives exactly the features
    of the joined audio (silence, log10(1e-10), sits below any floor). Frames at the joins, where the
    STFT window would straddle two parts, are the only approximation.
    parts: [128, T_i] each; gaps: len(parts) - 1 frame counts; returns [128, lead + sum(T_i) + sum(gaps) + tail].
    """
    if len(gaps) != len(parts) - 1:
        raise ValueError(f"{len(parts)} parts need {len(parts) - 1} gaps, got {len(gaps)}")
    parts = [p.float() for p in parts]
    floor = max(float(p.max()) for p in parts) - 2.0     # (M - 8 + 4) / 4 = M_normalised - 2
    silence = lambda n: torch.full((parts[0].shape[0], n), floor)  # noqa: E731
    pieces = [silence(lead)]
    for k, p in enumerate(parts):
        pieces.append(p)
        pieces.append(silence(gaps[k] if k < len(gaps) else tail))
    return torch.clamp(torch.cat(pieces, dim=1), min=floor)


def multi_sentence_clips(data: list[dict], n: int, rng: random.Random, *, max_frames: int = 2000,
                         max_parts: int = 5, gap_s: tuple[float, float] = (0.3, 2.5)) -> list[dict]:
    """``n`` clips of 2-``max_parts`` sentences (half of one voice, half of mixed voices), joined with
    pauses of ``gap_s`` seconds.

    data: cached items ``dict(text, voice, feats)``; noise-only items (empty text) are not used.
    Returns ``dict(text, voice, feats)`` like the cache, the text the sentences joined by spaces.
    """
    by_voice: dict[str, list[dict]] = defaultdict(list)
    for d in data:
        if d["text"]:
            by_voice[d["voice"]].append(d)
    voices = [v for v, ds in by_voice.items() if len(ds) >= max_parts]
    if not voices:
        raise ValueError("no voice has enough sentences to join")
    everyone = [d for v in voices for d in by_voice[v]]
    out = []
    while len(out) < n:
        # Half one voice, half a conversation: each sentence by anyone (a speaker change mid-chunk).
        pool = by_voice[rng.choice(voices)] if rng.random() < 0.5 else everyone
        want = rng.randint(2, max_parts)
        parts, gaps, frames = [], [], 0
        for d in rng.sample(pool, want):
            gap = int(FRAMES_PER_S * rng.uniform(*gap_s)) if parts else 0
            if parts and frames + gap + d["feats"].shape[1] > max_frames:
                break
            if parts:
                gaps.append(gap)
            parts.append(d)
            frames += gap + d["feats"].shape[1]
        if len(parts) < 2:
            continue
        lead, tail = (int(FRAMES_PER_S * rng.uniform(0.0, 0.5)) for _ in range(2))
        feats = join_features([d["feats"] for d in parts], gaps, lead, tail)
        out.append(dict(text=" ".join(d["text"] for d in parts), voice=parts[0]["voice"],
                        feats=feats.to(torch.float16)))
    return out


def random_context(texts: list[str], rng: random.Random, max_chars: int = 200) -> str:
    """Text for the system turn, as live captions send the tail of what was committed before: a few
    unrelated sentences, cut at the front to ``max_chars`` like the stream's recent context."""
    context = " ".join(rng.choice(texts) for _ in range(rng.randint(1, 8)))
    return context[-rng.randint(20, max_chars):].lstrip()
