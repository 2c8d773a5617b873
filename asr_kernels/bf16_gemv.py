"""One row times a oneDNN-packed bfloat16 weight, read straight from oneDNN's layout on torch's team.

A CPU decode step of one request (one clip at a time, a live stream alone) is ~113 one-row
projections, and oneDNN's packed kernel streams them well below the machine's memory rate, with a
fixed cost per call on top (tests/bench/RESULTS.md). This kernel reads the same packed bytes (no
second copy of any weight) as one prefetched stream per block of outputs, its shares on torch's
OpenMP team (``team_run``: the threads that are already awake between torch ops).

The layout, [n / block][k / 2][block][2] (``block`` outputs side by side, k in pairs), is what
``_reorder_linear_weight`` gives for the engine's shapes: block 32 where oneDNN packs for AMX, 64
where it packs for AVX512-BF16 without AMX (AMD Zen 4 and later). It is oneDNN's private choice:
``row_gemv_for`` checks it on each weight at load against the plain weight and returns None where
it is neither (another CPU kind, another oneDNN), and the caller keeps oneDNN.

Bits: each output sums its products in k order in float32 and rounds once to bfloat16;
``gemv_reference`` is the torch twin, equal bit for bit (tests/test_bf16_gemv.py). oneDNN sums in
an order of its own, so about one output in 10^4 rounds to the neighbouring bfloat16.

The same loop serves float32 rows (``dtype=torch.float32``: float32 in, float32 sums out, not
rounded) over a copy of bfloat16-valued weights in that layout (``float_row_copy``): the one-row
projections of a float32 model on CPUs without native bfloat16, whose compact weights
(fp16_weights) are otherwise read through fbgemm with several torch calls around each.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
import torch

from asr_kernels import switch_on
from asr_kernels.team_run import all_ranges, run_compiled, team_queries

__all__ = ["SWITCH", "BLOCKS", "enabled", "RowGemv", "row_gemv_for", "float_row_copy", "packed_block",
           "pack_reference", "gemv_reference"]

# "0" keeps one-row projections on oneDNN or fbgemm (benchmarks compare the two in one run).
SWITCH = "QWEN3_ASR_ROW_GEMV"
BLOCKS = (32, 64)   # the block widths the kernel reads
COPY_BLOCK = 64     # float_row_copy's width: the faster of the two on AVX2 and AVX-512 alike
_body = None        # the compiled team body (a numba cfunc)
_queries = None     # team_run.team_queries(): None where no OpenMP team is loaded


@functools.lru_cache(maxsize=1)
def _compiled() -> bool:
    """Compile (or load from numba's cache) the kernel; False where numba is missing or fails."""
    global _body, _queries
    try:
        from asr_kernels import _bf16_gemv_jit as jit

        _body, _queries = jit.gemv_team, team_queries()
        for bits in (np.uint32, np.uint16):                      # float32 and bfloat16 weights
            jit.copy_blocks(np.zeros((64, 2), bits), np.empty((1, 1, 64, 2), np.uint16), 0, 1)
        for dtype in (torch.bfloat16, torch.float32):
            for block in BLOCKS:                                 # one block, one pair: compiles it
                w = torch.ones(block, 2, dtype=torch.bfloat16)
                RowGemv(w.data_ptr(), block, 2, owner=w, block=block, dtype=dtype)(torch.ones(1, 2, dtype=dtype))
    except Exception:       # no numba, an unsupported platform: oneDNN
        _body = None
        return False
    return True


def enabled() -> bool:
    """Whether one-row projections may take this kernel: the switch is on and it compiled here."""
    return switch_on(SWITCH) and _compiled()


def _packed_bits(packed: torch.Tensor) -> np.ndarray:
    """The bytes of a packed (opaque) oneDNN tensor as uint16, without a copy."""
    count = torch.ops.mkldnn._nbytes(packed) // 2
    return np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(torch.ops.mkldnn.data_ptr(packed)))


