"""The small ops of a CPU float32 decode step of one row, compiled with numba: what sits between the GEMVs.

float32 is the default where bfloat16 is not native (AVX2-only laptops), and there one clip at a
time or a live stream alone is decode steps of one row. On the torch path each layer's norms,
rotary, attention and activation are some thirty small calls, each starting cold after a GEMV has
streamed megabytes through the caches: about a quarter of such a step. Here they are four compiled
calls with raw addresses in, as ``bf16_decode_row`` does for bfloat16:

    residual_norm   new_res = x + res; h = w * rms_norm(new_res)     (rms_norm_residual_cpu)
    prologue        q/k norm + rotary; k and v into the paged cache  (qk_norm_rope_cpu)
    attend          one query over its row's cached context          (decoder.paged_attention)
    silu_mul        silu(gate) * up                                  (decoder.silu_mul)

The math is the torch references' in float32; only the order of float32 sums differs (and exp,
within about an ulp), so tests/test_f32_decode_row.py holds each to its reference within float32
rounding, and a float32 engine keeps transformers' greedy tokens. numba is optional:
``compile_kernels()`` returns False without it, and the engine keeps the torch path.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from asr_kernels import switch_on
from asr_kernels.team_run import run_compiled, team_queries

__all__ = ["SWITCH", "enabled", "compile_kernels", "address", "residual_norm", "prologue", "attend", "silu_mul"]

# "0" keeps CPU float32 decode rows on the torch ops (benchmarks compare the two in one run).
SWITCH = "QWEN3_ASR_F32_DECODE_ROW"
# Cached positions from which a row's key heads are shared over torch's team (as bf16_decode_row's).
MIN_SHARE_POSITIONS = 128
_jit = None
_queries: tuple[int, int] | None = None


def enabled() -> bool:
    """Whether CPU float32 decode rows take these kernels: the switch is on and they compiled here."""
    return switch_on(SWITCH) and compile_kernels()


def address(t: torch.Tensor) -> int:
    """The address of a contiguous float32 CPU tensor, for the kernels (which trust it)."""
    if t.dtype != torch.float32 or not t.is_contiguous() or t.device.type != "cpu":
        raise ValueError(f"expected a contiguous float32 CPU tensor, got {t.dtype} {tuple(t.shape)} on {t.device}")
    return t.data_ptr()


@functools.lru_cache(maxsize=1)
def compile_kernels() -> bool:
    """Compile (or load from numba's cache) the kernels; False where numba is missing or fails."""
    global _jit, _queries
    try:
        from asr_kernels import _f32_decode_row_jit as jit

        _jit, _queries = jit, team_queries()
        _warm()
    except Exception:       # no numba, an unsupported platform: the torch path
        _jit = None
        return False
    return True


def residual_norm(x: int, res: int, weight: int, h: int, new_res: int, n: int, eps: float, has_res: bool) -> None:
    """One row of n: new_res = x + res (x without a residual); h = w * rms_norm(new_res). new_res may be res."""
    _jit.residual_norm_k(x, res, weight, h, new_res, n, eps, has_res)


def prologue(qkv: int, qk_weight: int, cos: int, sin_signed: int, k_cache: int, v_cache: int, slot: int, q: int,
             heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
    """qkv: [(heads + 2 kv_heads) hd] of one token; qk_weight: [heads + kv_heads, hd]; cos, sin_signed:
    [hd]; caches: [slots, kv_heads, hd] of one layer. Writes q: [heads, hd] normed and rotated, and the
    token's rotated k and its v at ``slot`` (none for -1)."""
    _jit.prologue_k(qkv, qk_weight, cos, sin_signed, k_cache, v_cache, slot, q, heads, kv_heads, head_dim, eps)


def attend(q: int, k_cache: int, v_cache: int, table: np.ndarray, block_size: int, ctx: int, out: int,
           heads: int, kv_heads: int, head_dim: int, shares: int | None = None) -> None:
    """One query q: [heads, hd] over the first ctx cached positions of its block table (int64) -> out:
    [heads * hd]; query head h reads key head h // (heads // kv_heads). From ``MIN_SHARE_POSITIONS``
    positions on, its key heads are dealt into ``shares`` (default: torch's threads) on torch's team.
    Same bits either way: each head's sums are its own."""
    if shares is None:
        shares = torch.get_num_threads() if ctx >= MIN_SHARE_POSITIONS else 1
    shares = min(shares, kv_heads)
    if shares <= 1 or _queries is None:
        _jit.attend_k(q, k_cache, v_cache, table, block_size, ctx, out, heads, kv_heads, head_dim)
        return
    table = np.ascontiguousarray(table, np.int64)       # the body reads it by address
    data = np.array((*_queries, q, k_cache, v_cache, table.ctypes.data, len(table), block_size, ctx, out, heads,
                     kv_heads, head_dim, shares), np.int64)     # jit.HEADS_FIELDS, in its order
    run_compiled(_jit.attend_heads_team.address, data.ctypes.data, shares)


def silu_mul(gate_up: int, out: int, n: int) -> None:
    """gate_up: [2n] (gate, then up) of one row -> out: [n] = silu(gate) * up."""
    _jit.silu_mul_k(gate_up, out, n)


def _warm() -> None:
    """Compile each kernel for the argument types the engine passes (ints, floats, an int64 array)."""
    heads, kvh, hd, block = 2, 1, 4, 2
    x = torch.ones(8)
    residual_norm(x.data_ptr(), x.data_ptr(), x.data_ptr(), x.data_ptr(), x.data_ptr(), 8, 1e-6, True)
    qkv, qkw, rope = torch.ones((heads + 2 * kvh) * hd), torch.ones((heads + kvh) * hd), torch.ones(hd)
    kc, vc = torch.zeros(block, kvh, hd), torch.zeros(block, kvh, hd)
    q, out = torch.empty(heads * hd), torch.empty(heads * hd)
    prologue(qkv.data_ptr(), qkw.data_ptr(), rope.data_ptr(), rope.data_ptr(), kc.data_ptr(), vc.data_ptr(), 0,
             q.data_ptr(), heads, kvh, hd, 1e-6)
    attend(q.data_ptr(), kc.data_ptr(), vc.data_ptr(), np.zeros(1, np.int64), block, 1, out.data_ptr(), heads, kvh,
           hd, shares=1)
    silu_mul(x.data_ptr(), out.data_ptr(), 4)
