"""A prompt's attention over its paged cache (and the audio encoder's windows) on AVX512-BF16 CPUs.

A prefill step of the CPU bfloat16 path spends most of its time at the GEMM peak, except in
attention: torch's CPU flash kernel (SDPA) reaches a fifth to a third of the bfloat16 rate there,
where it multiplies through generic GEMM calls (it packs for AMX only), and computes every key of
a chunk's mask. Here both products run on ``vdpbf16ps`` tiles whose sums stay in registers, over a
key head's keys and values packed once per call, and each query stops at its own last key.

Math (``attention_reference`` is the torch twin): scores summed in float32 from the bfloat16
products, times 1/sqrt(hd); a softmax in float32 over the query's keys (0..ctx - n + i); the
probabilities rounded to bfloat16 for the second product (as SDPA's flash kernel does), summed in
float32, divided by the float32 sum, rounded to bfloat16. Sums run in key order per query, so a
query's bits never depend on the rows beside it, on how the prompt was chunked, or on which thread
ran it. Only the order of the float32 sums differs from the reference (tests/test_bf16_prompt_attention.py).

The engine takes it where ``enabled()``: the switch on, numba, and AVX512-BF16 without AMX in the CPU
numba compiles for. With AMX, SDPA's flash kernel packs for AMX's tiles and keeps the work (the two
were not compared on such a machine); without AVX512-BF16 there is no instruction to run.
"""
from __future__ import annotations

import ctypes
import functools
import math

import numpy as np
import torch

from asr_kernels import switch_on
from asr_kernels.team_run import run_compiled, team_queries

__all__ = ["SWITCH", "supports", "available", "enabled", "cpu_has_dpbf16", "cpu_fits", "attend_prompt",
           "attention_reference"]

# "0" keeps prompt attention on SDPA (benchmarks compare the two in one run).
SWITCH = "QWEN3_ASR_PROMPT_ATTENTION"
_body = None                   # the team body (a numba cfunc)
_queries: tuple[int, int] | None = None


@functools.lru_cache(maxsize=1)
def _cpu_features() -> dict:
    try:
        import llvmlite.binding as llvm
        from numba.core import config

        if config.CPU_NAME not in (None, "", "host"):   # NUMBA_CPU_NAME: numba compiles for that CPU
            named = (config.CPU_FEATURES or "").split(",")
            return {f[1:]: True for f in named if f.startswith("+")}
        return dict(llvm.get_host_cpu_features())
    except Exception:       # no numba/llvmlite (optional), or no feature list on this platform
        return {}


def cpu_has_dpbf16() -> bool:
    """Whether the CPU numba compiles for has AVX512-BF16 (the instruction the kernel is made of)."""
    return bool(_cpu_features().get("avx512bf16"))


def cpu_fits() -> bool:
    """Whether the engine should take the kernel on this CPU: AVX512-BF16 without AMX."""
    return cpu_has_dpbf16() and not _cpu_features().get("amx-bf16")


@functools.lru_cache(maxsize=1)
def _compiled() -> bool:
    """Compile (or load from numba's cache) the kernel and check it on one small prompt; False
    where numba is missing or fails. Not tried on a CPU without the instruction (``cpu_has_dpbf16``):
    LLVM would abort the process there, not raise."""
    global _body, _queries
    if not cpu_has_dpbf16():
        return False
    try:
        from asr_kernels import _bf16_prompt_attention_jit as jit

        _body, _queries = jit.prompt_team, team_queries()
        gen = torch.Generator().manual_seed(0)
        for hd in (16, 64, 128):                     # both output tiles, alone and together
            q = torch.randn(5, 2, hd, generator=gen).bfloat16()
            k, v = torch.randn(2, 4, 1, hd, generator=gen).bfloat16(), torch.randn(2, 4, 1, hd, generator=gen).bfloat16()
            out = torch.empty(5, 2 * hd, dtype=torch.bfloat16)
            _run(q, k, v, np.arange(2, dtype=np.int64), 7, out, 1)
            ref = attention_reference(q, k, v, [0, 1], 7)
            if not torch.allclose(out.float(), ref.float(), atol=2e-2, rtol=2e-2):
                raise RuntimeError("the prompt attention kernel disagrees with its reference")
    except Exception:
        _body = None
        return False
    return True


def available() -> bool:
    """Whether the kernel runs here: the CPU has the instruction and it compiled (tests call it on
    any such CPU; the engine only where ``enabled``)."""
    return cpu_has_dpbf16() and _compiled()


