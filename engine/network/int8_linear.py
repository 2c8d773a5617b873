"""int8 quantization: decoder projections and the LM head stored as int8 codes with a float32
scale per output channel, as ``Int8DynamicLinear`` methods. A setting the user picks for speed
on CPU (``quantize="int8"``); not token-exact.

On x86 it runs torch's dynamic int8 linear (fbgemm): the activations are quantized too, per
tensor to 7-bit unsigned (no saturation on AVX2), accumulated in int32 and scaled back; decode
rows read a quarter of float32's bytes. Where the op is missing (``platform.fbgemm_int8``), the
weight is dequantized per call: slow but exact to the int8 weights. Figures:
tests/bench/RESULTS.md.
"""
from __future__ import annotations

import warnings
from concurrent.futures import Future, ThreadPoolExecutor

import torch
import torch.nn.functional as F

from engine.network import platform
from engine.network.linear_methods import LinearMethod

QUANTIZE_MODES = ("int8",)


def check_quantize(quantize, device: torch.device) -> str | None:
    """Validate a ``quantize`` option: None (exact weights) or "int8" (CPU only)."""
    if quantize is None:
        return None
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"unknown quantize mode {quantize!r}; use None or 'int8'")
    if torch.device(device).type != "cpu":
        raise ValueError("quantize='int8' is a CPU mode (int8 GEMMs of fbgemm/oneDNN); on CUDA use "
                         "bfloat16 without quantize")
    return quantize


def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: (q [out, in] int8, scale [out] float32), W ~ q * scale."""
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)
    return torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8), scale


def _dynamic_int8_works() -> bool:
    return platform.current().fbgemm_int8


def _per_channel_tensor(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The quantized tensor linear_prepack takes. Never call it from a packing thread: the
    warning filter below is process-wide while it is set, so set from a thread that outlives
    the load it would hide (and on exit could reset) the caller's warnings."""
    with warnings.catch_warnings():   # quantized tensors are deprecated as a user type; the op is not
        warnings.simplefilter("ignore", UserWarning)
        return torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)


class Int8DynamicLinear(LinearMethod):
    """``y ~ x @ W.T`` with W as int8 codes and a float32 scale per output channel."""

    def __init__(self, weight: torch.Tensor | None = None, *,
                 quantized: tuple[torch.Tensor, torch.Tensor] | None = None, pack: bool = True):
        """From a float ``weight``, or from its ``quantize_int8`` result (the on-disk cache).
        ``pack=False`` leaves packing to a later ``pack()`` (``pack_int8`` packs many at once)."""
        super().__init__()
        self.q, self.scale = quantized if quantized is not None else quantize_int8(weight)
        self.out_features = self.q.shape[0]
        self.packed = None
        self.packing: Future | None = None     # set while pack_int8 packs it in the background
        if pack:
            self.pack()

    def pack(self, quantized_tensor: torch.Tensor | None = None) -> None:
        """Hand the weights to fbgemm's packed layout, where the dynamic op exists (from
        ``_per_channel_tensor``'s result when given: pack_int8 makes those on the loading thread)."""
        if self.packed is None and _dynamic_int8_works():
            if quantized_tensor is None:
                quantized_tensor = _per_channel_tensor(self.q, self.scale)
            self.packed = torch.ops.quantized.linear_prepack(quantized_tensor, None)
            self.q = None     # the packed copy holds the weights

    def tensors(self) -> list[torch.Tensor]:
        """None to place: the steps read fbgemm's packed copy, which torch keeps opaque, and the
        codes are dropped once it is made."""
        return []

    def forward(self, x: torch.Tensor) -> torch.Tensor:       # x: [tokens, in] -> [tokens, out]
        if self.packing is not None:     # the first call after a load waits for the background packing
            packing, self.packing = self.packing, None
            try:
                packing.result()
            except Exception as e:       # q is kept until packing succeeds: dequantize per call instead
                warnings.warn(f"int8 weight packing failed ({e}); using the slower unpacked path", stacklevel=2)
                self.packed = None
        if self.packed is not None:
            y = torch.ops.quantized.linear_dynamic(x.float(), self.packed, True)
        else:
            y = F.linear(x.float(), self.q.float()) * self.scale
        return y.to(x.dtype)


def pack_int8(methods: list[Int8DynamicLinear]) -> None:
    """Pack many int8 methods on a pool of threads (fbgemm packs one matrix on one core), in the
    background: packing is most of a cached int8 load, so the rest of the load (the tokenizer,
    the KV cache) runs meanwhile, and each method's first call waits for its own packing. The
    largest go first, so the LM head does not finish last."""
    if not methods or not _dynamic_int8_works():
        return
    pool = ThreadPoolExecutor(max(1, torch.get_num_threads()), thread_name_prefix="int8-pack")
    for method in sorted(methods, key=lambda m: -m.q.numel()):
        method.packing = pool.submit(method.pack, _per_channel_tensor(method.q, method.scale))
    pool.shutdown(wait=False)    # the queued packs still run


__all__ = ["QUANTIZE_MODES", "check_quantize", "quantize_int8", "Int8DynamicLinear", "pack_int8"]
