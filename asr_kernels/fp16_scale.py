"""Rows of a weight whose values are bfloat16, each times a power of two that puts it at the top of
float16's range, checked to be exactly float16 values (``engine.network.fp16_weights`` packs them
for fbgemm's fp16 GEMM).

A bfloat16 value has 8 significant bits and a float16 11, so once a row is multiplied by a power of
two (which changes no mantissa bit) to put its largest value in [2^14, 2^15), below float16's
largest (65504), each of its values is a float16 down to 2^-31 of the largest (float16's least
subnormal, 2^-24, times 2^7). Every value is checked anyway: a weight with one value that does not
come back exactly is not scaled.

``scale_rows`` takes a bfloat16 weight (the checkpoint's own tensor, never widened to float32
first) in one compiled pass over its bits, rows shared over torch's team; other dtypes, or no
numba, take ``scale_reference``, the same math in torch.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from asr_kernels.team_run import all_ranges

__all__ = ["TOP_EXPONENT", "scale_rows", "scale_reference"]

TOP_EXPONENT = 14          # a row's largest value is scaled into [2^TOP_EXPONENT, 2^(TOP_EXPONENT + 1))
_ROWS_PER_SHARE = 64


@functools.lru_cache(maxsize=1)
def _compiled() -> bool:
    """Compile (or load from numba's cache) the pass; False where numba is missing or fails."""
    try:
        from asr_kernels import _fp16_scale_jit as jit

        jit.scale_rows(np.ones((1, 2), np.uint16), np.empty((1, 2), np.float32), np.empty(1, np.float32),
                       TOP_EXPONENT, 0, 1)
    except Exception:      # no numba, an unsupported platform: the torch reference
        return False
    return True


def scale_rows(weight: torch.Tensor, out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(``weight`` [out, in] times a power of two per row, as float32 whose every value is exactly a
    float16; the inverse scale [out] float32), or None where some value is not. ``out``: a float32
    buffer of at least out x in values to hold the scaled rows (reused by the caller: fresh pages
    cost a fault each), for the compiled pass."""
    if weight.dtype != torch.bfloat16 or weight.device.type != "cpu" or weight.dim() != 2 or not _compiled():
        return scale_reference(weight)
    from asr_kernels import _fp16_scale_jit as jit

    n, k = weight.shape
    bits = weight.detach().contiguous().view(torch.int16).numpy().view(np.uint16)
    if out is not None and (out.dtype != torch.float32 or not out.is_contiguous() or out.numel() < n * k):
        raise ValueError(f"out must be a contiguous float32 buffer of at least {n * k} values")
    scaled = out.view(-1)[:n * k].view(n, k) if out is not None else torch.empty(n, k, dtype=torch.float32)
    inverse = torch.empty(n, dtype=torch.float32)
    rows, inv = scaled.numpy(), inverse.numpy()
    exact = all_ranges(lambda first, last: jit.scale_rows(bits, rows, inv, TOP_EXPONENT, first, last), n,
                       _ROWS_PER_SHARE)
    return (scaled, inverse) if exact else None


def scale_reference(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``scale_rows`` in torch ops, for any float dtype."""
    w = weight.detach().float()
    if w.shape[0] > 8 and scale_reference(w[:8]) is None:    # a float32 checkpoint fails at once
        return None
    low, high = torch.aminmax(w, dim=1)
    amax = torch.maximum(high, -low)
    exponent = torch.where(amax > 0, TOP_EXPONENT - torch.floor(torch.log2(amax)), torch.zeros_like(amax))
    if bool((exponent > 127).any()):   # 2^exponent is not a float32 (inf would pass the check below)
        return None
    scaled = w * torch.exp2(exponent)[:, None]
    for rows in scaled.split(256):     # in slices: small temporaries, reused rather than page-faulted
        if not bool((rows.half() == rows).all()):    # compared in float32; false for nan
            return None
    return scaled, torch.exp2(-exponent)
