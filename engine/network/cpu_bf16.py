"""bfloat16 linear layers and convolutions on CPUs without native bfloat16.

Without AVX512-BF16 or AMX, torch's CPU bfloat16 GEMMs are emulated. Measured on an AVX2 EPYC
(2 threads, a [6144, 1024] weight): one row (a decode step) runs at memory speed and beats
float32, since it reads half the bytes (0.9 against 2.4 ms); but 40 rows take 1.9x and 150 rows
3.6x the float32 time (105 against 30 ms). So there, a call of many rows (prefill, the encoder)
converts the weight to float32 piece by piece and multiplies in float32, which costs a few
percent over a float32 model, and a call of a few rows stays in bfloat16.

Convolutions are worse: there torch runs bfloat16 ones through its slow reference path
(``_slow_conv2d_forward``: 2.8 s of the 10 s clip's first step, where float32 takes about 0.4 s),
so on such CPUs they always run in float32. So does attention: bfloat16 SDPA took 22 ms of a
162 ms decode step there, 4x its float32 time.

One case is slow even where bfloat16 is native: attention of a single query (a decode row).
torch's bfloat16 CPU SDPA took 563 us for one query over 250 cached tokens (16 heads over 8,
head size 128; AVX512-BF16 EPYC, 2 threads), 107 us for two queries: 7 ms of a 44 ms decode
step of the 0.6B. Widening to float32 costs copies of the keys and values that grow with the
context (297 us at 700 tokens). With grouped-query attention the heads that share a key head
are instead folded into one query row each: one query per head of 16 over 8 key heads becomes
two queries per key head, the same dot products in bfloat16 SDPA (92 us at 250 tokens, 218 us
at 700). Without groups, a single bfloat16 query is widened to float32.

Both round each output once, from a float32 accumulation, to bfloat16; only the order of the
additions differs. bfloat16 is not held token-exact to anything (float32 is), so the faster
order wins.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

# Rows from which a bfloat16 GEMM goes through float32 on a CPU without native bf16 (measured
# crossover: 8 rows are faster in bfloat16, 40 in float32).
UPCAST_ROWS = 16
# Weight rows converted at a time: bounds the float32 copy (16 MB at 1024 inputs), so the LM head
# (151936 rows) never needs a 600 MB temporary.
UPCAST_BLOCK = 4096


def cpu_has_native_bf16() -> bool:
    """True where the CPU computes bfloat16 in hardware (AVX512-BF16 or AMX): there bfloat16
    runs 2.5-3x faster than float32; elsewhere it is emulated and slower."""
    cpu = getattr(torch, "cpu", None)
    for check in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        fn = getattr(cpu, check, None)
        if fn is not None:
            try:
                if fn():
                    return True
            except RuntimeError:
                pass
    return False


@functools.lru_cache(maxsize=1)
def _emulated_bf16() -> bool:
    return not cpu_has_native_bf16()


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
