"""Giving each decoder projection its linear method at weight load, from the user's settings
(``quantize``, ``compact``) and the platform's rules: the one place where formats are picked.

| setting / platform                          | method |
|---------------------------------------------|--------|
| ``quantize="int8"``                         | ``Int8DynamicLinear`` (from the on-disk cache when it holds the weight) |
| ``compact`` and ``stores_as_fp16(weight)``  | ``Fp16CompactLinear`` (falls back to the float method if a value is not exact) |
| a tied bfloat16 LM head where oneDNN packs  | ``PackedBf16Linear`` over a copy (the embedding keeps the plain matrix) |
| otherwise                                   | ``linear_methods.float_linear`` (plain, oneDNN-packed bfloat16, or small-row oneDNN float32) |

The tied head is the largest single read of a decode step (a quarter of the 0.6B's bytes); plain
F.linear reads it at about two thirds of the packed layout's rate on one row, so it is worth
its copy (vocab x hidden x 2 bytes: 311 MB for the 0.6B). Figures: tests/bench/RESULTS.md.
"""
from __future__ import annotations

import torch

from engine.network import platform
from engine.network.fp16_weights import CompactEmbedding, Fp16CompactLinear, pack_all, stores_as_fp16
from engine.network.int8_linear import Int8DynamicLinear, pack_int8, quantize_int8
from engine.network.linear_methods import LinearMethod, PackedBf16Linear, float_linear


def fits(q_scale: tuple[torch.Tensor, torch.Tensor] | None, shape: tuple[int, int]) -> bool:
    """A cached int8 entry (q, scale) for a projection of ``shape`` [out, in]."""
    return q_scale is not None and tuple(q_scale[0].shape) == shape and tuple(q_scale[1].shape) == shape[:1]


class LinearChooser:
    """Called once per projection (``chooser(name, *weights, tied=...)``), then ``finish()``
    packs what is packed in bulk. ``fresh`` holds the int8 weights quantized here, for the cache."""

    def __init__(self, quantize: str | None, int8_weights: dict | None, compact: bool,
                 dtype: torch.dtype | None = None):
        # dtype: the model's, for a compact weight that falls back to its float method
        self.quantize, self.compact, self.dtype = quantize, compact, dtype
        self.cached = int8_weights or {}
        self.fresh: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self.int8: list[Int8DynamicLinear] = []
        self.fp16: list[Fp16CompactLinear] = []

    def __call__(self, name: str, *weights: torch.Tensor, tied: bool = False) -> LinearMethod:
        """The method for the concatenation of ``weights`` (each [out_i, in]). ``tied``: the LM
        head sharing the embedding's matrix keeps that very tensor as its float weight."""
        if self.quantize == "int8":
            shape = (sum(w.shape[0] for w in weights), weights[0].shape[1])
            q_scale = self.cached.get(name)
            if not fits(q_scale, shape):
                q_scale = self.fresh[name] = quantize_int8(_joined(weights))
            self.int8.append(Int8DynamicLinear(quantized=q_scale, pack=False))
            return self.int8[-1]
        weight = _joined(weights)
        if self.compact and stores_as_fp16(weight):
            self.fp16.append(Fp16CompactLinear(weight, tied=tied, dtype=self.dtype))   # bfloat16 values in 2 bytes
            return self.fp16[-1]
        if tied and _packs_bf16(weight):
            return PackedBf16Linear(weight)      # packs a copy; the embedding still reads ``weight``
        return float_linear(weight, shared=tied)

    def finish(self) -> None:
        pack_int8(self.int8)     # in the background, while the tokenizer and the KV cache load
        pack_all(self.fp16)      # at once: packing beside running torch ops oversubscribes the cores

    @property
    def compact_count(self) -> int:
        """How many projections are kept in 2 bytes."""
        return sum(p.packed is not None for p in self.fp16)

    @staticmethod
    def compact_embedding(head: LinearMethod, dtype: torch.dtype) -> CompactEmbedding | None:
        """The token embedding reading a tied, compacted head's float16 rows, or None."""
        if not isinstance(head, Fp16CompactLinear) or head.values is None:
            return None
        embedding = CompactEmbedding(head.values, head.inverse_scale, dtype)
        head.values = None          # the embedding holds them; the float32 matrix goes
        return embedding


def _packs_bf16(weight: torch.Tensor) -> bool:
    return weight.device.type == "cpu" and weight.dtype == torch.bfloat16 and platform.current().onednn_bf16_packing


def _joined(weights: tuple[torch.Tensor, ...]) -> torch.Tensor:
    return weights[0] if len(weights) == 1 else torch.cat(weights)
