"""Compact weights: decoder projections whose values are bfloat16, kept in 2 bytes instead of
4 on CPUs without native bfloat16, as ``Fp16CompactLinear`` methods.

There the model runs in float32 and a decode step is bound by reading the weights. fbgemm's
fp16 GEMM (``torch.ops.quantized.linear_dynamic_fp16``) reads float16 weights and computes in
float32. Each row, times a power of two, holds its bfloat16 values exactly as float16
(``asr_kernels.fp16_scale``, which checks every value): a weight with a single value that does
not come back exactly keeps its float method. The values and the float32 math are the same; only the summation order differs, as between any two
float32 GEMMs, so float32 greedy tokens are still checked against transformers.

One row at a time (one clip, a live stream alone) fbgemm's call costs several torch calls around
it, so where memory allows (``platform.ROW_COPY_HEADROOM``) each weight also gets a copy in
``bf16_gemv``'s blocked layout (the same values as bfloat16, 2 bytes each), which one-row steps
read with float32 math and no scale; steps of more rows keep fbgemm.

Checking and packing cost load time (``pack_all``); ``engine.load(compact_weights=False)``
skips them. A tied LM head is compacted too, and the token embedding then looks its rows up in
the same float16 values (``CompactEmbedding``). Figures: tests/bench/RESULTS.md.
"""
from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor

import torch

from asr_kernels import bf16_gemv
from asr_kernels.fp16_scale import scale_rows
from engine.network import platform
from engine.network.linear_methods import LinearMethod, float_linear

# Rows packed as one fbgemm matrix. fbgemm packs reading the weight transposed, one value of each
# row in turn, so the rows being read must stay in a core's cache: the LM head packs several
# times faster in slices, at the cost of one more GEMM call per slice and step; the 0.6B's
# decoder projections (at most 6144 rows) are smaller than a slice and stay one matrix.
PACK_ROWS = 8192
def fp16_gemm_works() -> bool:
    """fbgemm's fp16 GEMM exists here and keeps float16 values exactly (``platform.fbgemm_fp16``)."""
    return platform.current().fbgemm_fp16


def stores_as_fp16(weight: torch.Tensor) -> bool:
    """Whether a decoder weight of this kind goes through ``Fp16CompactLinear``: float32 or
    bfloat16 on a CPU without native bfloat16 (where float32 is the default dtype and bfloat16
    is emulated), with fbgemm's fp16 GEMM. Where bfloat16 is native, its own GEMMs are faster."""
    return compacts(weight.dtype, weight.device)


def compacts(dtype: torch.dtype, device: torch.device) -> bool:
    """``stores_as_fp16`` for a weight of ``dtype`` on ``device``."""
    return (torch.device(device).type == "cpu" and dtype in (torch.float32, torch.bfloat16)
            and not platform.current().native_bf16 and fp16_gemm_works())


class Fp16CompactLinear(LinearMethod):
    """``y = x @ W.T`` with W held as float16 times a power of two per row (exactly the
    checkpoint's values, see the module docstring) and float32 math; a weight that is not exact
    in float16 keeps its float method (``fallback``)."""

    def __init__(self, weight: torch.Tensor, tied: bool = False, dtype: torch.dtype | None = None):
        # tied: the LM head that shares the embedding's matrix. Its float method must stay the
        # plain shared weight (no packed copy), and packing keeps the scaled float16 values
        # for the embedding to look rows up in (``CompactEmbedding``). The plain weight stays
        # until packing has failed (``keep_float``): float_linear may hand a bfloat16 weight to
        # oneDNN and drop it, and the check needs it. dtype: the model's, for a float method
        # (a float32 model's weight may come as the checkpoint's bfloat16, packed from there).
        super().__init__()
        self.dtype = dtype or weight.dtype
        self.fallback: LinearMethod | None = float_linear(weight, shared=True)
        self.tied = tied
        self.out_features = weight.shape[0]
        self.packed = None
        self.inverse_scale: torch.Tensor | None = None    # [out] float32
        self.values: torch.Tensor | None = None           # [out, in] float16, a tied head's only
        self.row: bf16_gemv.RowGemv | None = None         # one-row steps' kernel over its own copy

    def pack(self, scaled: tuple[torch.Tensor, torch.Tensor] | None = None, row_copy: bool = True) -> None:
        """Hand the weight to fbgemm (``scaled``: ``scale_rows``' result, when already
        taken), with a one-row copy (``row_copy``); keep the float path where it is not exact in float16."""
        if scaled is None:
            scaled = scale_rows(self.fallback.weight)
        if scaled is None:
            self.keep_float()
        else:
            row = bf16_gemv.float_row_copy(self.fallback.weight) if row_copy else None
            self.adopt([pack_rows(rows) for rows in scaled[0].split(PACK_ROWS)], scaled, row)

    @property
    def weight(self) -> torch.Tensor | None:
        """The plain weight this method still reads, or None."""
        return self.fallback.weight if self.fallback is not None else None

    def tensors(self) -> list[torch.Tensor]:
        """The one-row copy, where there is one: fbgemm's packed rows are opaque to torch (a tied
        head's float16 values are read by the embedding, a few rows a step). A float fallback is a
        method of its own and lists its weight itself."""
        return [self.row.owner] if self.row is not None else []

    def keep_float(self) -> None:
        """Not packed: the float method ``float_linear`` picks (a tied head keeps the
        embedding's own weight; one kept in bfloat16 for packing is widened to the model's dtype,
        and a tied embedding then reads the widened one)."""
        if self.packed is None and (not self.tied or self.fallback.weight.dtype != self.dtype):
            self.fallback = float_linear(self.fallback.weight.to(self.dtype), shared=self.tied)

    def adopt(self, slices: list, scaled: tuple[torch.Tensor, torch.Tensor],
              row: bf16_gemv.RowGemv | None = None) -> None:
        """Take the packed slices of ``scaled`` (``PACK_ROWS`` rows each, in order) and the
        one-row kernel over a copy of the same values, if any."""
        values = scaled[0].half() if self.tied else None      # before any field changes
        self.packed, self.inverse_scale, self.values, self.row = slices, scaled[1], values, row
        self.fallback = None       # the packed copy holds the weights: half the bytes

    def forward(self, x: torch.Tensor) -> torch.Tensor:        # x: [tokens, in] -> [tokens, out]
        if self.packed is None:
            return self.fallback(x)
        if self.row is not None and x.shape[0] == 1:          # the unscaled values: no scale to apply
            return self.row(x.float().contiguous()).to(x.dtype)
        x32 = x.float().contiguous()
        if len(self.packed) == 1:
            y = torch.ops.quantized.linear_dynamic_fp16(x32, self.packed[0])                 # float32
        else:
            y = torch.cat([torch.ops.quantized.linear_dynamic_fp16(x32, p) for p in self.packed], dim=-1)
        return y.mul_(self.inverse_scale).to(x.dtype)


