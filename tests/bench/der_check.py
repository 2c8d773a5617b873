"""Our DER (tests/der.py) against pyannote.metrics on the same reference/hypothesis pairs.

    python tests/bench/der_check.py REF.rttm [HYP.rttm ...]     (a Python with pyannote.metrics)

Without hypothesis files it scores perturbed copies of the reference (shifted boundaries,
swapped labels, dropped and invented turns). pyannote's collar is the total width, so ours
(0.25 s each side) is compared with pyannote collar=0.5; skip_overlap=False on both.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from der import der, read_rttm  # noqa: E402


def perturbations(ref, seed=0):
    rng = random.Random(seed)
    labels = sorted({s for s, _, _ in ref})
    yield "shifted 0.3 s", [(s, a + 0.3, b + 0.3) for s, a, b in ref]
    yield "labels renamed", [(f"x{labels.index(s)}", a, b) for s, a, b in ref]
    yield "random label swaps", [(rng.choice(labels) if rng.random() < 0.3 else s, a, b) for s, a, b in ref]
    yield "drop 20%, add 1 false turn", [t for t in ref if rng.random() > 0.2] + [("x9", 1.0, 3.0)]
    yield "one speaker for all", [("one", a, b) for _, a, b in ref]


def main() -> None:
    from pyannote.core import Annotation, Segment
    from pyannote.metrics.diarization import DiarizationErrorRate

    ref = read_rttm(sys.argv[1])
    hyps = [(p, read_rttm(p)) for p in sys.argv[2:]] or list(perturbations(ref))

    def ann(turns):
        a = Annotation()
        for i, (s, x, y) in enumerate(turns):
            a[Segment(x, y), i] = s
        return a

    print(f"{'hypothesis':32} {'ours':>8} {'pyannote':>9}   (collar 0.25 s each side)")
    for name, hyp in hyps:
        for collar in (0.0, 0.25):
            ours = der(ref, hyp, collar=collar).der
            theirs = DiarizationErrorRate(collar=2 * collar, skip_overlap=False)(ann(ref), ann(hyp))
            print(f"{str(name)[:26]:26} c={collar:<4} {ours:8.4f} {theirs:9.4f}")


if __name__ == "__main__":
    main()
