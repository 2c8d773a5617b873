"""The greedy token of one row through an LM head of bfloat16 values, from an int8 read of the head: exact.

One clip at a time and a live stream alone, a decode step reads every weight once, and the LM head
(151936 x 1024 for the 0.6B) is a quarter of those bytes; only its argmax is ever used. So the
head is read in int8 (half the bytes): for each output r, an approximation ``a_r`` with a bound
``|a_r - c_r| <= B_r * ||x||``, where ``c_r`` is the float32 sum the exact kernel (``bf16_gemv``)
rounds to the logit (a bfloat16 row) or gives as it is (a float32 row over the head's one-row
copy). ``B_r`` is fixed at load (Cauchy-Schwarz on the row's quantization error, plus float32
summation error of both sums, ``bound_coefficients``). Then:

1. the row with the highest lower bound ``a_j - B_j ||x||`` has its exact block computed: its
   logit ``M0``; the argmax's logit is at least ``M0``;
2. a row whose upper bound ``a_r + B_r ||x||`` is below the lower edge of ``M0``'s bfloat16 rounding
   interval (``M0`` itself for float32 logits) has a logit below ``M0``, so it can be neither the
   maximum nor tied with it;
3. every group of 64 rows holding another row is computed exactly by the same kernel on the same
   packed bytes, and the first row holding the largest logit is the token: the full head's argmax,
   bit for bit.

Where more than ``MAX_BLOCKS`` groups remain, or x or a sum is not finite, ``greedy`` returns None
and the caller reads the whole head. ``reference_token`` is the torch twin of what it must equal.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch

from asr_kernels import bf16_gemv, switch_on
from asr_kernels.team_run import all_ranges, run_compiled, team_queries

__all__ = ["SWITCH", "BLOCK", "MAX_BLOCKS", "enabled", "ArgmaxScreen", "quantize_rows", "bound_coefficients",
           "approx_reference", "reference_token", "screen_for"]

# "0" reads the whole bfloat16 head for every greedy token (benchmarks compare the two in one run).
SWITCH = "QWEN3_ASR_INT8_ARGMAX"
BLOCK = 64              # outputs per block of the int8 copy (the packed head's blocks divide it)
MAX_BLOCKS = 64         # exact groups of 64 past which the whole head is cheaper to read (4096 of its rows)
_UNIT = 2.0 ** -24      # float32's unit roundoff
_BUILD_ROWS = 64 * 64   # the fewest rows a share quantizes at load (a share a thread)
_body = None
_queries = None
_jit = None             # asr_kernels._int8_argmax_jit, once compiled


@functools.lru_cache(maxsize=1)
def _compiled() -> bool:
    global _body, _queries, _jit
    try:
        from asr_kernels import _int8_argmax_jit as jit

        _body, _queries, _jit = jit.approx_team, team_queries(), jit
        q = torch.ones(BLOCK, 2, dtype=torch.int8)
        out = _approx(pack_blocks(q), torch.ones(2), torch.ones(BLOCK), 1)
        if not torch.equal(out, torch.full((BLOCK,), 2.0)):
            raise RuntimeError("int8 approximation kernel disagrees with its twin")
    except Exception:       # no numba, an unsupported platform: the whole head
        _body = None
        return False
    return True


def enabled() -> bool:
    """Whether greedy tokens may come through the screen: the switch is on and the kernel compiled."""
    return switch_on(SWITCH) and _compiled()


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """weight [n, k] -> (q [n, k] int8, scale [n] float32): per row, q = round(w / scale) with
    scale = max|w| / 127 (1 for a row of zeros)."""
    w = weight.float()
    scale = (w.abs().amax(dim=1) / 127).to(torch.float32)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


def bound_coefficients(weight: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """B [n] float64 with |approx_r - exact_r| <= B_r * ||x||_2 for every x (module docstring):
    ||w_r - s_r q_r|| (Cauchy-Schwarz), plus both sums' float32 rounding, gamma_k * sum |products|
    <= gamma_k * ||row|| ||x||, and the rounding of the final scale multiply; 1% on top."""
    k = weight.shape[1]
    gamma = k * _UNIT / (1 - k * _UNIT)
    w, s = weight.double(), scale.double()
    err = (s[:, None] * q.double() - w).norm(dim=1)
    w_norm, q_norm = w.norm(dim=1), s * q.double().norm(dim=1)
    return (err + (gamma + 2 * _UNIT) * (w_norm + 2 * q_norm)) * 1.01


def pack_blocks(q: torch.Tensor) -> torch.Tensor:
    """q [n, k] int8 -> [n / 64, k, 64]: each k of a block's 64 outputs is one cache line."""
    n, k = q.shape
    return q.reshape(n // BLOCK, BLOCK, k).transpose(1, 2).contiguous()


def approx_reference(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The kernel's approximation in torch: scale * (q @ x) [n] float32 for x [k]."""
    return scale * (q.float() @ x.float())


def reference_token(x: torch.Tensor, weight: torch.Tensor) -> int:
    """What ``greedy`` must return: the first index of the largest logit of the one-row kernel's
    math (``bf16_gemv.gemv_reference``: k-order float32 sums, rounded to bfloat16 for a bfloat16 x)."""
    return int(bf16_gemv.gemv_reference(x, weight).float().max(dim=-1).indices)


def _approx(packed: torch.Tensor, x: torch.Tensor, scale: torch.Tensor, shares: int) -> torch.Tensor:
    blocks, k, _ = packed.shape
    out = torch.empty(blocks * BLOCK, dtype=torch.float32)
    data = np.array((0, 0, x.data_ptr(), packed.data_ptr(), scale.data_ptr(), out.data_ptr(), blocks * BLOCK, k,
                     shares), np.int64)
    if shares > 1:
        data[0], data[1] = _queries
        run_compiled(_body.address, data.ctypes.data, shares)
    else:
        _body.ctypes(data.ctypes.data_as(ctypes.c_void_p))
    return out


def _lower_edge(value: float) -> float:
    """The least real number that rounds (to nearest, ties even) to the bfloat16 ``value``, or a
    number just below it: the midpoint to the next bfloat16 down."""
    bits = int(np.array(value, np.float32).view(np.uint32))
    if value > 0:
        below = bits - 0x10000
    elif value < 0:
        below = bits + 0x10000
    else:
        below = 0x80010000                       # -(the smallest bfloat16 subnormal)
    return (value + float(np.array(below, np.uint32).view(np.float32))) / 2


class ArgmaxScreen:
    """The exact greedy token of one row through a head whose one-row kernel is ``row`` (a
    ``bf16_gemv.RowGemv``: bfloat16 rows over oneDNN's packed head, blocks of 64 or 32, or float32
    rows over a copy), read first in int8. ``weight``: the head's values in bfloat16."""

    def __init__(self, weight: torch.Tensor, row: bf16_gemv.RowGemv):
        n, k = weight.shape
        if BLOCK % row.block or (row.n, row.k) != (n, k) or n % BLOCK:
            raise ValueError(f"the head's one-row kernel must read [{n}, {k}] (n a multiple of {BLOCK}) in blocks "
                             f"dividing {BLOCK}, got blocks of {row.block} of [{row.n}, {row.k}]")
        self.packed = torch.empty(n // BLOCK, k, BLOCK, dtype=torch.int8)
        self.scale = torch.empty(n, dtype=torch.float32)
        self.bound = torch.empty(n, dtype=torch.float64)
        bits = weight.contiguous().view(torch.int16).numpy().view(np.uint16)
        gamma = k * _UNIT / (1 - k * _UNIT)
        packed, scale, bound = self.packed.numpy(), self.scale.numpy(), self.bound.numpy()
        # ranges of whole 64-row blocks on torch's team (the kernel drops the GIL); False: some
        # weight is inf or nan, and no bound holds
        self.finite = all_ranges(lambda first, last: _jit.quantize_into(
            bits[first * BLOCK:last * BLOCK], packed, scale, bound, first * BLOCK, gamma + 2 * _UNIT),
            n // BLOCK, _BUILD_ROWS // BLOCK)
        self.row, self.n, self.k = row, n, k

    def greedy(self, x: torch.Tensor) -> int | None:
        """The token ``reference_token(x, head)`` gives, for x [1, k] of the row kernel's dtype; None
        where the screen cannot decide cheaply (the caller reads the whole head)."""
        if x.dtype != self.row.dtype:        # bfloat16 rows over a float32 kernel: logits rounded after it
            return None
        xf = x.reshape(-1).float()                                   # exact: bfloat16 widens exactly
        norm = float(xf.double().norm()) * (1 + 1e-9)
        if not np.isfinite(norm):
            return None
        shares = min(torch.get_num_threads(), self.n // BLOCK) if _queries else 1
        approx = _approx(self.packed, xf, self.scale, shares).numpy()    # [n] float32
        bound = self.bound.numpy()
        best = _jit.best_lower(approx, bound, norm)
        if best < 0:
            return None
        exact = {}
        first = float(self._group(x, best // BLOCK, exact)[best % BLOCK])
        if not np.isfinite(first):
            return None
        groups = np.empty(MAX_BLOCKS, np.int64)
        edge = _lower_edge(first) if self.row.dtype == torch.bfloat16 else first    # float32: not rounded
        count = _jit.candidate_blocks(approx, bound, norm * (1 + 1e-12), edge, groups)
        if count <= 0:                  # too many (none cannot be: the best row's group reaches the edge)
            return None
        values = torch.cat([self._group(x, int(g), exact) for g in groups[:count]]).float()
        at = int(values.max(dim=-1).indices)                         # the first of the largest
        return int(groups[at // BLOCK]) * BLOCK + at % BLOCK

    def _group(self, x: torch.Tensor, g: int, done: dict) -> torch.Tensor:
        """Exact logits [64] of rows 64 g to 64 g + 63: the one-row kernel's blocks there (one of 64,
        or two of 32 where oneDNN packs for AMX)."""
        if g not in done:
            per = BLOCK // self.row.block
            done[g] = torch.cat([self.row.block_outputs(x, g * per + i) for i in range(per)])
        return done[g]


def screen_for(weight: torch.Tensor, row: bf16_gemv.RowGemv | None) -> ArgmaxScreen | None:
    """The screen for a head ``weight`` [n, k] read one row at a time by ``row``, or None: switched
    off, no numba, no one-row kernel (or n not a multiple of 64), or a weight that is not finite.
    A float32 weight (a float32 model's head, whose one-row kernel reads a bfloat16 copy of it: its
    values are bfloat16's) is read as bfloat16."""
    if (row is None or BLOCK % row.block or weight.shape[0] % BLOCK
            or weight.dtype not in (torch.bfloat16, torch.float32) or weight.device.type != "cpu" or not enabled()):
        return None
    screen = ArgmaxScreen(weight.to(torch.bfloat16), row)      # it reads every value: it sees any inf or nan
    return screen if screen.finite else None
