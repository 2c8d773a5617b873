"""Diarization error rate (DER), our own implementation, with RTTM reading.

DER = (missed speech + false alarm + speaker confusion) / reference speech, counted on a 10 ms
grid. Reference and hypothesis speakers are mapped one to one so that the time they agree on
is largest (every mapping is tried for up to 7 speakers, greedy beyond). A collar of
``collar`` seconds on each side of every reference boundary is not scored (the md-eval
convention; pyannote.metrics calls the total width its ``collar``, so collar=0.25 here equals
pyannote's collar=0.5). Overlapped speech is scored (several reference speakers per frame).
Checked against pyannote.metrics in tests/bench/der_check.py.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

STEP = 0.01


@dataclass
class DERResult:
    der: float
    missed: float       # seconds
    false_alarm: float
    confusion: float
    total: float        # seconds of reference speech scored

    def parts(self) -> dict:
        t = max(self.total, 1e-9)
        return {"DER": self.der, "miss": self.missed / t, "fa": self.false_alarm / t, "conf": self.confusion / t}


def read_rttm(path) -> list[tuple[str, float, float]]:
    """``(speaker, start, end)`` per SPEAKER line of an RTTM file."""
    turns = []
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if f and f[0] == "SPEAKER":
            start, dur = float(f[3]), float(f[4])
            turns.append((f[7], start, start + dur))
    return turns


def write_rttm(path, turns, uri: str = "file") -> None:
    with open(path, "w", encoding="utf-8") as out:
        for spk, a, b in turns:
            out.write(f"SPEAKER {uri} 1 {a:.3f} {b - a:.3f} <NA> <NA> {spk} <NA> <NA>\n")


def _grid(turns, labels, n):
    m = np.zeros((len(labels), n), bool)
    for spk, a, b in turns:
        m[labels.index(spk), int(round(a / STEP)):int(round(b / STEP))] = True
    return m


def _best_mapping(overlap: np.ndarray) -> float:
    """Largest total overlap over one-to-one mappings (rows: reference, cols: hypothesis)."""
    r, h = overlap.shape
    if r == 0 or h == 0:
        return 0.0
    if min(r, h) <= 7 and max(r, h) <= 8:
        if r <= h:
            return max(sum(overlap[i, p[i]] for i in range(r)) for p in itertools.permutations(range(h), r))
        return max(sum(overlap[p[j], j] for j in range(h)) for p in itertools.permutations(range(r), h))
    ov, total = overlap.astype(float).copy(), 0.0
    for _ in range(min(r, h)):
        i, j = np.unravel_index(np.argmax(ov), ov.shape)
        total += ov[i, j]
        ov[i, :], ov[:, j] = -1, -1
    return total


def der(reference, hypothesis, collar: float = 0.25) -> DERResult:
    """DER of ``hypothesis`` against ``reference``: lists of ``(speaker, start, end)``."""
    end = max([b for _, _, b in reference] + [b for _, _, b in hypothesis] + [0.0])
    n = int(np.ceil(end / STEP)) + 1
    ref_labels = sorted({s for s, _, _ in reference})
    hyp_labels = sorted({s for s, _, _ in hypothesis})
    ref, hyp = _grid(reference, ref_labels, n), _grid(hypothesis, hyp_labels, n)
    scored = np.ones(n, bool)
    c = int(round(collar / STEP))
    for _, a, b in reference:
        for t in (a, b):
            k = int(round(t / STEP))
            scored[max(0, k - c):k + c] = False
    ref, hyp = ref[:, scored], hyp[:, scored]
    nref, nhyp = ref.sum(0), hyp.sum(0)
    total = float(nref.sum()) * STEP
    missed = float(np.maximum(nref - nhyp, 0).sum()) * STEP
    fa = float(np.maximum(nhyp - nref, 0).sum()) * STEP
    overlap = ref.astype(np.int32) @ hyp.T.astype(np.int32)
    correct = _best_mapping(overlap) * STEP
    confusion = float(np.minimum(nref, nhyp).sum()) * STEP - correct
    value = (missed + fa + confusion) / total if total else 0.0
    return DERResult(value, missed, fa, confusion, total)
