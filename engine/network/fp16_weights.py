"""Decoder projections whose weights came from a bfloat16 checkpoint, kept in half the bytes of
float32 with the same values, on CPUs without native bfloat16.

Qwen3-ASR checkpoints ship in bfloat16, and CPUs without bfloat16 hardware run them in float32
(``resolve_dtype``). Each weight then takes 4 bytes to hold a value that 2 bytes held, and a
decode step on a CPU is bound by reading the weights. fbgemm's fp16 GEMM
(``torch.ops.quantized.linear_dynamic_fp16``) reads float16 weights and computes in float32:
the activations stay float32, the products and sums are float32. A bfloat16 value has 8
significant bits and a float16 11, so once a row is multiplied by a power of two (which
changes no mantissa bit) to sit at the top of float16's range, each of its bfloat16 values
is exactly a float16 down to 2^-31 of the row's largest. Every weight is checked: a
projection with a single value that does not come back exactly keeps its float path. The
weights are the same numbers and the math is float32; only the summation order differs, as
between any two float32 GEMMs (this one agrees with float64 to a few 1e-6 of the output's
scale, where MKL gives about 1e-6), so float32 greedy tokens are still checked against
transformers.

Measured on an AMD EPYC (AVX2, 2 threads), the 0.6B model's shapes, against the best float32
route (``projection.Projection``): one decode row 1.6-1.9x, 2-16 rows 1.7-4x, 64 rows
1.4-2.6x, prefill of 256-1024 rows 1.2-2.0x except the down projection (0.87-0.95x at 256+
rows). Bfloat16 weights on the same CPU (emulated bfloat16) gain more: torch's bfloat16 GEMV
reads 7-14 GB/s for one row and 1-4 GB/s for 4-16 rows.

Checking and packing cost load time: fbgemm packs a matrix reading it transposed, 7-20 ns a
value for the decoder's shapes (``PACK_ROWS``), so the 0.6B decoder and its LM head take
8.6-10.4 s on 2 AVX2 cores (``pack_all``; a load of 17.3 s against 7.3-7.8 s without).
``engine.load(compact_weights=False)`` skips it; the CLI does for short inputs.

A tied LM head is compacted too, and the token embedding then looks its rows up
in the same float16 values (``CompactEmbedding``): the pair takes the memory the float32
matrix took, and a decode step reads 311 MB for the head instead of 622 MB.
"""
from __future__ import annotations

import functools
import platform
import warnings
from concurrent.futures import ThreadPoolExecutor

import torch

from engine.network import cpu_bf16
from engine.network.projection import Projection

# Rows packed as one fbgemm matrix. fbgemm packs reading the weight transposed, one value of each
# row in turn, so the rows being read must stay in a core's cache: the 151936-row LM head packed
# in one piece took 11.1 s on one AVX2 core, in 8192-row slices 2.4 s. Each slice is one more
# GEMM call per step (the head's one decode row: 19.4 -> 21.1 ms); the 0.6B's decoder
# projections (at most 6144 rows) are smaller than a slice and stay one matrix.
PACK_ROWS = 8192
# A row's largest value is scaled into [2^14, 2^15), below float16's largest (65504). float16
# keeps a bfloat16's 8 significant bits down to 2^-17 (its least subnormal, 2^-24, times 2^7),
# so the row's values are exact down to 2^-31 of its largest.
_TOP_EXPONENT = 14


