"""Our engine on a CUDA GPU against transformers, side by side in one process run.

    python tests/bench/bench_gpu.py [--parts queue,concurrent,first-token] [--concurrency 128]

The 0.6B-dimension random checkpoint (common.real_size_checkpoint), bfloat16, every side
generating exactly 4 tokens per second of audio (end token suppressed), as bench_throughput.py:

- queue: the 16 clips of bench_throughput (2-30 s, 848 tokens), all submitted at once;
- concurrent: ``--concurrency`` requests of 10-30 s audio (uniform, seeded) submitted at once,
  the load the Qwen3-ASR paper measures vLLM under (concurrency 128: 2000 audio-s/s for the 0.6B
  on its GPU); our engine runs with max_batch_size set to the concurrency, as a server would;
- first-token: one 10 s request on an idle engine: time from submit (raw audio in) to its first
  token and to its 40th, median of 5 clips.

Our engine runs with CUDA graphs on and off (``EngineConfig.cuda_graphs``). With graphs on, one
untimed pass over clips of the same lengths (other audio, so no cache holds the timed clips)
captures the buckets first, which a long-running app or server does once. transformers runs
``generate`` over padded batches in submission order, as the official package does, at the
batch sizes printed. The last lines are a table: seconds, audio-seconds per second, and ours
over transformers' best batch.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

import numpy as np
import torch
from bench_throughput import (
    DURATIONS,
    load_transformers,
    roofline_seconds,
    capture_clips,
    run_ours,
    run_queue,
    run_transformers,
    workload,
)
from common import gemm_flops, gemv_bandwidth, real_size_checkpoint, settled, sync, synthetic_clip

FIRST_TOKEN_CLIP_S = 10
FIRST_TOKEN_TOKENS = 40


def free_memory() -> None:
    """Let the next side have the GPU memory the last one held (the engine's KV cache)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def profile_phases(eng, clips, new_tokens) -> None:
    """Run the queue again (already captured shapes, fresh audio) with each phase of a step timed
    between device syncs, then once under torch.profiler for the kernels' own time."""
    import collections

    totals: collections.Counter = collections.Counter()

    def timed(name, fn):
        def wrapper(*a, **k):
            sync(eng.torch_device)
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                sync(eng.torch_device)
                totals[name] += time.perf_counter() - t
        return wrapper

    runner, scheduler = eng.runner, eng.scheduler
    patched = [(eng, "submit"), (scheduler, "schedule"), (runner, "encode_pending"), (runner, "step_inputs"),
               (runner, "embeddings"), (runner, "hidden_states")] + ([(runner.graphs, "run")] if runner.graphs else [])
    for obj, attr in patched:
        setattr(obj, attr, timed(f"{type(obj).__name__}.{attr}", getattr(obj, attr)))
    t = time.perf_counter()
    run_queue(eng, clips, new_tokens)
    wall = time.perf_counter() - t
    for obj, attr in patched:
        delattr(obj, attr)
    print(f"phases of the same load (fresh audio), synced around each: {wall:.2f} s wall")
    for name, secs in totals.most_common():
        print(f"   {name:32s} {secs:6.2f} s  {secs / wall:5.1%}")
    print(f"   {'the rest (postprocess, Python)':32s} {wall - sum(totals.values()):6.2f} s")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_queue(eng, [synthetic_clip(len(c) / 16000, 50_000 + i) for i, c in enumerate(clips)], new_tokens)
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=14, max_name_column_width=60))


def concurrent_durations(n: int, seed: int = 128) -> list[int]:
    """``n`` whole-second durations of 10-30 s."""
    return [int(d) for d in np.random.default_rng(seed).integers(10, 31, n)]


def first_token_ours(eng, repeat: int = 5) -> tuple[float, float]:
    """Median seconds from submit to the first token and to the last of a 10 s request, alone."""
    def once(seed):
        clip = synthetic_clip(FIRST_TOKEN_CLIP_S, seed)
        t = time.perf_counter()
        req = eng.submit(clip, max_new_tokens=FIRST_TOKEN_TOKENS, ignore_eos=True)
        while not req.token_ids:
            eng.step()
        first = time.perf_counter() - t
        while not req.finished:
            eng.step()
        return first, time.perf_counter() - t

    once(30_000)                             # captures this shape's buckets (graphs on)
    times = [once(30_001 + i) for i in range(repeat)]
    return statistics.median(f for f, _ in times), statistics.median(a for _, a in times)


