"""One clip at a time, taken apart: encoder, prefill, each decode step, and what a decode step
reads per second against what this machine's matrix-vector products reach.

    python tests/bench/profile_one_clip.py [--dtype bfloat16] [--seconds 10] [--tokens 40] \\
        [--model DIR] [--threads 2] [--repeat 3] [--torch-profile] [--floor]

The checkpoint is ``peer_checkpoint.py``'s (the one bench_peers.py runs), so the figures are the
ones behind bench_peers' one-clip column. Timing hooks wrap the runner's encoder call, the
decoder forward and the LM head; what an ``Engine.step`` spends outside them (scheduling,
building the step's inputs, argmax, bookkeeping) is printed as "outside". ``--torch-profile``
adds torch.profiler's op table for 8 decode steps (ops by self CPU time, and how many ran).
``--floor`` times the projections a decode step calls (every decoder linear method and the LM head,
one row each, in the step's order) with nothing between them: the step's time less this floor is
what the norms, rotary, attention, the cache writes and Python cost.

A decode step reads every decoder weight and the LM head once; its bytes over its time is the
rate printed against the machine's GEMV bandwidth (``gemv_bandwidth``: the best of a few big
matrix-vector products, bfloat16 and float32, plain and oneDNN-packed, and the packed bytes through
our one-row kernel ``bf16_gemv``, with the CPU's cores).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import settled, synthetic_clip, unseen  # noqa: E402


def gemv_bandwidth(seconds: float = 1.5) -> dict[str, float]:
    """GB/s of big matrix-vector products, per method: what a decode step could reach from memory."""
    out = {}
    # 512 Ki x 1024: 1 GiB in bfloat16 (a decode step of the 0.6B reads 1.2 GB). The L3 of a cloud
    # Xeon can hold a few hundred MB of a smaller weight, and the rate then is not memory's.
    rows, cols = 1 << 19, 1024
    for name, dtype, packed in (("bf16 F.linear", torch.bfloat16, False), ("bf16 oneDNN packed", torch.bfloat16, True),
                                ("fp32 F.linear", torch.float32, False)):
        w = torch.empty(rows, cols, dtype=dtype).uniform_(-1, 1)
        x = torch.randn(1, cols).to(dtype)
        if packed:
            try:
                from engine.network.platform import onednn_mm
                pw = torch.ops.mkldnn._reorder_linear_weight(w, 1)
                fn = lambda: onednn_mm(x, pw)           # noqa: E731
            except Exception as e:                      # a torch build without oneDNN
                print(f"  ({name}: not available: {type(e).__name__})")
                continue
        else:
            fn = lambda: torch.nn.functional.linear(x, w)   # noqa: E731
        out[name] = w.numel() * w.element_size() / _best_time(fn, seconds) / 1e9
        if packed:                                      # the same packed bytes through our one-row kernel
            from asr_kernels.bf16_gemv import row_gemv_for
            gemv = row_gemv_for(torch.ops.mkldnn._reorder_linear_weight(w, 16), w)
            if gemv is not None:
                out["bf16 packed, bf16_gemv"] = w.numel() * 2 / _best_time(lambda: gemv(x), seconds) / 1e9
        del w
    return out


def gemv_bandwidth_apart(threads: int) -> dict[str, float]:
    """``gemv_bandwidth`` in a process of its own: in the measuring process, its gigabyte buffers
    and oneDNN state slowed the engine loaded after them (tests/bench/RESULTS.md)."""
    code = (f"import json, sys, torch; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r}); "
            f"torch.set_num_threads({threads}); from profile_one_clip import gemv_bandwidth; "
            f"print('JSON:' + json.dumps(gemv_bandwidth()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("JSON:"):
            return json.loads(line[5:])
    raise RuntimeError(f"gemv_bandwidth failed: {done.stderr[-1000:]}")


def _best_time(fn, seconds: float) -> float:
    fn()
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def decode_bytes(net) -> int:
    """Bytes a decode step reads: every decoder projection and the LM head (norms are noise)."""
    cfg = net.config.decoder
    per_layer = cfg.hidden_size * ((cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim      # qkv
                                   + cfg.heads * cfg.head_dim                         # o
                                   + 3 * cfg.intermediate_size)                       # gate_up, down
    head = cfg.hidden_size * cfg.vocab_size
    elt = net.language_model.norm.weight.element_size()
    if net.compact_projections:                             # float32 math on 2-byte weights (fp16_weights)
        elt = 2
    head_elt = 1 if net.head_screen is not None else elt   # one row's token: the int8 copy
    return (cfg.layers * per_layer) * elt + head * head_elt


def projections_floor(net, repeat: int = 20) -> float:
    """Median seconds of one decode step's projections alone: each layer's qkv, o, gate_up and
    down on one row, then the LM head, called back to back as a step calls them."""
    lm, cfg = net.language_model, net.config.decoder
    dtype = lm.norm.weight.dtype
    inputs = (cfg.hidden_size, cfg.heads * cfg.head_dim, cfg.hidden_size, cfg.intermediate_size)
    calls = [(method, torch.randn(1, n, dtype=dtype))
             for layer in lm.layers for method, n in zip((layer.qkv, layer.o, layer.gate_up, layer.down), inputs)]
    calls.append((net.greedy_tokens, torch.randn(1, cfg.hidden_size, dtype=dtype)))   # the head, as a step reads it
    times = []
    with torch.no_grad():
        for _ in range(repeat + 2):
            t = time.perf_counter()
            for method, x in calls:
                method(x)
            times.append(time.perf_counter() - t)
    return statistics.median(times[2:])


class StepTimer:
    """Wraps the runner's encoder call, decoder forward and greedy tokens (the LM head) with
    perf_counter timers."""

    def __init__(self, eng):
        self.records: list[dict] = []
        self.current: dict = {}
        runner, net = eng.runner, eng.runner.net
        self._wrap(runner, "encode_pending", "encoder")
        self._wrap(runner, "hidden_states", "decoder")
        self._wrap(net, "greedy_tokens", "head")        # the head and its argmax (or its int8 screen)

    def _wrap(self, obj, method, key):
        inner = getattr(obj, method)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            out = inner(*args, **kwargs)
            self.current[key] = self.current.get(key, 0.0) + time.perf_counter() - t
            return out
        setattr(obj, method, timed)

    def step(self, eng, rows_tokens: int | None = None) -> dict:
        self.current = {}
        t = time.perf_counter()
        eng.step()
        self.current["step"] = time.perf_counter() - t
        self.records.append(self.current)
        return self.current


def run_clip(eng, timer: StepTimer, clip: np.ndarray, tokens: int) -> list[dict]:
    from bench_peers import submit

    req = submit(eng, clip, tokens)
    start = len(timer.records)
    while not req.finished:
        timer.step(eng)
    assert len(req.token_ids) == tokens, (len(req.token_ids), tokens)
    return timer.records[start:]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--dtype", default="bfloat16", help="bfloat16, float32 or int8")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="clips run; the fastest is shown step by step")
    parser.add_argument("--torch-profile", action="store_true")
    parser.add_argument("--no-bandwidth", action="store_true")
    parser.add_argument("--floor", action="store_true", help="time a decode step's projections alone")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    import engine
    from bench_peers import cpu_summary
    from peer_checkpoint import peer_checkpoint

    print(cpu_summary())
    print(f"threads {args.threads}; loaded machine: figures are meaningful as ratios within this run", flush=True)
    if not args.no_bandwidth:
        bw = gemv_bandwidth_apart(args.threads)
        print("GEMV bandwidth: " + ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw.items()), flush=True)
        peak = max(bw.values())
    model = args.model or peer_checkpoint()
    if args.dtype == "int8":
        eng = settled(engine.load(model, device="cpu", quantize="int8"))
    else:
        eng = settled(engine.load(model, device="cpu", dtype=args.dtype))
    timer = StepTimer(eng)
    clip = synthetic_clip(args.seconds, 1000)
    run_clip(eng, timer, unseen(clip, 1)[:16000], 2)                        # warm-up
    # each run on audio no cache holds (common.unseen), as a user's next file
    runs = [run_clip(eng, timer, unseen(clip, 2 + r), args.tokens) for r in range(args.repeat)]
    best = min(runs, key=lambda r: sum(s["step"] for s in r))
    totals = [sum(s["step"] for s in r) for r in runs]
    nbytes = decode_bytes(eng.runner.net)

    first, decode = best[0], best[1:]
    print(f"\none {args.seconds:g} s clip, {args.tokens} tokens, {args.dtype} (engine dtype {eng.dtype}): "
          f"total {min(totals):.3f} s (runs: {', '.join(f'{t:.3f}' for t in totals)})")
    print(f"  step 1 (encoder + prefill + first token): {first['step']:.3f} s = encoder {first.get('encoder', 0):.3f}"
          f" + decoder {first.get('decoder', 0):.3f} + head {first.get('head', 0):.3f}"
          f" + outside {first['step'] - first.get('encoder', 0) - first.get('decoder', 0) - first.get('head', 0):.3f}")
    steps = [s["step"] for s in decode]
    dec = [s.get("decoder", 0) for s in decode]
    head = [s.get("head", 0) for s in decode]
    outside = [s["step"] - s.get("decoder", 0) - s.get("head", 0) - s.get("encoder", 0) for s in decode]
    med = statistics.median
    print(f"  decode steps ({len(decode)}): sum {sum(steps):.3f} s; per step median {med(steps) * 1e3:.1f} ms "
          f"(min {min(steps) * 1e3:.1f}, max {max(steps) * 1e3:.1f}) = decoder {med(dec) * 1e3:.1f} + head "
          f"{med(head) * 1e3:.1f} + outside the model {med(outside) * 1e3:.2f} ms")
    print(f"  bytes a decode step reads: {nbytes / 1e9:.3f} GB -> {nbytes / med(steps) / 1e9:.1f} GB/s "
          f"per step" + (f" ({nbytes / med(steps) / 1e9 / peak * 100:.0f}% of the best GEMV, {peak:.1f} GB/s; "
                         f"memory-bound floor {nbytes / peak / 1e9 * 1e3:.1f} ms/step)" if not args.no_bandwidth else ""))
    print("  per step ms: " + " ".join(f"{s * 1e3:.0f}" for s in steps))
    if args.floor:
        floor = projections_floor(eng.runner.net)
        print(f"  the step's projections alone: {floor * 1e3:.1f} ms ({nbytes / floor / 1e9:.1f} GB/s); the rest of a "
              f"median step: {(med(steps) - floor) * 1e3:.1f} ms (norms, rotary, attention, cache writes, Python)")

    if args.torch_profile:
        from torch.profiler import ProfilerActivity, profile

        from bench_peers import submit

        req = submit(eng, unseen(clip, 2 + args.repeat), 9)
        timer.step(eng)                          # encoder and prefill: not in the table
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            while not req.finished:
                timer.step(eng)
        print("\ndecode steps (8) by torch op:")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
