"""The one linear, convolution and attention interface the encoder and decoder call.

Each is the torch op, except where the CPU emulates bfloat16 (``platform.current().native_bf16``
false): there a GEMM of many rows, a convolution and attention run in float32 and round once
to bfloat16, since torch's emulated bfloat16 kernels are several times slower (a GEMM of a few
rows, bound by reading the weight, stays in bfloat16). One case is slow even where bfloat16 is
native: attention of a single query (a decode row). With grouped-query attention, the heads
that share a key head are folded into one query row each (the same dot products in bfloat16);
without groups the query is widened to float32. Figures: tests/bench/RESULTS.md.

Every route rounds each output once, from a float32 accumulation; only the order of the
additions differs. bfloat16 is not held token-exact to anything (float32 is).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.network import platform

# Rows from which a bfloat16 GEMM goes through float32 on a CPU without native bf16 (the
# crossover lies between 8 rows, faster in bfloat16, and 40, faster in float32).
UPCAST_ROWS = 16
# Weight rows converted at a time: bounds the float32 copy (16 MB at 1024 inputs), so the LM head
# (151936 rows) never needs a 600 MB temporary.
UPCAST_BLOCK = 4096


def _emulated_bf16() -> bool:
    return not platform.current().native_bf16


def emulated(t: torch.Tensor) -> bool:
    """``t`` is a bfloat16 CPU tensor on a CPU that emulates bfloat16."""
    return t.dtype == torch.bfloat16 and t.device.type == "cpu" and _emulated_bf16()


def upcasts(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``linear(x, weight)`` takes the float32 route: bfloat16 on a CPU that emulates it,
    with enough rows."""
    return x.shape[0] >= UPCAST_ROWS and emulated(weight)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) for x: [rows, in], weight: [out, in]; see the module docstring."""
    if not upcasts(x, weight):
        return F.linear(x, weight, bias)
    x32 = x.float()
    out = torch.empty(x.shape[0], weight.shape[0], dtype=x.dtype, device=x.device)
    for start in range(0, weight.shape[0], UPCAST_BLOCK):
        w = weight[start:start + UPCAST_BLOCK]
        b = None if bias is None else bias[start:start + UPCAST_BLOCK].float()
        out[:, start:start + w.shape[0]] = F.linear(x32, w.float(), b)
    return out


def conv2d(conv: torch.nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """conv(x), in float32 (rounded back to x's dtype) where the CPU emulates bfloat16."""
    if not emulated(x):
        return conv(x)
    bias = None if conv.bias is None else conv.bias.float()
    out = F.conv2d(x.float(), conv.weight.float(), bias, conv.stride, conv.padding, conv.dilation, conv.groups)
    return out.to(x.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs) -> torch.Tensor:
    """F.scaled_dot_product_attention, in float32 (rounded back) where the CPU emulates bfloat16,
    and for a single bfloat16 query on any CPU. q: [batch, heads, queries, hd]."""
    single = q.shape[-2] == 1 and q.dtype == torch.bfloat16 and q.device.type == "cpu" and not emulated(q)
    if (single and kwargs.get("enable_gqa") and kwargs.get("attn_mask") is None and not kwargs.get("is_causal")
            and q.shape[0] == 1):
        heads, kv_heads = q.shape[1], k.shape[1]
        if heads % kv_heads == 0 and heads > kv_heads:
            # q: [1, heads, 1, hd] -> [1, kv_heads, group, hd]: head h reads key head h // group
            rest = {key: value for key, value in kwargs.items() if key not in ("enable_gqa", "is_causal")}
            # (is_causal is False here: one query attends to every key)
            folded = F.scaled_dot_product_attention(q.view(1, kv_heads, heads // kv_heads, q.shape[-1]), k, v, **rest)
            return folded.view(q.shape)
    if not (emulated(q) or single):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    mask = kwargs.get("attn_mask")
    if mask is not None and mask.dtype != torch.bool:
        kwargs["attn_mask"] = mask.float()
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kwargs).to(q.dtype)
