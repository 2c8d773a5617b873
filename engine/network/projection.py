"""Decoder projections: plain ``F.linear``, or oneDNN's GEMMs on CPU.

bfloat16: packing the weight once into oneDNN's blocked layout makes the skinny GEMMs of
decode steps (a few rows against the whole weight) read memory 25-40% faster on x86 CPUs,
with bit-identical results; the plain weight is then dropped, so the packed copy costs no
extra memory. oneDNN builds and keeps a kernel for every row count it sees, with buffers
that grow with the rows: 133 row counts of 1-400 rows on the decoder's four shapes grew the
process by 400 MB (a 20-minute file's prefill chunks, 160 MB). So packed calls run at few
row counts (``packed_rows``): a power of two up to 64 rows, a multiple of 64 up to 256, and
bigger calls in pieces of 256 rows (bfloat16 GEMMs of 64-2048 rows all ran at 860-940
GFLOP/s on an AVX512-BF16 EPYC, 2 threads; zero rows padded in cost at most 63 rows).

float32 on x86 CPUs that are not Intel's: torch's F.linear goes to MKL, which takes generic
code paths there. Measured on an AMD EPYC (AVX2, 2 threads, the 0.6B model's shapes):
one decode row reads memory at 10-12 GB/s through MKL and 15-21 GB/s through oneDNN's own
JIT kernels; 2-16 rows (a few files or VAD chunks decoding together) run 1.5-2.7x faster
(MKL falls to 3-5 GB/s there); the tied LM head, 1 to 4 rows, 1.7-3x; prefill GEMMs
1.0-1.5x. oneDNN takes the plain weight as it is, so nothing is copied and a tied head stays
shared with the embedding. oneDNN keeps a kernel, with its own buffers, per row count it has
seen (0.5-0.7 MB per layer shape, ~10 MB for the LM head; a 20-minute file grew the process by
170 MB), so it runs only calls of at most ``ONEDNN_MAX_ROWS`` rows, padded with zero rows to a
power of two: six row counts per weight. Bigger calls (prefill, where oneDNN gains least) stay
on MKL. It sums in another order than MKL (results agree to float32 rounding, not bit for bit;
MKL itself rounds by row count), so float32 greedy tokens are still checked against
transformers by the parity tests. On Intel CPUs MKL stays, as it was measured there.
"""
from __future__ import annotations

import functools
import platform
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import torch
import torch.nn.functional as F

from engine.network import cpu_bf16


def _onednn_mm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` through oneDNN, for a plain or a ``_reorder_linear_weight``-packed weight."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


@functools.lru_cache(maxsize=1)
def _packing_works() -> bool:
    """oneDNN packing exists on this build and agrees exactly with F.linear."""
    try:
        w = torch.randn(64, 32).to(torch.bfloat16)
        x = torch.randn(3, 32).to(torch.bfloat16)
        return bool(torch.equal(_onednn_mm(x, torch.ops.mkldnn._reorder_linear_weight(w, 16)), F.linear(x, w)))
    except Exception:  # no oneDNN (e.g. some ARM builds), or an API change: stay plain
        return False


def cpuinfo_field(key: str) -> str | None:
    """The first ``key`` line's value in /proc/cpuinfo ("vendor_id", "model name"), or None
    (not Linux, or no such line)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_vendor() -> str:
    """The x86 vendor string ("GenuineIntel", "AuthenticAMD", ...), or "" where unknown."""
    vendor = cpuinfo_field("vendor_id")
    if vendor is not None:
        return vendor
    text = platform.processor()   # not Linux: Windows names the vendor there
    return next((v for v in ("GenuineIntel", "AuthenticAMD", "HygonGenuine") if v in text), "")


# Rows of one packed bfloat16 GEMM call; bigger calls run in pieces of this size.
PACKED_CHUNK_ROWS = 256


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
        return _onednn_mm(x, packed)
    bucket = packed_rows(rows)
    if bucket != rows:
        x = torch.cat([x, x.new_zeros(bucket - rows, x.shape[1])])
    return _onednn_mm(x, packed)[:rows]


# Rows up to which a float32 projection runs on oneDNN (decode steps and small mixed steps).
ONEDNN_MAX_ROWS = 32


def onednn_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` through oneDNN, rows padded to a power of two so that few kernels are built."""
    rows = x.shape[0]                                       # x: [rows, in]
    bucket = 1 << (rows - 1).bit_length()
    if bucket != rows:
        x = torch.cat([x, x.new_zeros(bucket - rows, x.shape[1])])
    return _onednn_mm(x, weight)[:rows]


@functools.lru_cache(maxsize=1)
def onednn_float32() -> bool:
    """float32 projections go through oneDNN here: an x86 CPU that is not Intel's, and the op
    exists and agrees with F.linear to float32 rounding."""
    if platform.machine().lower() not in ("x86_64", "amd64") or cpu_vendor() in ("GenuineIntel", ""):
        return False
    try:
        w, x = torch.randn(96, 64), torch.randn(5, 64)
        return bool(torch.allclose(_onednn_mm(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5))
    except Exception:  # a build without oneDNN, or an API change: MKL's F.linear
        return False


class Projection:
    """``y = x @ W.T`` for one weight [out, in]; callable like a bias-free nn.Linear."""

    def __init__(self, weight: torch.Tensor):
        self.weight: torch.Tensor | None = weight
        self.packed: torch.Tensor | None = None
        self.out_features = weight.shape[0]
        self.onednn = weight.device.type == "cpu" and weight.dtype == torch.float32 and onednn_float32()

    @classmethod
    def for_device(cls, weight: torch.Tensor) -> "Projection":
        proj = cls(weight)
        if weight.device.type == "cpu" and weight.dtype == torch.bfloat16 and _packing_works():
            proj.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 16)
            proj.weight = None
        return proj

    def __call__(self, x: torch.Tensor) -> torch.Tensor:       # x: [tokens, in] -> [tokens, out]
        if self.packed is not None:
            return packed_linear(x, self.packed)
        if self.onednn and 0 < x.shape[0] <= ONEDNN_MAX_ROWS and x.dim() == 2:
            return onednn_linear(x, self.weight)
        return cpu_bf16.linear(x, self.weight)   # F.linear, but emulated-bf16 GEMMs of many rows in float32


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


@functools.lru_cache(maxsize=1)
def _dynamic_int8_works() -> bool:
    """torch's quantized dynamic linear (fbgemm/oneDNN int8 GEMM) exists and runs here."""
    try:
        q, scale = quantize_int8(torch.randn(64, 32))
        packed = _prepack_int8(q, scale)
        return torch.ops.quantized.linear_dynamic(torch.randn(3, 32), packed, True).shape == (3, 64)
    except Exception:  # a build without a quantized engine, or an API change: dequantize instead
        return False


