"""What this machine offers the network, detected once, and the rules that pick a path from it.

Every hardware choice the network makes reads ``current()`` and one rule below; nothing else in
the project looks at the CPU vendor or probes torch's kernels. The rules, in one table:

| choice                                | rule                                              | why |
|---------------------------------------|---------------------------------------------------|-----|
| default dtype                         | bfloat16 on CUDA and where ``native_bf16``, else float32 | emulated bfloat16 GEMMs of many rows are several times slower than float32 |
| emulated bfloat16 (``emulates_bf16``) | many-row GEMMs, convolutions, attention in float32 | torch's emulated bfloat16 kernels are slow there; results round once to bfloat16 |
| bfloat16 decoder projections          | oneDNN-packed where ``onednn_bf16_packing``       | skinny decode GEMMs read the packed layout faster, bit-identical |
| float32 projections of few rows       | oneDNN where ``onednn_f32_small_rows``            | MKL takes generic code paths on x86 CPUs that are not Intel's |
| compact weights (bfloat16 values in 2 bytes) | float32 on CPU without ``native_bf16``, where ``fbgemm_fp16`` | a decode step reads half the bytes, same values, float32 math |
| one-row compact projections           | ``bf16_gemv`` on a second copy of the compact weights, where ``available_memory_bytes`` leaves ``ROW_COPY_HEADROOM`` | fbgemm's one-row call costs several torch calls around it; same values, float32 math |
| the LM head's int8 copy (one row's greedy token, ``int8_argmax``) | heads with a one-row kernel (``bf16_gemv``), with compact weights | a one-row step reads a quarter fewer bytes, same tokens |
| ... from the CLI                      | when its inputs hold ``COMPACT_MIN_AUDIO_SECONDS`` of audio (the app always) | checking and packing cost load time that short inputs do not repay |
| int8 quantization                     | fbgemm's dynamic int8 linear where ``fbgemm_int8``, else dequantize per call | |

The probes are load-time checks that an op exists and agrees with ``F.linear`` on this build,
since a torch build without oneDNN or fbgemm (some ARM wheels) must still run.
"""
from __future__ import annotations

import functools
import platform as _os_platform
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

# Audio (seconds) from which compacting the weights at load repays its cost in a one-shot run
# (break-even measured on 2 AVX2 cores: tests/bench/RESULTS.md, "Compact weights").
COMPACT_MIN_AUDIO_SECONDS = 15.0
# Memory left free after the one-row copies of compact weights (fp16_weights), for the KV cache and
# the app; with less, one-row steps keep fbgemm's copy alone.
ROW_COPY_HEADROOM = 2 << 30


def available_memory_bytes() -> int | None:
    """Memory the system can give without swapping (Linux MemAvailable, else psutil), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


@dataclass(frozen=True)
class Platform:
    """The CPU (and torch build) the network runs on.

    Attributes:
        cpu_model: the CPU's model name ("AMD EPYC", "Intel(R) Xeon(R) ...").
        vendor: the x86 vendor string ("GenuineIntel", "AuthenticAMD"), or "" where unknown.
        x86: an x86-64 machine.
        amx: AMX tiles (Intel Sapphire Rapids and later): native bfloat16.
        avx512_bf16: AVX512-BF16 instructions: native bfloat16.
        onednn_bf16_packing: oneDNN's packed bfloat16 linear exists and is bit-identical to F.linear.
        onednn_f32_small_rows: float32 projections of a few rows go through oneDNN (see the table).
        fbgemm_int8: torch's dynamic int8 linear runs here.
        fbgemm_fp16: torch's fp16-weight linear (float32 math) runs here.
    """

    cpu_model: str
    vendor: str
    x86: bool
    amx: bool
    avx512_bf16: bool
    onednn_bf16_packing: bool
    onednn_f32_small_rows: bool
    fbgemm_int8: bool
    fbgemm_fp16: bool

    @property
    def native_bf16(self) -> bool:
        """The CPU computes bfloat16 in hardware (AVX512-BF16 or AMX)."""
        return self.amx or self.avx512_bf16

    def default_dtype(self, device: torch.device) -> torch.dtype:
        """The dtype ``dtype=None`` picks (first row of the table)."""
        return torch.bfloat16 if device.type == "cuda" or self.native_bf16 else torch.float32

    def compact_weights_pay(self, dtype: torch.dtype) -> bool:
        """Whether bfloat16-valued weights of a ``dtype`` model are kept in 2 bytes (compact)."""
        return dtype == torch.float32 and not self.native_bf16 and self.fbgemm_fp16

    def describe(self) -> str:
        """One line for status bars, the CLI's first line and benchmark headers."""
        yes = {True: "yes", False: "no"}
        return f"{self.cpu_model} (AMX {yes[self.amx]}, AVX512-BF16 {yes[self.avx512_bf16]})"


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


def _vendor() -> str:
    vendor = cpuinfo_field("vendor_id")
    if vendor is not None:
        return vendor
    text = _os_platform.processor()   # not Linux: Windows names the vendor there
    return next((v for v in ("GenuineIntel", "AuthenticAMD", "HygonGenuine") if v in text), "")


