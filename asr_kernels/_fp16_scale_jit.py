"""The numba body of ``fp16_scale`` (imported only through it: numba is optional).

One pass over a bfloat16 weight's bits per row: its largest magnitude (for finite bfloat16 the
15 low bits order like the values), the power of two that puts it in [2^14, 2^15), the scaled
float32 values and the check that each is exactly a float16.
"""
from __future__ import annotations

import math

import numpy as np

from asr_kernels._bf16_decode_row_jit import as_float, kernel

_MAGNITUDE, _EXPONENT = np.uint16(0x7FFF), np.uint16(0x7F80)
_S16, _S7 = np.uint32(16), np.uint16(7)
_FLOAT16_STEPS = np.float32(2.0 ** 24)    # float16's least subnormal is 2^-24: exact values are its multiples


def scale_rows(bits, scaled, inverse, top_exponent, first, last):
    """Rows ``first`` to ``last`` of ``bits`` [n, k] (bfloat16 bits as uint16): row r times 2^e_r into
    ``scaled`` [n, k] float32 and 2^-e_r into ``inverse`` [n], e_r = ``top_exponent`` - floor(log2 of the
    row's largest magnitude) (0 for a row of zeros). False at the first row holding a value that is not
    finite, a row whose 2^e_r is not a float32 (its largest is below 2^(top_exponent - 127)), or a scaled
    value that is not exactly a float16."""
    k = bits.shape[1]
    for r in range(first, last):
        row, out = bits[r], scaled[r]
        top = np.uint16(0)
        for i in range(k):                         # loops without an early exit: LLVM vectorizes them
            m = row[i] & _MAGNITUDE
            top = m if m > top else top
        if top >= _EXPONENT:                       # inf or nan
            return False
        e = 0 if top == 0 else top_exponent - (np.int64(top >> _S7) - 127)
        if e > 127:                                # 2^e overflows float32, as torch.exp2 would (a
            return False                           # subnormal largest, exponent field 0, lands here too)
        factor = np.float32(math.ldexp(1.0, e))
        inverse[r] = np.float32(math.ldexp(1.0, -e))
        # whether any t is not whole, or-ed (a sum of t - floor(t) would do, but for rounding)
        broken = np.int32(0)
        for i in range(k):
            x = as_float(np.uint32(row[i]) << _S16) * factor      # float32 times a power of two
            t = x * _FLOAT16_STEPS
            broken |= np.int32(t != np.floor(t))
            out[i] = x
        if broken:
            return False
    return True


scale_rows = kernel(scale_rows, fastmath=False)   # reassociating x * 2^e * 2^24 could overflow the check to inf
