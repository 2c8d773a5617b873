"""The small ops of a CPU bfloat16 decoder step, compiled with numba: what sits between the GEMVs.

A CPU decode step of one request is 28 x 4 weight-streaming GEMVs with some thirty small torch
calls between each pair. After a GEMV streams megabytes through the caches, every torch call
starts cold (its dispatch path is evicted), so those calls cost several times their arithmetic.
Here they are four compiled calls, with raw addresses in (no tensor wrapping):

    residual_norm   new_res = x + res; h = w * rms_norm(new_res)     (rms_norm_residual_cpu)
    prologue        q/k norm + rotary; k and v into the paged cache  (qk_norm_rope_cpu)
    attend          one query over its row's cached context          (decoder.paged_attention)
    silu_mul        silu(gate) * up                                  (F.silu(gate) * up)

Each works row by row (token by token), so a row's bits never depend on the rows beside it: a
request decodes to the same tokens alone or in a batch, as on the torch path. bfloat16 values
travel as their uint16 bits; each kernel rounds (to nearest even) wherever its torch reference
rounds, so only the order of float32 sums differs from it (and attention, which SDPA's flash
kernel runs with bfloat16 probabilities). tests/test_bf16_decode_row.py holds them to the
references named above within a bfloat16 step or two.

numba is optional: ``compile_kernels()`` returns False without it (or where it cannot compile),
and the engine keeps the torch path. A decode row's kernel calls are single-threaded: they are
microseconds long, and torch's OpenMP team owns the cores for the GEMVs between them. Longer work
is shared out over that same team (``team_run``; a thread of our own would share its core with the
team's spinning worker): the attention of a step's decode rows, which reads every row's cached
context (``attend_rows``, whole rows per thread), a row alone's key heads (``attend``: one clip, a
live stream), and a prompt's hundreds of tokens (row ranges). Which thread ran a row, or which of
its heads, never changes its bits.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import torch

from asr_kernels import switch_on
from asr_kernels.team_run import run_compiled, run_shares, team_available, team_queries

__all__ = ["SWITCH", "enabled", "compile_kernels", "bits", "residual_norm", "prologue", "attend", "silu_mul",
           "norm_rows", "prologue_rows", "silu_mul_rows", "RowBatch", "row_batch", "attend_rows"]

# "0" keeps CPU bfloat16 steps on the torch ops (benchmarks compare the two in one run).
SWITCH = "QWEN3_ASR_DECODE_ROW"
_kernels = None
_team_body = 0          # the address of attend_team, the C body run_compiled calls
_heads_body = 0         # the address of attend_heads_team: one row's key heads shared out
_TEAM_FIELDS: tuple = ()
_queries: tuple[int, int] | None = None    # the OpenMP team queries a compiled body calls (team_queries)
_LAYER_SLOTS: list = []   # where attend_rows writes each layer's fields in team_data
# Work below these sizes costs less than handing a share of it to a team thread: cached positions
# of a step's attention (0.3-0.6 us each a layer; a compiled body's handoff is a few us), values of
# a row-wise kernel (~1 ns each; a Python share's handoff is tens of us).
MIN_SHARE_POSITIONS = 128
MIN_SHARE_VALUES = 1 << 17


def enabled() -> bool:
    """Whether CPU bfloat16 steps take these kernels: the switch is on and they compiled here."""
    return switch_on(SWITCH) and compile_kernels()


def bits(t: torch.Tensor) -> int:
    """The address of a contiguous bfloat16 CPU tensor, for the kernels (which trust it)."""
    if t.dtype != torch.bfloat16 or not t.is_contiguous() or t.device.type != "cpu":
        raise ValueError(f"expected a contiguous bfloat16 CPU tensor, got {t.dtype} {tuple(t.shape)} on {t.device}")
    return t.data_ptr()


@functools.lru_cache(maxsize=1)
def compile_kernels() -> bool:
    """Compile (or load from numba's cache) the kernels; False where numba is missing or fails."""
    global _kernels, _team_body, _heads_body, _TEAM_FIELDS, _LAYER_SLOTS, _queries
    try:
        from asr_kernels import _bf16_decode_row_jit as jit

        _kernels = (jit.residual_norm_k, jit.prologue_k, jit.attend_k, jit.silu_mul_k, jit.attend_rows_k)
        _team_body, _TEAM_FIELDS = jit.attend_team.address, jit.TEAM_FIELDS
        _heads_body = jit.attend_heads_team.address
        _queries = team_queries()
        _LAYER_SLOTS = [_TEAM_FIELDS.index(name) for name in ("q", "k_cache", "v_cache", "block_size", "out", "heads",
                                                              "kv_heads", "head_dim")]
        _warm(_kernels)
    except Exception:       # no numba, an unsupported platform: the torch path
        _kernels = None
        return False
    return True


# Address-level launchers (the decode-row decoder calls these ~110 times a step). Addresses are of
# contiguous bfloat16 buffers; the caller keeps each tensor alive while its address is in use.

def residual_norm(x: int, res: int, weight: int, h: int, new_res: int, rows: int, n: int, eps: float,
                  has_res: bool) -> None:
    """Per row of [rows, n]: new_res = bf16(x + res) (x without a residual); h = bf16(w * bf16(rms_norm(new_res))).
    new_res may be res itself."""
    _kernels[0](x, res, weight, h, new_res, rows, n, eps, has_res)


def prologue(qkv: int, qk_weight: int, cos: int, sin_signed: int, k_cache: int, v_cache: int, slots: np.ndarray,
             tokens: int, q: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
    """qkv: [tokens, (heads + 2 kv_heads) hd]; qk_weight: [heads + kv_heads, hd]; cos, sin_signed:
    [tokens, hd]; caches: [slots, kv_heads, hd] of one layer; slots: int64 [tokens], -1 for padding.
    Writes q: [tokens, heads, hd] normed and rotated, and each token's rotated k and its v at its slot."""
    _kernels[1](qkv, qk_weight, cos, sin_signed, k_cache, v_cache, slots, tokens, q, heads, kv_heads, head_dim, eps)


def attend(q: int, k_cache: int, v_cache: int, table: np.ndarray, block_size: int, ctx: int, out: int,
           heads: int, kv_heads: int, head_dim: int, shares: int | None = None) -> None:
    """One query q: [heads, hd] over the first ctx cached positions of its block table (int64) -> out:
    [heads * hd]; query head h reads key head h // (heads // kv_heads). From ``MIN_SHARE_POSITIONS``
    positions on, its key heads are dealt into ``shares`` (default: torch's threads) on torch's team:
    a row alone (one clip, a live stream) has nobody else to share the cores with. Same bits either way."""
    if shares is None:
        shares = torch.get_num_threads() if ctx >= MIN_SHARE_POSITIONS else 1
    shares = min(shares, kv_heads)
    if shares <= 1 or _queries is None:
        _kernels[2](q, k_cache, v_cache, table, block_size, ctx, out, heads, kv_heads, head_dim)
        return
    table = np.ascontiguousarray(table, np.int64)       # the body reads it by address
    # the fields of jit.HEADS_FIELDS, in its order
    data = np.array((*_queries, q, k_cache, v_cache, table.ctypes.data, len(table), block_size, ctx, out, heads,
                     kv_heads, head_dim, shares), np.int64)
    run_compiled(_heads_body, data.ctypes.data, shares)


def silu_mul(gate_up: int, out: int, rows: int, n: int) -> None:
    """gate_up: [rows, 2n] (gate, then up) -> out: [rows, n] = bf16(bf16(silu(gate)) * up)."""
    _kernels[3](gate_up, out, rows, n)


@dataclass(frozen=True)
class RowBatch:
    """A step's decode rows for ``attend_rows``: built once per step, read by every layer. Frozen:
    team_data holds the addresses of its arrays."""

    tables: np.ndarray          # [rows, most blocks] int64: each row's cache blocks up to its context
    ctxs: np.ndarray            # [rows] int64: cached positions each row attends over
    starts: np.ndarray          # [rows] int64: each row's query token in the step
    shares: list[np.ndarray]    # row indices per thread of torch's team
    share_rows: np.ndarray      # [shares, most rows] int64: ``shares``, padded, for the team's body
    share_counts: np.ndarray    # [shares] int64: rows in each
    team_data: np.ndarray       # attend_team's fields (TEAM_FIELDS); the step's part filled here


def row_batch(tables: list[np.ndarray], ctxs: list[int], starts: list[int], threads: int | None = None) -> RowBatch:
    """The rows with their blocks, contexts and query tokens, dealt into shares of about equal context
    (longest first, each to the lightest share) over at most ``threads`` (torch's thread count);
    one share where no OpenMP team takes them."""
    rows = len(ctxs)
    padded = np.zeros((rows, max((len(t) for t in tables), default=1)), np.int64)
    for r, table in enumerate(tables):
        padded[r, :len(table)] = table
    threads = torch.get_num_threads() if threads is None else threads
    n = max(1, min(threads, rows, sum(ctxs) // MIN_SHARE_POSITIONS)) if team_available() else 1
    shares, loads = [[] for _ in range(n)], [0] * n
    for r in sorted(range(rows), key=lambda r: -ctxs[r]):
        lightest = loads.index(min(loads))
        shares[lightest].append(r)
        loads[lightest] += ctxs[r]
    shares = [np.asarray(sorted(s), np.int64) for s in shares]
    share_rows = np.zeros((n, max(len(s) for s in shares) if rows else 1), np.int64)
    for i, share in enumerate(shares):
        share_rows[i, :len(share)] = share
    batch = RowBatch(padded, np.asarray(ctxs, np.int64), np.asarray(starts, np.int64), shares, share_rows,
                     np.asarray([len(s) for s in shares], np.int64), np.zeros(len(_TEAM_FIELDS), np.int64))
    queries = team_queries() or (0, 0)
    step = dict(thread_num=queries[0], team_size=queries[1], rows=rows, tables=padded.ctypes.data,
                table_width=padded.shape[1], ctxs=batch.ctxs.ctypes.data, starts=batch.starts.ctypes.data,
                shares=n, share_rows=share_rows.ctypes.data, share_width=share_rows.shape[1],
                share_counts=batch.share_counts.ctypes.data)
    for name, value in step.items():
        batch.team_data[_TEAM_FIELDS.index(name)] = value
    return batch


def attend_rows(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, batch: RowBatch, out: torch.Tensor,
                heads: int, kv_heads: int) -> None:
    """``attend`` for every row of ``batch``, its shares at once on torch's OpenMP team.
    q: [tokens, heads, hd]; caches: [blocks, block_size, kv_heads, hd]; out: [tokens, heads * hd]."""
    block_size, head_dim = k_cache.shape[1], k_cache.shape[-1]
    if len(batch.shares) == 1:                             # on the calling thread, row by row
        _kernels[4](bits(q), bits(k_cache), bits(v_cache), batch.tables, batch.ctxs, batch.starts, batch.shares[0],
                    block_size, bits(out), heads, kv_heads, head_dim)
        return
    batch.team_data[_LAYER_SLOTS] = (bits(q), bits(k_cache), bits(v_cache), block_size, bits(out), heads, kv_heads,
                                     head_dim)      # this layer's fields; the step's were filled by row_batch
    run_compiled(_team_body, batch.team_data.ctypes.data, len(batch.shares))


# Tensor-level forms, for steps of many rows (decoder_forward): a prompt's hundreds of tokens are
# shared out over torch's team by row ranges; a few decode rows stay on the calling thread.

def _by_row_ranges(rows: int, width: int, run) -> None:
    """run(lo, hi) over [0, rows), split into one range per thread of torch's team when the rows
    hold enough values (width each) to pay for the handoff."""
    n = max(1, min(torch.get_num_threads(), rows, rows * width // MIN_SHARE_VALUES))
    if n == 1:
        run(0, rows)
        return
    bounds = [rows * i // n for i in range(n + 1)]
    run_shares(lambda i: run(bounds[i], bounds[i + 1]), n)


def norm_rows(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor,
              eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """rms_norm_residual_cpu's contract: x, residual: [rows, n] -> (h, new residual)."""
    x = x.contiguous()
    residual = None if residual is None else residual.contiguous()     # held: the kernels read its address
    rows, n = x.shape
    h = torch.empty_like(x)
    new_res = x if residual is None else torch.empty_like(x)
    res_at = 0 if residual is None else bits(residual)
    x_at, w_at, h_at, new_at, size = bits(x), bits(weight), bits(h), bits(new_res), n * x.element_size()
    _by_row_ranges(rows, n, lambda lo, hi: residual_norm(
        x_at + lo * size, res_at + lo * size if res_at else 0, w_at, h_at + lo * size, new_at + lo * size,
        hi - lo, n, eps, residual is not None))
    return h, new_res


def prologue_rows(qkv: torch.Tensor, qk_weight: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor,
                  k_cache: torch.Tensor, v_cache: torch.Tensor, slots: np.ndarray, heads: int, kv_heads: int,
                  eps: float) -> torch.Tensor:
    """``prologue`` over tensors: qkv: [tokens, width] -> q: [tokens, heads, hd]."""
    qkv = qkv.contiguous()
    tokens, width = qkv.shape
    head_dim = k_cache.shape[-1]
    q = torch.empty(tokens, heads, head_dim, dtype=torch.bfloat16)
    qkv_at, w_at, cos_at, sin_at, k_at, v_at, q_at = (bits(t) for t in (qkv, qk_weight, cos, sin_signed, k_cache,
                                                                          v_cache, q))
    _by_row_ranges(tokens, width, lambda lo, hi: prologue(
        qkv_at + lo * width * 2, w_at, cos_at + lo * head_dim * 2, sin_at + lo * head_dim * 2, k_at, v_at,
        slots[lo:hi], hi - lo, q_at + lo * heads * head_dim * 2, heads, kv_heads, head_dim, eps))
    return q


def silu_mul_rows(gate_up: torch.Tensor) -> torch.Tensor:
    """gate_up: [rows, 2n] -> [rows, n]."""
    gate_up = gate_up.contiguous()
    rows, n = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty(rows, n, dtype=torch.bfloat16)
    in_at, out_at = bits(gate_up), bits(out)
    _by_row_ranges(rows, 2 * n, lambda lo, hi: silu_mul(in_at + lo * 4 * n, out_at + lo * 2 * n, hi - lo, n))
    return out


def _warm(kernels) -> None:
    """Compile each kernel for the argument types the engine passes (ints, floats, int64 arrays)."""
    residual_norm_k, prologue_k, attend_k, silu_mul_k, attend_rows_k = kernels
    heads, kvh, hd, block = 2, 1, 4, 2
    x = torch.ones(8, dtype=torch.bfloat16)
    residual_norm_k(x.data_ptr(), x.data_ptr(), x.data_ptr(), x.data_ptr(), x.data_ptr(), 1, 8, 1e-6, True)
    qkv = torch.ones((heads + 2 * kvh) * hd, dtype=torch.bfloat16)
    qkw, rope = torch.ones((heads + kvh) * hd, dtype=torch.bfloat16), torch.ones(hd, dtype=torch.bfloat16)
    kc, vc = torch.zeros(block, kvh, hd, dtype=torch.bfloat16), torch.zeros(block, kvh, hd, dtype=torch.bfloat16)
    q, out = torch.empty(heads * hd, dtype=torch.bfloat16), torch.empty(heads * hd, dtype=torch.bfloat16)
    prologue_k(qkv.data_ptr(), qkw.data_ptr(), rope.data_ptr(), rope.data_ptr(), kc.data_ptr(), vc.data_ptr(),
               np.zeros(1, np.int64), 1, q.data_ptr(), heads, kvh, hd, 1e-6)
    attend_k(q.data_ptr(), kc.data_ptr(), vc.data_ptr(), np.zeros(1, np.int64), block, 1, out.data_ptr(), heads, kvh, hd)
    silu_mul_k(x.data_ptr(), out.data_ptr(), 1, 4)
    one = np.zeros(1, np.int64)
    attend_rows_k(q.data_ptr(), kc.data_ptr(), vc.data_ptr(), np.zeros((1, 1), np.int64), np.ones(1, np.int64), one,
                  one, block, out.data_ptr(), heads, kvh, hd)
