"""The automatic speaker count before/after: DER with ``auto`` on cached window embeddings.

    python tests/bench/speaker_count_check.py --sample SAMPLE_DIR --weights PRETRAINED_PT [--minutes 1 10]
        [--old OLD_speaker_clustering.py]

Embeds every file once (GE2E, Diarizer.add over the whole file) and caches the Diarizer's
windows under /tmp/qwen3-asr-diarization-bench/emb; then runs Diarizer.finish(None) with this
tree's clustering and, with --old (e.g. ``git show REV:engine/pipelines/speaker_clustering.py``
saved to a file), with that one. Files: the pyannote sample, each of its two speakers alone
(one voice), one espeak voice, and the 2/3/4-voice conversations of bench_diarization.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bench")]
CACHE = Path("/tmp/qwen3-asr-diarization-bench/emb")


def _files(args):
    import soundfile as sf
    from bench_diarization import conversation
    from conversations import make_conversation
    from der import read_rttm

    sample = Path(args.sample)
    ref = read_rttm(sample / "sample.rttm")
    audio, _ = sf.read(str(sample / "sample.wav"), dtype="float32")
    yield "pyannote sample", lambda: audio, ref
    for spk in sorted({r[0] for r in ref}):
        def alone(spk=spk):
            parts, turns, t = [], [], 0.0
            for name, a, b in ref:
                if name == spk:
                    x = audio[int(a * 16000):int(b * 16000)]
                    parts += [x, np.zeros(8000, np.float32)]
                    turns.append((spk, t, t + len(x) / 16000))
                    t += len(x) / 16000 + 0.5
            alone.turns = turns
            return np.concatenate(parts)
        yield f"sample {spk} alone", alone, None
    one = make_conversation(1, 1, seed=7)
    yield "espeak 1 voice, 1 min", lambda: one.samples, one.turns
    for minutes in args.minutes:
        for v in (2, 3, 4):
            wav, turns = conversation(v, minutes)
            yield f"espeak {v} voices, {minutes:g} min", (lambda wav=wav: sf.read(str(wav), dtype="float32")[0]), turns


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sample", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--minutes", type=float, nargs="*", default=[1.0])
    p.add_argument("--old")
    args = p.parse_args()
    from der import der

    import engine.pipelines.diarize as D

    CACHE.mkdir(parents=True, exist_ok=True)
    embedder = None
    methods = {"new": D.cluster}
    if args.old:
        spec = importlib.util.spec_from_file_location("old_clustering", args.old)
        old = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(old)
        methods = {"old": old.cluster, **methods}
    for name, load, ref in _files(args):
        path = CACHE / (name.replace(" ", "_").replace(",", "") + ".pkl")
        if path.exists():
            state, ref = pickle.loads(path.read_bytes())
        else:
            embedder = embedder or D.GE2EEmbedder(args.weights)
            d = D.Diarizer(embedder)
            samples = load()
            ref = ref if ref is not None else load.turns
            d.add(samples)
            state = {k: d.__dict__[k] for k in ("_windows", "_regions", "_embeddings")}
            path.write_bytes(pickle.dumps((state, ref)))
        row = [name, str(len({r[0] for r in ref}))]
        for method in methods.values():
            d = D.Diarizer(None)
            d.__dict__.update(state)
            D.cluster, saved = method, D.cluster
            try:
                hyp = [(t.speaker, t.start, t.end) for t in d.finish(None)]
            finally:
                D.cluster = saved
            row += [str(len({h[0] for h in hyp})), f"{100 * der(ref, hyp).der:.2f}%"]
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
