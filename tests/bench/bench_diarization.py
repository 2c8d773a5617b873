"""Diarization: DER of each speaker model on real and synthetic speech, its speed and memory,
and the time it adds to a transcription.

    python tests/bench/bench_diarization.py --sample DIR --weights PRETRAINED_PT [--minutes 1 10]
        [--voices 2 3 4] [--embedders ge2e mfcc] [--ratio]

DIR holds the pyannote.audio wheel's sample.wav and sample.rttm (``pip download --no-deps
pyannote.audio==4.0.7``, unzip pyannote/audio/sample/*); PRETRAINED_PT is the resemblyzer
wheel's resemblyzer/pretrained.pt. Synthetic conversations come from tests/conversations.py
(cached under /tmp). DER uses tests/der.py (collar 0.25 s each side, overlap scored).
Each embedder runs in its own process so that its peak memory (max RSS) is its own.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "bench")]

CACHE = Path("/tmp/qwen3-asr-diarization-bench")


def conversation(voices: int, minutes: float):
    from conversations import make_conversation, write_wav

    CACHE.mkdir(exist_ok=True)
    wav, ref = CACHE / f"conv{voices}_{minutes:g}min.wav", CACHE / f"conv{voices}_{minutes:g}min.json"
    if not wav.exists():
        conv = make_conversation(voices, minutes, seed=100 * voices + int(minutes))
        write_wav(wav, conv.samples)
        ref.write_text(json.dumps({"turns": conv.turns, "lines": conv.lines}))
    return wav, [tuple(t) for t in json.loads(ref.read_text())["turns"]]


def files(args):
    out = []
    if args.sample:
        from der import read_rttm

        out.append(("pyannote sample (real, 2 spk)", Path(args.sample) / "sample.wav",
                    read_rttm(Path(args.sample) / "sample.rttm"), 2))
    for minutes in args.minutes:
        for v in args.voices:
            wav, turns = conversation(v, minutes)
            out.append((f"espeak {v} voices, {minutes:g} min", wav, turns, v))
    return out


def run_embedder(args) -> None:
    """Child process: one embedder over every file; prints one JSON line per file and count mode."""
    import soundfile as sf
    import torch

    from der import der
    from engine.pipelines.diarize import Diarizer, GE2EEmbedder

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if args.child == "ge2e":
        embedder = GE2EEmbedder(args.weights)
    else:
        from mfcc_embedder import MFCCEmbedder

        embedder = MFCCEmbedder()
    load_s = time.perf_counter() - t0
    for name, wav, ref, n in files(args):
        samples, sr = sf.read(str(wav), dtype="float32")
        assert sr == 16000
        d = Diarizer(embedder)
        t = time.perf_counter()
        d.add(samples)
        embed_s = time.perf_counter() - t
        for mode in ("auto", n):
            t = time.perf_counter()
            turns = d.finish(None if mode == "auto" else n)
            total = embed_s + time.perf_counter() - t
            hyp = [(x.speaker, x.start, x.end) for x in turns]
            r = der(ref, hyp)
            print(json.dumps({"embedder": args.child, "file": name, "mode": str(mode),
                              "speakers_found": len({h[0] for h in hyp}), **{k: float(v) for k, v in r.parts().items()},
                              "seconds": total, "audio_s": len(samples) / 16000,
                              "s_per_min": total / (len(samples) / 16000 / 60), "load_s": load_s,
                              "threads": torch.get_num_threads()}), flush=True)
    print(json.dumps({"embedder": args.child, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "rss_before_load_mb": rss0 / 1024}), flush=True)


def ratio(args) -> None:
    """Diarization time inside a file job against the same file's transcription (``--model``: the
    tiny test model by default; ``--model widened`` the trained tiny model widened to 0.6B's size)."""
    import engine

    model = args.model or str(ROOT / "tests/models/qwen3-asr-tiny")
    if model == "widened":
        sys.path.insert(0, str(ROOT / "tests/bench"))
        from common import widened_checkpoint

        model = str(widened_checkpoint())
    eng = engine.load(model, aligner=str(ROOT / "tests/models/forced-aligner-tiny"))
    print(f"model {Path(model).name}, dtype {eng.torch_dtype}", flush=True)
    eng.speaker_model = args.weights
    for v in args.voices:
        wav, ref = conversation(v, args.minutes[0])
        for speakers in (None, v):
            t = time.perf_counter()
            job = eng.submit_file(str(wav), word_timestamps=True, max_chunk_seconds=8, speakers=speakers)
            while not job.finished:
                eng.step()
            total = time.perf_counter() - t
            print(json.dumps({"file": wav.name, "speakers": speakers, "total_s": total,
                              "diarize_s": job.diarize_seconds, "segments": len(job.transcript.segments)}),
                  flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sample")
    p.add_argument("--weights", required=True)
    p.add_argument("--minutes", type=float, nargs="*", default=[1.0])
    p.add_argument("--voices", type=int, nargs="*", default=[2, 3, 4])
    p.add_argument("--embedders", nargs="*", default=["ge2e", "mfcc"])
    p.add_argument("--ratio", action="store_true")
    p.add_argument("--model", help="--ratio: a model folder, or 'widened' (default: the tiny test model)")
    p.add_argument("--child")
    args = p.parse_args()
    if args.child:
        return run_embedder(args)
    if args.ratio:
        return ratio(args)
    cpu = subprocess.run("grep -o 'amx_bf16\\|avx512_bf16' /proc/cpuinfo | sort -u", shell=True,
                         capture_output=True, text=True).stdout.split()
    print(json.dumps({"cpu_flags": cpu, "load": os.getloadavg()}), flush=True)
    for emb in args.embedders:
        cmd = [sys.executable, __file__, "--child", emb, "--weights", args.weights,
               "--minutes", *map(str, args.minutes), "--voices", *map(str, args.voices)]
        if args.sample:
            cmd += ["--sample", args.sample]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
