"""Sentence times without an aligner: a chunk's sentences placed on the speech the VAD heard in it.

A chunk (up to 30 s) holds several sentences, and its audio holds speech islands separated by
pauses. Sharing the chunk's whole time by character count fills the pauses and drifts; here the
sentences are laid over the speech only. Each boundary between two sentences goes to a pause when
one lies near where the characters put it (people pause between sentences), matched in order by a
small dynamic programme; a boundary with no pause near it, or a run of sentences in one island, is
shared out by characters within that stretch of speech. Times that land in a pause move to the
speech on the right side of it, so no sentence starts or ends inside a pause the VAD saw. The result
is an estimate: every segment it makes says ``timing="estimated"``.
"""
from __future__ import annotations

from engine.text.sentences import sentence_spans
from engine.text.types import Segment


def _islands(segment: Segment, speech) -> list[tuple[float, float]]:
    """The speech islands inside the segment, sorted and clipped; the whole segment when none."""
    out = []
    for a, b in sorted(speech or ()):
        a, b = max(a, segment.start), min(b, segment.end)
        if b > a:
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
    return out or [(segment.start, max(segment.end, segment.start))]


def _weight(text: str) -> float:
    """Speaking time a sentence needs, in characters (letters and digits, plus a little per word)."""
    return sum(c.isalnum() for c in text) + 2.0 * len(text.split()) or 1.0


def _match_boundaries(expected: list[float], pauses: list[float], unmatched_cost: float) -> list[int | None]:
    """For each expected boundary (speech time), the index of the pause it goes to, or None.

    An order-keeping match of boundaries to pauses minimising the summed distance, where leaving a
    boundary without a pause costs ``unmatched_cost`` and a pause without a boundary costs nothing
    (people pause inside sentences too)."""
    k, m = len(expected), len(pauses)
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(k + 1)]
    move = [[None] * (m + 1) for _ in range(k + 1)]
    for g in range(m + 1):
        cost[0][g] = 0.0
    for b in range(1, k + 1):
        cost[b][0] = cost[b - 1][0] + unmatched_cost
        move[b][0] = "skip_boundary"
        for g in range(1, m + 1):
            options = [(cost[b - 1][g] + unmatched_cost, "skip_boundary"),
                       (cost[b][g - 1], "skip_pause"),
                       (cost[b - 1][g - 1] + abs(expected[b - 1] - pauses[g - 1]), "match")]
            cost[b][g], move[b][g] = min(options, key=lambda o: o[0])
    out: list[int | None] = [None] * k
    b, g = k, m
    while b > 0:
        step = move[b][g]
        if step == "match":
            out[b - 1] = g - 1
            b, g = b - 1, g - 1
        elif step == "skip_pause":
            g -= 1
        else:
            b -= 1
    return out


def _to_file_time(x: float, islands, cum: list[float], *, start: bool) -> float:
    """File time of speech time ``x``; at an island edge a start goes to the next island's start."""
    for i, (a, b) in enumerate(islands):
        lo, hi = cum[i], cum[i + 1]
        if x < hi or (not start and x <= hi) or i == len(islands) - 1:
            return min(b, a + max(0.0, x - lo))
    return islands[-1][1]


def place_sentences(segment: Segment, speech=None) -> list[Segment]:
    """``segment`` cut into sentences placed on its ``speech`` islands ((start, end) seconds).

    Every piece is marked ``timing="estimated"``; the text is unchanged (the pieces joined by
    spaces give it back, whitespace aside)."""
    spans = sentence_spans(segment.text)
    if not spans:
        return []
    islands = _islands(segment, speech)
    cum = [0.0]
    for a, b in islands:
        cum.append(cum[-1] + (b - a))
    total = cum[-1]
    weights = [_weight(segment.text[a:b]) for a, b in spans]
    wcum = [0.0]
    for w in weights:
        wcum.append(wcum[-1] + w)
    k = len(spans)
    expected = [total * wcum[i] / wcum[-1] for i in range(1, k)]
    pauses = cum[1:-1]
    matched = _match_boundaries(expected, pauses, unmatched_cost=0.5 * total / k + 0.3) if k > 1 else []
    # anchors: boundary index -> speech time; unmatched boundaries shared by weight between anchors
    anchors = {0: 0.0, k: total}
    for i, g in enumerate(matched, start=1):
        if g is not None:
            anchors[i] = pauses[g]
    keys = sorted(anchors)
    position = [0.0] * (k + 1)
    for lo, hi in zip(keys, keys[1:]):
        for i in range(lo, hi + 1):
            share = (wcum[i] - wcum[lo]) / ((wcum[hi] - wcum[lo]) or 1.0)
            position[i] = anchors[lo] + (anchors[hi] - anchors[lo]) * share
    out = []
    for i, (a, b) in enumerate(spans):
        start = _to_file_time(position[i], islands, cum, start=True)
        end = max(start, _to_file_time(position[i + 1], islands, cum, start=False))
        out.append(Segment(start=round(start, 3), end=round(end, 3), text=segment.text[a:b],
                           language=segment.language, timing="estimated", speaker=segment.speaker))
    return out