def scale_exactly(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(``weight`` [out, in] times a power of two per row, as float32 whose every value is
    exactly a float16; the inverse scale [out]), or None where some value is not."""
    w = weight.detach().float()
    if w.shape[0] > 8 and scale_exactly(w[:8]) is None:    # a float32 checkpoint fails at once
        return None
    low, high = torch.aminmax(w, dim=1)
    amax = torch.maximum(high, -low)
    exponent = torch.where(amax > 0, _TOP_EXPONENT - torch.floor(torch.log2(amax)), torch.zeros_like(amax))
    scaled = w * torch.exp2(exponent)[:, None]
    for rows in scaled.split(256):     # in slices: small temporaries, reused rather than page-faulted
        if not bool((rows.half() == rows).all()):    # compared in float32; false for inf and nan too
            return None
    return scaled, torch.exp2(-exponent)


@functools.lru_cache(maxsize=1)
def fp16_gemm_works() -> bool:
    """fbgemm's fp16 GEMM exists here (x86) and keeps weights exactly, float16 subnormals included."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        if "fbgemm" not in torch.backends.quantized.supported_engines:
            return False
        w = torch.randn(48, 64).bfloat16().float()
        w[0, 0], w[1, 1] = 2.0 ** -30, 0.0      # a float16 subnormal once scaled, and a zero
        scaled, inverse = scale_exactly(w)
        packed = torch.ops.quantized.linear_prepack_fp16(scaled, None)
        if not torch.equal(torch.ops.quantized.linear_unpack_fp16(packed)[0], scaled):
            return False
        x = torch.randn(5, 64)
        y = torch.ops.quantized.linear_dynamic_fp16(x, packed) * inverse
        return bool(torch.allclose(y, x @ w.T, rtol=1e-5, atol=1e-6))
    except Exception:   # a build without fbgemm, or an API change: the float path
        return False


def stores_as_fp16(weight: torch.Tensor) -> bool:
    """Whether a decoder weight of this kind goes through ``Fp16Projection``: float32 or
    bfloat16 on a CPU without native bfloat16 (where float32 is the default dtype and bfloat16
    is emulated), with fbgemm's fp16 GEMM. Where bfloat16 is native, its own GEMMs are faster."""
    return (weight.device.type == "cpu" and weight.dtype in (torch.float32, torch.bfloat16)
            and not cpu_bf16.cpu_has_native_bf16() and fp16_gemm_works())


class Fp16Projection:
    """``y = x @ W.T`` with W held as float16 times a power of two per row (exactly the
    checkpoint's values, see the module docstring) and float32 math; callable like
    ``Projection``, which it stays for a weight that is not exact in float16."""

    def __init__(self, weight: torch.Tensor, tied: bool = False):
        # tied: the LM head that shares the embedding's matrix. Its float path must stay the
        # plain shared weight (no packed copy), and packing keeps the scaled float16 values
        # for the embedding to look rows up in (``CompactEmbedding``). The plain weight stays
        # until packing has failed (``keep_float``): for_device may hand a bfloat16 weight to
        # oneDNN and drop it, and the check needs it.
        self.fallback: Projection | None = Projection(weight)
        self.tied = tied
        self.out_features = weight.shape[0]
        self.packed = None
        self.inverse_scale: torch.Tensor | None = None    # [out] float32
        self.values: torch.Tensor | None = None           # [out, in] float16, a tied head's only

    def pack(self, scaled: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
        """Hand the weight to fbgemm (``scaled``: ``scale_exactly``'s result, when already
        taken); keep the float path where it is not exact in float16."""
        if scaled is None:
            scaled = scale_exactly(self.fallback.weight)
        if scaled is None:
            self.keep_float()
        else:
            self.adopt([pack_rows(rows) for rows in scaled[0].split(PACK_ROWS)], scaled)

    @property
    def weight(self) -> torch.Tensor | None:
        """The plain weight this projection still reads (as ``Projection.weight``), or None."""
        return self.fallback.weight if self.fallback is not None else None

    def keep_float(self) -> None:
        """Not packed: the float path, in the layout ``Projection.for_device`` picks (a tied head
        keeps the embedding's own weight)."""
        if not self.tied and self.packed is None:
            self.fallback = Projection.for_device(self.fallback.weight)

    def adopt(self, slices: list, scaled: tuple[torch.Tensor, torch.Tensor]) -> None:
        """Take the packed slices of ``scaled`` (``PACK_ROWS`` rows each, in order)."""
        values = scaled[0].half() if self.tied else None      # before any field changes
        self.packed, self.inverse_scale, self.values = slices, scaled[1], values
        self.fallback = None       # the packed copy holds the weights: half the bytes

    def __call__(self, x: torch.Tensor) -> torch.Tensor:       # x: [tokens, in] -> [tokens, out]
        if self.packed is None:
            return self.fallback(x)
        x32 = x.float().contiguous()
        if len(self.packed) == 1:
            y = torch.ops.quantized.linear_dynamic_fp16(x32, self.packed[0])                 # float32
        else:
            y = torch.cat([torch.ops.quantized.linear_dynamic_fp16(x32, p) for p in self.packed], dim=-1)
        return y.mul_(self.inverse_scale).to(x.dtype)


class CompactEmbedding(torch.nn.Module):
    """The token embedding of a tied, compacted LM head: the rows the head's fp16 pack was made
    from, float16 times a power of two per row, looked up and scaled back exactly.

    A tied head used to stay float32 (a packed copy beside the float32 embedding would add
    a third of the model's size): 622 MB read at every decode step of the 0.6B, two fifths of
    its bytes. With the embedding in float16 too, the pair takes the same memory as the float32
    matrix alone and a decode step reads half as much for the head."""

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


def pack_all(projections: list[Fp16Projection]) -> None:
    """Check every weight on this thread and pack the exact ones on a pool of threads, a few at
    a time: fbgemm packs one slice on one core (7-20 ns a value, ``PACK_ROWS``), so the pool
    packs as many slices at once as there are threads, with this thread waiting meanwhile.

    Checking and packing never overlap: the check's torch ops start their own team of threads,
    and beside busy packing threads every team's barrier waits on a thread that has no core
    (measured on the 0.6B: the checks took 8.3 s beside packing, 3.3 s alone). A failed pack
    warns and keeps the float path."""
    workers = max(1, torch.get_num_threads())
    with ThreadPoolExecutor(workers, thread_name_prefix="fp16-pack") as pool:
        for start in range(0, len(projections), workers):
            batch = [(p, scale_exactly(p.fallback.weight)) for p in projections[start:start + workers]]
            jobs = [(p, scaled, [pool.submit(pack_rows, rows) for rows in scaled[0].split(PACK_ROWS)])
                    for p, scaled in batch if scaled is not None]
            for proj, scaled in batch:
                if scaled is None:
                    proj.keep_float()
            for proj, scaled, slices in jobs:
                try:
                    proj.adopt([job.result() for job in slices], scaled)
                except Exception as e:     # the float weight is kept until packing succeeds
                    warnings.warn(f"fp16 weight packing failed ({e}); using the float32 path", stacklevel=2)
                    proj.keep_float()
