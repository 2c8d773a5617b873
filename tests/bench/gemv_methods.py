"""The ways a bfloat16 projection can run on this CPU, on the 0.6B decoder's four shapes.

    python tests/bench/gemv_methods.py [--rows 1,2,8,160] [--layers 28] [--repeat 12] [--threads 2]

Per row count, each way runs every layer's qkv, o, gate_up and down once; the ways alternate
within each repeat (so a busy moment hits them alike) and the fastest repeat is printed, with
the rate it read the weights at:

- oneDNN packed: ``_reorder_linear_weight`` + ``_linear_pointwise`` (the engine's method);
- F.linear, plain weight (oneDNN with an unpacked weight);
- F.linear with oneDNN off (``torch._C._set_mkldnn_enabled(False)``): ATen's own kernels.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

SHAPES = ((4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072))   # qkv, o, gate_up, down [out, in]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default="1,2,8,160")
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--repeat", type=int, default=12)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(*s, generator=gen).to(torch.bfloat16) for _ in range(args.layers) for s in SHAPES]
    packed = [torch.ops.mkldnn._reorder_linear_weight(w, 16) for w in weights]
    pointwise = torch.ops.mkldnn._linear_pointwise.default
    nbytes = sum(w.numel() * w.element_size() for w in weights)

    def onednn_packed(xs):
        for w, p in zip(weights, packed):
            pointwise(xs[w.shape[1]], p, None, "none", [], "")

    def plain(xs):
        for w in weights:
            F.linear(xs[w.shape[1]], w)

    def aten(xs):
        torch._C._set_mkldnn_enabled(False)
        try:
            plain(xs)
        finally:
            torch._C._set_mkldnn_enabled(True)

    ways = {"oneDNN packed": onednn_packed, "F.linear plain": plain, "F.linear, oneDNN off": aten}
    print(f"threads {args.threads}, {args.layers} layers ({nbytes / 1e9:.2f} GB of bfloat16 weights)")
    for rows in (int(r) for r in args.rows.split(",")):
        xs = {n: torch.randn(rows, n, generator=gen).to(torch.bfloat16) for n in (1024, 2048, 3072)}
        best = {name: float("inf") for name in ways}
        for rep in range(args.repeat + 1):
            for name, way in ways.items():
                t = time.perf_counter()
                way(xs)
                if rep:                                   # the first pass builds kernels
                    best[name] = min(best[name], time.perf_counter() - t)
        print(f"rows {rows:4d}: " + "; ".join(f"{name} {s * 1e3:.1f} ms ({nbytes / s / 1e9:.1f} GB/s)"
                                            for name, s in best.items()))


if __name__ == "__main__":
    main()