class CompactEmbedding(torch.nn.Module):
    """The token embedding of a tied, compacted LM head: the rows the head's fp16 pack was made
    from, float16 times a power of two per row, looked up and scaled back exactly. The pair
    takes the memory the float32 matrix alone took, and a decode step reads half as many bytes
    for the head."""

    def __init__(self, values: torch.Tensor, inverse_scale: torch.Tensor, dtype: torch.dtype):
        super().__init__()
        self.register_buffer("values", values, persistent=False)                # [vocab, hidden] float16
        self.register_buffer("inverse_scale", inverse_scale, persistent=False)  # [vocab] float32
        self.dtype = dtype

    def forward(self, ids: torch.Tensor) -> torch.Tensor:          # ids: [tokens] -> [tokens, hidden]
        rows = self.values[ids].float()                             # exact: float16 -> float32
        return rows.mul_(self.inverse_scale[ids].unsqueeze(-1)).to(self.dtype)   # a power of two: exact


def pack_rows(rows: torch.Tensor):
    """fbgemm's packed float16 form of ``rows`` [n, in] (float32 values exact in float16)."""
    return torch.ops.quantized.linear_prepack_fp16(rows.contiguous(), None)


def row_copies_fit(projections: list[Fp16CompactLinear]) -> bool:
    """Whether the one-row copies of all ``projections`` (2 bytes a value) leave
    ``platform.ROW_COPY_HEADROOM`` of memory free (or the free memory is unknown)."""
    need = sum(p.fallback.weight.numel() * 2 for p in projections if p.fallback is not None)
    free = platform.available_memory_bytes()
    return free is None or free - need >= platform.ROW_COPY_HEADROOM


def pack_all(projections: list[Fp16CompactLinear]) -> None:
    """Check every weight on this thread and pack the exact ones on a pool of threads, a few at
    a time: fbgemm packs one slice on one core, so the pool packs as many slices at once as
    there are threads, with this thread waiting meanwhile. The one-row copies (``row_copies_fit``)
    are made beside the check.

    Checking and packing never overlap: the check's torch ops start their own team of threads,
    and beside busy packing threads every team's barrier waits on a thread that has no core.
    A failed pack warns and keeps the float method."""
    workers = max(1, torch.get_num_threads())
    copies = row_copies_fit(projections)
    buffers = [torch.empty(0)] * workers     # the scaled rows, one buffer a slot: packed, then overwritten
    with ThreadPoolExecutor(workers, thread_name_prefix="fp16-pack") as pool:
        for start in range(0, len(projections), workers):
            batch = [(p, scale_rows(p.fallback.weight, out=_buffer(buffers, slot, p.fallback.weight.numel())))
                     for slot, p in enumerate(projections[start:start + workers])]
            rows = [bf16_gemv.float_row_copy(p.fallback.weight) if copies and scaled is not None else None
                    for p, scaled in batch]
            jobs = [(p, scaled, row, [pool.submit(pack_rows, part) for part in scaled[0].split(PACK_ROWS)])
                    for (p, scaled), row in zip(batch, rows) if scaled is not None]
            for proj, scaled in batch:
                if scaled is None:
                    proj.keep_float()
            for proj, scaled, row, slices in jobs:
                try:
                    proj.adopt([job.result() for job in slices], scaled, row)
                except Exception as e:     # the float weight is kept until packing succeeds
                    warnings.warn(f"fp16 weight packing failed ({e}); using the float32 path", stacklevel=2)
                    proj.keep_float()


def _buffer(buffers: list[torch.Tensor], slot: int, size: int) -> torch.Tensor:
    """``buffers[slot]``, made at least ``size`` float32 values long."""
    if buffers[slot].numel() < size:
        buffers[slot] = torch.empty(size, dtype=torch.float32)
    return buffers[slot]