def packed_block(packed: torch.Tensor, weight: torch.Tensor) -> int | None:
    """The block width b in ``BLOCKS`` for which ``packed`` holds the bfloat16 ``weight`` [n, k] as
    [n / b][k / 2][b][2] with no padding, or None. The first, a middle and the last block are
    compared whole: the layout is one rule for every block. Where those match under both widths (rows
    alike, as zeros are: a checkpoint padded to larger dimensions), every block is compared under each;
    a width under which all of them hold reads the weight right, whichever oneDNN chose."""
    n, k = weight.shape
    if weight.dtype != torch.bfloat16 or k % 2 or not n:
        return None
    try:
        raw = _packed_bits(packed)
    except Exception:       # not an opaque oneDNN tensor, or no data_ptr/_nbytes ops in this torch
        return None
    if raw.size != n * k:
        return None
    plain = weight.contiguous().view(torch.int16).numpy().view(np.uint16)
    def holds(block: int, whole: bool = False) -> bool:
        blocks = n // block
        return n % block == 0 and all(
            np.array_equal(raw[b * block * k:(b + 1) * block * k],
                           plain[b * block:(b + 1) * block].reshape(block, k // 2, 2).transpose(1, 0, 2).reshape(-1))
            for b in (range(blocks) if whole else sorted({0, blocks // 2, blocks - 1})))

    found = [block for block in BLOCKS if holds(block)]
    if len(found) < 2:
        return found[0] if found else None
    # the sampled blocks read alike both ways (zero rows, a padded checkpoint): the first width that holds
    # whole (where both would, the bytes are the same either way)
    return next((block for block in found if holds(block, whole=True)), None)


class RowGemv:
    """``x @ W.T`` for one row x [1, k] -> [1, n], W's bfloat16 bits at ``address`` in the
    [n / block][k / 2][block][2] layout. ``owner`` (the packed tensor) is held, so the bits live as long.
    ``dtype``: the row's and the outputs' (bfloat16, rounded once; or float32, not rounded)."""

    def __init__(self, address: int, n: int, k: int, owner: object, block: int = 32,
                 dtype: torch.dtype = torch.bfloat16):
        if block not in BLOCKS:
            raise ValueError(f"block must be one of {BLOCKS}, got {block}")
        if n % block or k % 2 or n <= 0:
            raise ValueError(f"the packed layout needs n a multiple of {block} and k even, got n={n}, k={k}")
        if dtype not in (torch.bfloat16, torch.float32):
            raise ValueError(f"rows are bfloat16 or float32, got {dtype}")
        self.n, self.k, self.block, self.owner, self._address = n, k, block, owner, address
        self.dtype, self._float_rows = dtype, int(dtype == torch.float32)

    def _check(self, x: torch.Tensor) -> None:
        if x.shape != (1, self.k) or x.dtype != self.dtype or not x.is_contiguous():
            raise ValueError(f"expected a contiguous {self.dtype} [1, {self.k}] row, got {x.dtype} {tuple(x.shape)}")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self._check(x)
        return self._run(x, min(torch.get_num_threads(), self.n // self.block) if _queries else 1)

    def with_shares(self, x: torch.Tensor, shares: int) -> torch.Tensor:
        """``self(x)`` dealt into ``shares`` shares (tests: the bits must not depend on them)."""
        if shares > 1 and not _queries:
            raise ValueError("shares run on an OpenMP team, and none is loaded here")
        return self._run(x.contiguous(), shares)

    def block_outputs(self, x: torch.Tensor, b: int) -> torch.Tensor:
        """Outputs ``b * block`` to ``(b + 1) * block`` of ``self(x)`` [block], computed alone on the
        calling thread: the same bits, since each output's sum is its own (int8_argmax reads a few)."""
        if not 0 <= b < self.n // self.block:
            raise ValueError(f"block {b} is outside the weight's {self.n // self.block} blocks")
        self._check(x)
        out = torch.empty(self.block, dtype=self.dtype)
        data = np.array((0, 0, x.data_ptr(), self._address + b * self.block * self.k * 2, out.data_ptr(),
                         self.block, self.k, 1, self.block, self._float_rows), np.int64)
        _body.ctypes(data.ctypes.data_as(ctypes.c_void_p))
        return out

    def _run(self, x: torch.Tensor, shares: int) -> torch.Tensor:
        # ~113 calls a decode step: nothing here but the output and the body's ten fields
        out = torch.empty(1, self.n, dtype=self.dtype)
        if shares > 1:
            data = np.array((*_queries, x.data_ptr(), self._address, out.data_ptr(), self.n, self.k, shares,
                             self.block, self._float_rows), np.int64)
            run_compiled(_body.address, data.ctypes.data, shares)
        else:                       # on the calling thread (the body sees thread_num 0: no team)
            data = np.array((0, 0, x.data_ptr(), self._address, out.data_ptr(), self.n, self.k, 1, self.block,
                             self._float_rows), np.int64)
            _body.ctypes(data.ctypes.data_as(ctypes.c_void_p))
        return out


def row_gemv_for(packed: torch.Tensor, weight: torch.Tensor) -> RowGemv | None:
    """The kernel for ``packed`` (``weight`` [n, k] packed by oneDNN), or None where it does not apply:
    switched off, no numba, or a layout other than the one it reads."""
    if weight.device.type != "cpu" or not enabled():
        return None
    block = packed_block(packed, weight)
    return None if block is None else RowGemv(torch.ops.mkldnn.data_ptr(packed), *weight.shape, owner=packed,
                                              block=block)


def float_row_copy(weight: torch.Tensor) -> RowGemv | None:
    """The kernel for float32 rows over a copy of ``weight`` [n, k] (float32 or bfloat16 whose
    values are all bfloat16) in the blocked layout, 2 bytes a value; None where it does not apply:
    switched off, no numba, n not a multiple of ``COPY_BLOCK``, k odd, or a value that is not a finite
    bfloat16."""
    n, k = weight.shape
    if weight.device.type != "cpu" or n % COPY_BLOCK or k % 2 or not n or not enabled():
        return None
    # checked and packed in one pass over the bits, blocks shared over torch's team
    from asr_kernels import _bf16_gemv_jit as jit

    if weight.dtype == torch.bfloat16:
        bits = weight.detach().contiguous().view(torch.int16).numpy().view(np.uint16)
    else:
        bits = weight.detach().float().contiguous().view(torch.int32).numpy().view(np.uint32)
    packed = torch.empty(n // COPY_BLOCK, k // 2, COPY_BLOCK, 2, dtype=torch.bfloat16)
    out = packed.view(torch.int16).numpy().view(np.uint16)
    if not all_ranges(lambda first, last: jit.copy_blocks(bits, out, first, last), n // COPY_BLOCK):
        return None     # a value bfloat16 cannot hold, or not finite: the fbgemm path keeps it
    return RowGemv(packed.data_ptr(), n, k, owner=packed, block=COPY_BLOCK, dtype=torch.float32)


def gemv_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The kernel's math in torch: x [k] bfloat16 or float32, weight [n, k] bfloat16 -> [n] of x's
    dtype, each output summed in k order in float32, each product added with one rounding (a fused
    multiply-add: the product, exact in float64, added there and rounded to float32), rounded once
    to bfloat16 for a bfloat16 x."""
    xd, wd = x.double(), weight.double()
    acc = torch.zeros(weight.shape[0], dtype=torch.float32)
    for i in range(x.shape[0]):
        acc = (acc.double() + xd[i] * wd[:, i]).float()
    return acc.to(x.dtype)


def pack_reference(weight: torch.Tensor, block: int = 32) -> torch.Tensor:
    """weight [n, k] bfloat16 in the layout the kernel reads for ``block``, as a plain tensor (tests;
    oneDNN's own packing is what the engine reads)."""
    n, k = weight.shape
    return weight.reshape(n // block, block, k // 2, 2).permute(0, 2, 1, 3).contiguous()
