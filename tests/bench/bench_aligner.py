"""The forced aligner's speed: ``Aligner.align`` one clip at a time, and a batch submitted at once
and stepped to the end (as a file's chunks are), on held-out espeak-ng sentences and the trained
tiny aligner (tests/models/forced-aligner-tiny).

    python tests/bench/bench_aligner.py                        # this tree
    python tests/bench/bench_aligner.py --before /tmp/old-tree  # and another checkout, rounds alternated

Each tree runs in its own process (its ``engine`` first on the path); rounds alternate between the
trees so a machine shared with other work slows both alike. Prints the median of each measure and
after/before ratios, and checks both trees give the same word times.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def make_clips(path: Path, count: int) -> None:
    from real_speech import heldout_sentences, speak

    texts = heldout_sentences()[:count]
    np.savez(path, texts=np.array(texts), **{f"clip{i}": speak(t) for i, t in enumerate(texts)})


def measure(clips_path: str, aligner_dir: str, repeats: int) -> dict:
    """In the child: load the aligner of the ``engine`` on the path, time it, return times and words."""
    import engine

    data = np.load(clips_path)
    texts = [str(t) for t in data["texts"]]
    clips = [data[f"clip{i}"] for i in range(len(texts))]
    aligner = engine.load_aligner(aligner_dir, device="cpu", dtype="float32")
    aligner.align(clips[0], texts[0], language="English")   # warm-up
    one, batch, words = [], [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        words = [[(w.text, w.start, w.end) for w in aligner.align(c, t, language="English")]
                 for c, t in zip(clips, texts)]
        one.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        reqs = [aligner.submit(c, t.split()) for c, t in zip(clips, texts)]
        while aligner.has_work():
            aligner.step()
        batch.append(time.perf_counter() - t0)
        assert all(r.finished and not r.error for r in reqs)
    return {"engine": engine.__file__, "one_by_one_s": one, "batch_s": batch, "words": words,
            "audio_s": sum(len(c) for c in clips) / 16000}


def run_tree(tree: Path, clips: Path, aligner_dir: str, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, __file__, "--child", str(clips), "--aligner", aligner_dir,
                          "--repeats", str(repeats)], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="another checkout to compare with (e.g. a git worktree of main)")
    ap.add_argument("--aligner", default=str(ROOT / "tests" / "models" / "forced-aligner-tiny"))
    ap.add_argument("--clips", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.aligner, args.repeats)))
        return
    trees = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    with tempfile.TemporaryDirectory() as tmp:
        clips = Path(tmp) / "clips.npz"
        make_clips(clips, args.clips)
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                runs[name].append(run_tree(trees[name], clips, args.aligner, args.repeats))
    medians = {}
    for name, results in runs.items():
        one = statistics.median(t for res in results for t in res["one_by_one_s"])
        batch = statistics.median(t for res in results for t in res["batch_s"])
        medians[name] = (one, batch)
        print(f"{name:6s} engine {results[0]['engine']}: {args.clips} clips ({results[0]['audio_s']:.1f} s audio): "
              f"align one by one {one * 1000:.0f} ms, submitted together {batch * 1000:.0f} ms "
              f"(median of {len(results) * args.repeats})")
    if "before" in runs:
        (a1, ab), (b1, bb) = medians["after"], medians["before"]
        same = runs["after"][0]["words"] == runs["before"][0]["words"]
        print(f"after/before: one by one {a1 / b1:.2f}, together {ab / bb:.2f}; same word times: {same}")


if __name__ == "__main__":
    main()
