"""Linear methods: how one projection ``y = x @ W.T`` runs, chosen per weight at load.

Like vLLM's ``quant_method``, each method is a small ``nn.Module`` holding its weight in the
form it reads, and ``float_linear`` picks one from the platform's rules (``platform.py``):

- ``PlainLinear``: ``ops.linear`` (F.linear; emulated-bfloat16 GEMMs of many rows in float32).
- ``PackedBf16Linear``: bfloat16 packed once into oneDNN's blocked layout; skinny decode GEMMs
  read it faster, bit-identical to F.linear, and the plain weight is dropped. One row (a decode
  step of one request) reads the same packed bytes through ``asr_kernels.bf16_gemv`` where its
  layout check passes at load: faster again, summed in k order (one output in ~10^4 rounds apart).
- ``SmallRowsOneDNNLinear``: float32 calls of at most ``ONEDNN_MAX_ROWS`` rows through oneDNN,
  bigger ones through F.linear; the plain weight is shared, not copied. It sums in another order
  than MKL, so float32 greedy tokens are still checked against transformers by the parity tests.

The other methods live beside their formats: ``fp16_weights.Fp16CompactLinear`` (bfloat16 values
in 2 bytes, float32 math) and ``int8_linear.Int8DynamicLinear`` (quantization).

oneDNN builds and keeps a kernel, with buffers that grow with the rows, for every row count it
sees, so calls run at few row counts: padded with zero rows to ``packed_rows`` (packed) or a
power of two (float32). Figures: tests/bench/RESULTS.md.
"""
from __future__ import annotations

import torch
from torch import nn

from asr_kernels import bf16_gemv
from engine.network import ops, platform
from engine.network.platform import onednn_mm

# Rows of one packed bfloat16 GEMM call; bigger calls run in pieces of this size.
PACKED_CHUNK_ROWS = 256
# Rows up to which a float32 projection runs on oneDNN (decode steps and small mixed steps).
ONEDNN_MAX_ROWS = 32


def packed_rows(rows: int) -> int:
    """The row count a packed call of ``rows`` (1 to PACKED_CHUNK_ROWS) rows runs at: a power of
    two up to 64, then a multiple of 64. Ten counts in all, so oneDNN keeps ten kernels per shape."""
    return 1 << (rows - 1).bit_length() if rows <= 64 else -(-rows // 64) * 64


def packed_linear(x: torch.Tensor, packed: torch.Tensor) -> torch.Tensor:
    """``x @ W.T`` for a ``_reorder_linear_weight``-packed bfloat16 W, at ``packed_rows`` row counts.
    x: [rows, in] -> [rows, out]."""
    rows = x.shape[0]
    if rows > PACKED_CHUNK_ROWS:
        return torch.cat([packed_linear(x[i:i + PACKED_CHUNK_ROWS], packed)
                          for i in range(0, rows, PACKED_CHUNK_ROWS)])
    if rows == 0:
        return onednn_mm(x, packed)
    bucket = packed_rows(rows)
    if bucket != rows:
        x = torch.cat([x, x.new_zeros(bucket - rows, x.shape[1])])
    return onednn_mm(x, packed)[:rows]


def onednn_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` through oneDNN, rows padded to a power of two so that few kernels are built."""
    rows = x.shape[0]                                       # x: [rows, in]
    bucket = 1 << (rows - 1).bit_length()
    if bucket != rows:
        x = torch.cat([x, x.new_zeros(bucket - rows, x.shape[1])])
    return onednn_mm(x, weight)[:rows]


class LinearMethod(nn.Module):
    """One projection's way of computing ``x @ W.T``: x: [tokens, in] -> [tokens, out].

    Weights are plain attributes, not parameters: they are load-time products (packed layouts,
    int8 codes) that no optimizer or state dict should see."""

    out_features: int

    @property
    def weight(self) -> torch.Tensor | None:
        """The plain [out, in] weight this method reads, or None where it reads another form."""
        return None

    def tensors(self) -> list[torch.Tensor]:
        """The tensors a call reads, in whatever form (plain, oneDNN-packed, int8 codes): for
        placing them in memory (``huge_pages``). Packed forms torch keeps opaque are not listed."""
        return [v for v in vars(self).values() if isinstance(v, torch.Tensor)]


class PlainLinear(LinearMethod):
    """``ops.linear(x, W)``: F.linear, with emulated bfloat16 handled behind ``ops``."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self._weight = weight
        self.out_features = weight.shape[0]

    @property
    def weight(self) -> torch.Tensor:
        return self._weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.linear(x, self._weight)


class SmallRowsOneDNNLinear(PlainLinear):
    """float32: calls of 1 to ``ONEDNN_MAX_ROWS`` rows through oneDNN, others as ``PlainLinear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if 0 < x.shape[0] <= ONEDNN_MAX_ROWS and x.dim() == 2:
            return onednn_linear(x, self._weight)
        return ops.linear(x, self._weight)


class PackedBf16Linear(LinearMethod):
    """bfloat16 W packed into oneDNN's layout (the plain weight is not kept); one row through
    ``bf16_gemv`` where it reads this layout (``row``, chosen here once), else oneDNN."""

    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 16)
        self.out_features = weight.shape[0]
        self.row = bf16_gemv.row_gemv_for(self.packed, weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.row is not None and x.dim() == 2 and x.shape[0] == 1:     # x: [1, in]
            return self.row(x.contiguous())
        return packed_linear(x, self.packed)


class NotLoaded(LinearMethod):
    """A projection whose weights ``load_network`` has not fused yet."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.out_features = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError(f"{self.name} has no weights yet: networks are built by load_network")


def float_linear(weight: torch.Tensor, shared: bool = False) -> LinearMethod:
    """The float method for ``weight`` [out, in] on this platform. ``shared``: the weight is also
    read elsewhere (a tied LM head shares the embedding's matrix), so no method that copies it."""
    here = platform.current()
    cpu = weight.device.type == "cpu"
    if cpu and weight.dtype == torch.bfloat16 and here.onednn_bf16_packing and not shared:
        return PackedBf16Linear(weight)
    if cpu and weight.dtype == torch.float32 and here.onednn_f32_small_rows:
        return SmallRowsOneDNNLinear(weight)
    return PlainLinear(weight)


__all__ = ["LinearMethod", "PlainLinear", "SmallRowsOneDNNLinear", "PackedBf16Linear", "NotLoaded",
           "float_linear", "packed_linear", "packed_rows", "onednn_linear"]
