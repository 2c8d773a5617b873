"""The numba body of ``bf16_gemv`` (imported only through it: numba is optional)."""
from __future__ import annotations

import numpy as np
from numba import carray, types

from asr_kernels._bf16_decode_row_jit import as_float, call_int, kernel, ptr

# The int64 fields of gemv_team's data, in order (bf16_gemv.row_gemv fills them).
FIELDS = ("thread_num", "team_size", "x", "w", "out", "n", "k", "shares")
_N_FIELDS = len(FIELDS)
BLOCK = 32                      # outputs per block of oneDNN's packed layout (checked at load)
_HIGH, _S16 = np.uint32(0xFFFF0000), np.uint32(16)


def gemv_team(data):
    """out = x @ W.T for one row x [k] over W packed as [n / 32][k / 2][32][2] (oneDNN's blocked
    bfloat16 layout: 32 outputs side by side, k in pairs), as a team's body (team_run.run_compiled;
    thread_num 0 means no team: one share on the calling thread). Each share takes whole blocks;
    each output sums its pairs in k order in float32 (even k, then odd), then rounds to nearest even.
    A product of two bfloat16 values is exact in float32, so fusing it into the add changes nothing;
    the sum is not reassociated (``fastmath`` is only ``contract``), so ``gemv_reference`` is its twin."""
    thread_num, team_size, x_at, w_at, out_at, n, k, shares = carray(data, (_N_FIELDS,), np.int64)
    half = k // 2
    x_pairs = carray(ptr(x_at), (half,), np.uint32)
    x_even, x_odd = np.empty(half, np.float32), np.empty(half, np.float32)
    for i in range(half):
        x_even[i] = as_float(x_pairs[i] << _S16)
        x_odd[i] = as_float(x_pairs[i] & _HIGH)
    out = carray(ptr(out_at), (n,), np.uint16)
    acc = np.empty(BLOCK, np.float32)
    acc_bits = acc.view(np.uint32)
    blocks = n // BLOCK
    per_share = (blocks + shares - 1) // shares
    first, stride = (call_int(thread_num), call_int(team_size)) if thread_num != 0 else (0, 1)
    for share in range(first, shares, stride):
        for b in range(share * per_share, min(blocks, share * per_share + per_share)):
            w = carray(ptr(w_at + b * BLOCK * k * 2), (half, BLOCK), np.uint32)   # [pairs, 32 outputs]
            for j in range(BLOCK):
                acc[j] = np.float32(0.0)
            for i in range(half):
                a, c, pair = x_even[i], x_odd[i], w[i]
                for j in range(BLOCK):
                    v = pair[j]
                    acc[j] = acc[j] + a * as_float(v << _S16) + c * as_float(v & _HIGH)
            for j in range(BLOCK):       # to bfloat16, nearest even; NaN stays NaN
                v = acc_bits[j]
                if (v & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
                    out[b * BLOCK + j] = np.uint16((v >> _S16) | np.uint32(0x40))
                else:
                    out[b * BLOCK + j] = np.uint16((v + np.uint32(0x7FFF) + ((v >> _S16) & np.uint32(1))) >> _S16)


gemv_team = kernel(gemv_team, c_signature=types.void(types.voidptr), fastmath={"contract"})
