"""Round float32 values to the activation dtype exactly as torch does, inside a kernel.

The fused kernels compute in float32 but must reproduce eager torch, which rounds to
the activation dtype after every elementwise op. Each rounding point therefore calls
``round_to(x, DTYPE)``: it returns float32 values that lie on DTYPE's grid, so the
next op starts from exactly the number torch would have stored, and the final store's
cast is exact.

bfloat16 is rounded by hand (round-to-nearest-even on the bit pattern) rather than
with ``x.to(tl.bfloat16)``: on CUDA both give the same bits, but Triton's CPU
interpreter (TRITON_INTERPRET=1, used by the tests) truncates float32 -> bfloat16,
which would make the tested code differ from what runs on the GPU by up to one ulp per
op. The integer trick costs a few ALU ops in memory-bound kernels. float16 goes
through ``.to`` because both back ends round it to nearest even already.
"""
from __future__ import annotations

try:
    import triton
    import triton.language as tl
except Exception:  # no triton on this platform: the kernels are never defined
    triton = None
    tl = None

__all__ = ["round_to"]

if triton is not None:

    @triton.jit
    def round_to(x, DTYPE: tl.constexpr):
        """x: float32 tensor -> float32 tensor of x rounded to DTYPE (nearest, ties even)."""
        if DTYPE == tl.bfloat16:
            bits = x.to(tl.uint32, bitcast=True)
            # Add just under half an ulp of bfloat16, plus one more when the kept LSB is
            # odd (ties to even), then drop the 16 low mantissa bits. NaN payloads that
            # live only in the dropped bits are not preserved; activations carry none.
            bits = (bits + (0x7FFF + ((bits >> 16) & 1))) & 0xFFFF0000
            return bits.to(tl.float32, bitcast=True)
        elif DTYPE == tl.float16:
            return x.to(tl.float16).to(tl.float32)
        else:
            return x
else:
    # Callers import the name unconditionally; it is only used inside Triton kernels,
    # which are not defined without triton either.
    round_to = None