def _per_channel_tensor(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The quantized tensor linear_prepack takes. Never call it from a packing thread: the
    warning filter below is process-wide while it is set, so set from a thread that outlives
    the load it would hide (and on exit could reset) the caller's warnings."""
    import warnings

    with warnings.catch_warnings():   # quantized tensors are deprecated as a user type; the op is not
        warnings.simplefilter("ignore", UserWarning)
        return torch._make_per_channel_quantized_tensor(q, scale.double(), torch.zeros_like(scale, dtype=torch.long), 0)


def _prepack_int8(q: torch.Tensor, scale: torch.Tensor):
    return torch.ops.quantized.linear_prepack(_per_channel_tensor(q, scale), None)


class Int8Projection:
    """``y ~ x @ W.T`` with W stored as int8 and a float32 scale per output channel.

    On x86 it runs torch's dynamic int8 linear (fbgemm): the activations are quantized too,
    per tensor to 7-bit unsigned (no saturation on AVX2), accumulated in int32, and the
    result scaled back. Measured on an AVX2 EPYC (2 threads) it beats float32 at every
    shape the decoder runs: decode rows read a quarter of the bytes, prefill GEMMs
    (1500 rows) run ~1.6-2.7x faster. ``_weight_int8pack_mm`` (weight-only) was 5-40x
    slower there with float32 activations and slower than fbgemm with bfloat16 ones.
    Where the dynamic op is missing, the weight is dequantized per call (slow but exact
    to the int8 weights). Not token-exact: a mode the user picks for speed.
    """

    def __init__(self, weight: torch.Tensor | None = None, *,
                 quantized: tuple[torch.Tensor, torch.Tensor] | None = None, pack: bool = True):
        """From a float ``weight``, or from its ``quantize_int8`` result (the on-disk cache).
        ``pack=False`` leaves packing to a later ``pack()`` (``pack_int8`` packs many at once)."""
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

    def __call__(self, x: torch.Tensor) -> torch.Tensor:       # x: [tokens, in] -> [tokens, out]
        if self.packing is not None:     # the first call after a load waits for the background packing
            packing, self.packing = self.packing, None
            try:
                packing.result()
            except Exception as e:       # q is kept until packing succeeds: dequantize per call instead
                import warnings

                warnings.warn(f"int8 weight packing failed ({e}); using the slower unpacked path", stacklevel=2)
                self.packed = None
        if self.packed is not None:
            y = torch.ops.quantized.linear_dynamic(x.float(), self.packed, True)
        else:
            y = F.linear(x.float(), self.q.float()) * self.scale
        return y.to(x.dtype)


def pack_int8(projections: list[Int8Projection]) -> None:
    """Pack many int8 projections on a pool of threads (fbgemm packs one matrix on one core),
    in the background.

    Packing is most of a cached int8 load: 5.8 s of the 0.6B model's 12.6 s on 2 AVX2 cores,
    5.2 s of it the LM head alone. This returns at once and lets the rest of the load (the
    tokenizer, the KV cache) run meanwhile; each projection's first call waits for its own
    packing. The largest go first, so the head does not finish last."""
    if not projections or not _dynamic_int8_works():
        return
    pool = ThreadPoolExecutor(max(1, torch.get_num_threads()), thread_name_prefix="int8-pack")
    for proj in sorted(projections, key=lambda p: -p.q.numel()):
        proj.packing = pool.submit(proj.pack, _per_channel_tensor(proj.q, proj.scale))
    pool.shutdown(wait=False)    # the queued packs still run