def _torch_cpu_check(name: str) -> bool:
    fn = getattr(getattr(torch, "cpu", None), name, None)
    try:
        return bool(fn()) if fn is not None else False
    except RuntimeError:
        return False


def onednn_mm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight.T`` through oneDNN, for a plain or a ``_reorder_linear_weight``-packed weight."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


def _probe_bf16_packing() -> bool:
    try:
        gen = torch.Generator().manual_seed(0)   # probes never draw from (or depend on) the global RNG
        w = torch.randn(64, 32, generator=gen).to(torch.bfloat16)
        x = torch.randn(3, 32, generator=gen).to(torch.bfloat16)
        return bool(torch.equal(onednn_mm(x, torch.ops.mkldnn._reorder_linear_weight(w, 16)), F.linear(x, w)))
    except Exception:  # no oneDNN (e.g. some ARM builds), or an API change: stay plain
        return False


def _probe_onednn_f32() -> bool:
    try:
        gen = torch.Generator().manual_seed(0)
        w, x = torch.randn(96, 64, generator=gen), torch.randn(5, 64, generator=gen)
        return bool(torch.allclose(onednn_mm(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5))
    except Exception:  # a build without oneDNN, or an API change: MKL's F.linear
        return False


def _probe_fbgemm_int8() -> bool:
    import warnings

    try:
        w = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))
        scale = (w.abs().amax(dim=1) / 127).double()
        q = torch.round(w / scale[:, None].float()).to(torch.int8)
        with warnings.catch_warnings():   # quantized tensors are deprecated as a user type; the op is not
            warnings.simplefilter("ignore", UserWarning)
            qt = torch._make_per_channel_quantized_tensor(q, scale, torch.zeros(64, dtype=torch.long), 0)
        packed = torch.ops.quantized.linear_prepack(qt, None)
        return torch.ops.quantized.linear_dynamic(torch.ones(3, 32), packed, True).shape == (3, 64)
    except Exception:  # a build without a quantized engine, or an API change: dequantize instead
        return False


def _probe_fbgemm_fp16() -> bool:
    """fbgemm's fp16 GEMM exists (x86) and keeps float16 values exactly, subnormals included."""
    try:
        if "fbgemm" not in torch.backends.quantized.supported_engines:
            return False
        # Small integers and a lone subnormal, from a fixed generator: every product and partial sum
        # is exact in float32, so any summation order gives the same bits and the check is exact
        # (random data against a tolerance could fail by chance, and ``current()`` caches the answer).
        gen = torch.Generator().manual_seed(0)
        w = torch.randint(-8, 9, (48, 64), generator=gen).float()
        w[0] = 0.0
        w[0, 0], w[1, 1] = 2.0 ** -20, 0.0      # a float16 subnormal, and a zero
        packed = torch.ops.quantized.linear_prepack_fp16(w, None)
        if not torch.equal(torch.ops.quantized.linear_unpack_fp16(packed)[0], w):
            return False
        x = torch.randint(-8, 9, (5, 64), generator=gen).float()
        x[:, 0] = 1.0
        return bool(torch.equal(torch.ops.quantized.linear_dynamic_fp16(x, packed), x @ w.T))
    except Exception:   # a build without fbgemm, or an API change: the float path
        return False


def detect() -> Platform:
    """Look at this machine (no caching; ``current()`` caches)."""
    model = cpuinfo_field("model name") or _os_platform.processor() or "unknown CPU"
    vendor = _vendor()
    x86 = _os_platform.machine().lower() in ("x86_64", "amd64")
    # ATEN_CPU_CAPABILITY=avx2 keeps torch's kernels off AVX-512; bfloat16 is then not native to
    # them, so the AVX2-only rules apply (benchmarks take an AVX2 laptop's paths this way).
    avx512 = torch.backends.cpu.get_cpu_capability().startswith("AVX512")
    return Platform(
        cpu_model=model, vendor=vendor, x86=x86,
        amx=avx512 and _torch_cpu_check("_is_amx_tile_supported"),
        avx512_bf16=avx512 and _torch_cpu_check("_is_avx512_bf16_supported"),
        onednn_bf16_packing=_probe_bf16_packing(),
        # Intel CPUs keep MKL, which has fast paths for them; so does an unknown vendor.
        onednn_f32_small_rows=x86 and vendor not in ("GenuineIntel", "") and _probe_onednn_f32(),
        fbgemm_int8=_probe_fbgemm_int8(),
        fbgemm_fp16=x86 and _probe_fbgemm_fp16(),
    )


@functools.lru_cache(maxsize=1)
def current() -> Platform:
    """This process's platform, detected at the first call. Every rule reads it through this
    function, so a test can replace it to take another CPU kind's path (tests/platforms.py)."""
    return detect()


__all__ = ["Platform", "current", "detect", "cpuinfo_field", "onednn_mm"]