@torch.no_grad()
def first_token_transformers(model, processor, device, repeat: int = 5) -> tuple[float, float]:
    def once(seed, tokens):
        clip = synthetic_clip(FIRST_TOKEN_CLIP_S, seed)
        sync(device)
        t = time.perf_counter()
        inputs = processor.apply_transcription_request(audio=[clip], prompt=[""]).to(device)
        inputs["input_features"] = inputs["input_features"].to(model.dtype)
        model.generate(**inputs, do_sample=False, max_new_tokens=tokens, min_new_tokens=tokens)
        sync(device)
        return time.perf_counter() - t

    once(30_000, 2)
    first = statistics.median(once(30_001 + i, 1) for i in range(repeat))
    whole = statistics.median(once(30_001 + i, FIRST_TOKEN_TOKENS) for i in range(repeat))
    return first, whole


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="queue,concurrent,first-token")
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--graphs", default="on,off", help="our engine's CUDA graphs: on, off or both")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--hf-whole", action="store_true",
                        help="transformers in one batch of the whole load only (default: 8 and 16 clips for the "
                             "queue, 32 and the concurrency for the concurrent load)")
    parser.add_argument("--wide-steps", action="store_true",
                        help="also run the concurrent load with 8192-token steps and 32 prefill rows")
    parser.add_argument("--profile", action="store_true",
                        help="after the first concurrent run with graphs, where a step's time goes")
    parser.add_argument("--device", default="cuda", help="cuda; cpu only to try this script on a small model")
    parser.add_argument("--checkpoint", help="a model folder instead of the cached random 0.6B one")
    args = parser.parse_args()
    device, dtype = torch.device(args.device), torch.bfloat16
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu.py needs a CUDA GPU")
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    graphs = [g.strip() == "on" for g in args.graphs.split(",") if g.strip()]
    model_dir = args.checkpoint or real_size_checkpoint()
    big = device.type == "cuda"
    flops = gemm_flops(device, dtype, n=8192 if big else 1024)
    bandwidth = gemv_bandwidth(device, dtype, megabytes=2048 if big else 64)
    name = torch.cuda.get_device_name(0) if big else "CPU"
    print(f"{name}, torch {torch.__version__}; bf16 GEMM {flops / 1e12:.1f} TFLOP/s, "
          f"GEMV {bandwidth / 1e9:.0f} GB/s", flush=True)

    workloads = {}
    if "queue" in parts:
        workloads["queue"] = (DURATIONS, {}, [8, len(DURATIONS)])
    if "concurrent" in parts:
        n = args.concurrency
        workloads["concurrent"] = (concurrent_durations(n), dict(max_batch_size=n), [32, n])
    rows, figures = [], {}
    for name, (durations, options, batches) in workloads.items():
        clips, new_tokens = workload(durations)
        audio_s = sum(durations)
        print(f"\n== {name}: {len(clips)} clips, {audio_s} s of audio, {sum(new_tokens)} tokens", flush=True)
        variants = [(f"ours, graphs {'on' if on else 'off'}", dict(options, cuda_graphs=on)) for on in graphs]
        if name == "concurrent" and args.wide_steps:
            variants.append(("ours, graphs on, 8192-token steps, 32 prefill rows",
                             dict(options, max_step_tokens=8192, max_prefill_rows=32)))
        for label, knobs in variants:
            seconds, eng, steps, _ = run_ours(model_dir, clips, new_tokens, device, dtype, **knobs)
            ideal = roofline_seconds(eng, clips, new_tokens, flops, bandwidth)
            if args.profile and name == "concurrent" and knobs.get("cuda_graphs", True):
                profile_phases(eng, capture_clips(durations), new_tokens)
                args.profile = False
            print(f"{label}: {seconds:.2f} s, {audio_s / seconds:.0f} audio-s/s, {steps} steps, "
                  f"roofline {ideal:.2f} s ({ideal / seconds:.0%})", flush=True)
            rows.append((name, label, seconds, audio_s / seconds))
            figures[f"{name}/{label}"] = seconds
            del eng
            free_memory()
        model, processor = load_transformers(model_dir, device, dtype)
        for b in ([len(clips)] if args.hf_whole else batches):
            seconds = run_transformers(model, processor, clips, new_tokens, device, batch_size=b)
            label = f"transformers batched ({b})"
            print(f"{label}: {seconds:.2f} s, {audio_s / seconds:.0f} audio-s/s", flush=True)
            rows.append((name, label, seconds, audio_s / seconds))
            figures[f"{name}/{label}"] = seconds
        del model
        free_memory()

    if "first-token" in parts:
        print(f"\n== first token: one {FIRST_TOKEN_CLIP_S} s request alone, median of 5", flush=True)
        import engine

        for on in graphs:
            eng = settled(engine.load(model_dir, device=device, dtype=dtype, cuda_graphs=on))
            first, whole = first_token_ours(eng)
            label = f"ours, graphs {'on' if on else 'off'}"
            print(f"{label}: first token {first * 1000:.1f} ms, {FIRST_TOKEN_TOKENS} tokens {whole * 1000:.0f} ms",
                  flush=True)
            rows.append(("first-token", label, first, whole))
            figures[f"first-token/{label}"] = [first, whole]
            del eng
            free_memory()
        model, processor = load_transformers(model_dir, device, dtype)
        first, whole = first_token_transformers(model, processor, device)
        print(f"transformers: first token {first * 1000:.1f} ms, {FIRST_TOKEN_TOKENS} tokens {whole * 1000:.0f} ms")
        rows.append(("first-token", "transformers", first, whole))
        figures["first-token/transformers"] = [first, whole]
        del model

    print("\n| workload | side | seconds | audio-s/s | transformers' best / this |")
    print("|---|---|---|---|---|")
    for name, label, a, b in rows:
        best = min(r[2] for r in rows if r[0] == name and r[1].startswith("transformers"))
        if name == "first-token":
            print(f"| first token (40 tokens) | {label} | {a * 1000:.1f} ms ({b * 1000:.0f} ms) | | {best / a:.2f}x |")
            continue
        print(f"| {name} | {label} | {a:.2f} | {b:.0f} | {best / a:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