def supports(head_dim: int) -> bool:
    """Whether the kernel takes this head size: output tiles are 16 values wide (64 where they fit)."""
    return head_dim % 16 == 0 and head_dim > 0


def enabled() -> bool:
    """Whether the engine's prompt rows take this kernel: switch on, the CPU fits, and it compiled."""
    return switch_on(SWITCH) and cpu_fits() and _compiled()


def _run(q, k_cache, v_cache, table: np.ndarray, ctx: int, out, shares: int, causal: bool = True) -> None:
    n, heads, hd = q.shape
    kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    fields = (q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), table.ctypes.data, len(table), block_size, ctx,
              n, out.data_ptr(), heads, kv_heads, hd, q.stride(0), out.stride(0), int(causal), shares)
    if shares > 1 and _queries is not None:
        data = np.array((*_queries, *fields), np.int64)
        run_compiled(_body.address, data.ctypes.data, shares)
    else:                       # on the calling thread (the body sees thread_num 0: no team)
        data = np.array((0, 0, *fields[:-1], 1), np.int64)
        _body.ctypes(data.ctypes.data_as(ctypes.c_void_p))


def attend_prompt(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table: np.ndarray, ctx: int,
                  out: torch.Tensor, shares: int | None = None, causal: bool = True) -> None:
    """One row's n prompt queries q: [n, heads, hd] (bfloat16, rows may be a strided slice of a step's
    tokens; heads and hd contiguous) over the first ctx positions of its cache blocks ``table`` (int64)
    in k_cache/v_cache: [blocks, block_size, kv_heads, hd]; query i sits at position ctx - n + i and
    sees the keys up to it (``causal``), or every query sees all ctx keys (the audio encoder's windows).
    Writes out: [n, heads * hd] (rows may be strided). Key heads are dealt over ``shares`` threads
    of torch's team (default: torch's thread count, at most kv_heads); the same bits either way."""
    n, heads, hd = q.shape
    kv_heads = k_cache.shape[2]
    if not supports(hd) or heads % kv_heads or not 0 < n <= ctx:
        raise ValueError(f"attend_prompt takes a head_dim that is a multiple of 16, heads a multiple of kv_heads and "
                         f"0 < n <= ctx, got hd={hd}, heads={heads}, kv_heads={kv_heads}, n={n}, ctx={ctx}")
    for t, name in ((q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache"), (out, "out")):
        if t.dtype != torch.bfloat16 or t.device.type != "cpu":
            raise ValueError(f"{name} must be a bfloat16 CPU tensor, got {t.dtype} on {t.device}")
    if q.stride(2) != 1 or q.stride(1) != hd or out.stride(1) != 1 or not (k_cache.is_contiguous()
                                                                         and v_cache.is_contiguous()):
        raise ValueError("q's heads and out's rows must be contiguous, and the caches whole")
    if len(table) * k_cache.shape[1] < ctx:
        raise ValueError(f"{len(table)} blocks of {k_cache.shape[1]} cannot hold {ctx} positions")
    table = np.ascontiguousarray(table, np.int64)
    _run(q, k_cache, v_cache, table, ctx, out, min(shares or torch.get_num_threads(), kv_heads), causal)


def attention_reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, table, ctx: int,
                        causal: bool = True) -> torch.Tensor:
    """The kernel's math in torch: q [n, heads, hd] over the cached positions of ``table`` -> [n, heads * hd]."""
    n, heads, hd = q.shape
    kv_heads, block_size = k_cache.shape[2], k_cache.shape[1]
    blocks = torch.as_tensor(np.asarray(table, np.int64))
    k = k_cache.index_select(0, blocks).flatten(0, 1)[:ctx].float()      # [ctx, kv_heads, hd]
    v = v_cache.index_select(0, blocks).flatten(0, 1)[:ctx].float()
    group = heads // kv_heads
    k, v = k.repeat_interleave(group, 1).transpose(0, 1), v.repeat_interleave(group, 1).transpose(0, 1)
    scores = torch.matmul(q.float().transpose(0, 1), k.transpose(1, 2)) * (1.0 / math.sqrt(hd))   # [heads, n, ctx]
    seen = torch.arange(ctx)[None, :] <= torch.arange(ctx - n, ctx)[:, None]                     # [n, ctx]
    if causal:
        scores = scores.masked_fill(~seen, float("-inf"))
    e = torch.exp(scores - scores.amax(-1, keepdim=True))
    o = torch.matmul(e.bfloat16().float(), v) / e.sum(-1, keepdim=True)                             # [heads, n, hd]
    return o.transpose(0, 1).reshape(n, heads * hd).bfloat16()
