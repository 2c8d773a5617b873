"""The numba body of ``int8_argmax`` (imported only through it: numba is optional).

One row x (float32) against int8 rows, 64 outputs at a time: the weights are stored as
[n / 64][k][64] int8, so each k reads one cache line, widened to float32 and multiplied by a
broadcast x[k] into four 16-float registers of sums (LLVM IR, as ``_bf16_gemv_jit``: numba would
keep an array accumulator in memory). The sums are approximations with a proven bound
(``int8_argmax``), so their order and fused multiply-adds are free.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.extending import intrinsic

from asr_kernels._bf16_decode_row_jit import as_float, call_int, emit_prefetch, emit_sum_loop, kernel

# The int64 fields of approx_team's data, in order (int8_argmax.ArgmaxScreen fills them).
FIELDS = ("thread_num", "team_size", "x", "q", "scale", "out", "n", "k", "shares")
_N_FIELDS = len(FIELDS)
BLOCK = 64                      # outputs side by side: one cache line of int8 per k
PREFETCH_BYTES = 1024           # how far ahead of the line being read its stream is prefetched
_S16, _EXPONENT = np.uint32(16), np.uint16(0x7F80)

_F32, _I64 = ir.FloatType(), ir.IntType(64)
_V16F, _V16B = ir.VectorType(_F32, 16), ir.VectorType(ir.IntType(8), 16)


@intrinsic
def block_approx(typingctx, q_at, x_at, k, scale_at, out_at):
    """out[0:64] = scale[0:64] * (sum over i of q[i, 0:64] * x[i]), q [k, 64] int8, x [k] float32."""
    def codegen(context, builder, signature, args):
        q_at, x_at, k, scale_at, out_at = args
        lines = builder.inttoptr(q_at, _V16B.as_pointer())                # [k * 4] x 16 bytes
        raw = builder.inttoptr(q_at, ir.IntType(8).as_pointer())
        x = builder.inttoptr(x_at, _F32.as_pointer())
        scale = builder.inttoptr(scale_at, _V16F.as_pointer())
        out = builder.inttoptr(out_at, _V16F.as_pointer())
        zero, undef = ir.Constant(_V16F, [0.0] * 16), ir.Constant(_V16F, ir.Undefined)
        splat = ir.Constant(ir.VectorType(ir.IntType(32), 16), [0] * 16)
        flags = ("contract", "reassoc")

        def step(i, accs):
            xi = builder.shuffle_vector(builder.insert_element(undef, builder.load(builder.gep(x, [i])),
                                                               ir.Constant(ir.IntType(32), 0)), undef, splat)
            ahead = builder.add(builder.mul(i, ir.Constant(_I64, BLOCK)), ir.Constant(_I64, PREFETCH_BYTES))
            emit_prefetch(builder, builder.gep(raw, [ahead]))
            sums = []
            for g, acc in enumerate(accs):
                at = builder.add(builder.mul(i, ir.Constant(_I64, 4)), ir.Constant(_I64, g))
                v = builder.sitofp(builder.load(builder.gep(lines, [at]), align=1), _V16F)
                sums.append(builder.fadd(acc, builder.fmul(v, xi, flags=flags), flags=flags))
            return sums

        for g, result in enumerate(emit_sum_loop(builder, k, [zero] * 4, step, "block_approx")):
            at = ir.Constant(_I64, g)
            builder.store(builder.fmul(result, builder.load(builder.gep(scale, [at]), align=4)),
                          builder.gep(out, [at]), align=4)
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64, types.int64, types.int64), codegen


def approx_team(data):
    """out [n] = scale * (q @ x) for one float32 row x [k] over q [n / 64][k][64] int8, as a team's
    body (team_run.run_compiled; thread_num 0 means no team: one share on the calling thread).
    Each share takes whole blocks of 64 outputs."""
    thread_num, team_size, x_at, q_at, scale_at, out_at, n, k, shares = carray(data, (_N_FIELDS,), np.int64)
    blocks = n // BLOCK
    per_share = (blocks + shares - 1) // shares
    first, stride = (call_int(thread_num), call_int(team_size)) if thread_num != 0 else (0, 1)
    for share in range(first, shares, stride):
        for b in range(share * per_share, min(blocks, share * per_share + per_share)):
            block_approx(q_at + b * BLOCK * k, x_at, k, scale_at + b * BLOCK * 4, out_at + b * BLOCK * 4)


approx_team = kernel(approx_team, c_signature=types.void(types.voidptr))


def quantize_into(w_bits, packed, scale, bound, first_row, slack):
    """Rows ``first_row`` onward of a bfloat16 head (``w_bits`` [rows, k] uint16) into the int8 copy:
    per row, scale = max|w| / 127 in float32 (1 for zeros), q = w / scale rounded half to even
    (``int8_argmax.quantize_rows``' math), written at [row / 64][i][row % 64] of ``packed``; and
    bound = (||s q - w|| + slack * (||w|| + 2 ||s q||)) * 1.01 in float64 (``bound_coefficients``).
    False where a value is not finite (the copy is then not to be used)."""
    rows, k = w_bits.shape
    w = np.empty(k, np.float32)
    finite = True
    for r in range(rows):
        amax = np.float32(0.0)
        for i in range(k):
            finite = finite and (w_bits[r, i] & _EXPONENT) != _EXPONENT
            w[i] = as_float(np.uint32(w_bits[r, i]) << _S16)
            amax = max(amax, abs(w[i]))
        s = amax / np.float32(127.0)
        if not s > 0:
            s = np.float32(1.0)
        at = first_row + r
        err2, w2, q2 = 0.0, 0.0, 0.0
        for i in range(k):
            q = min(max(np.rint(w[i] / s), np.float32(-127.0)), np.float32(127.0))
            packed[at // BLOCK, i, at % BLOCK] = np.int8(q)
            e = np.float64(s) * np.float64(q) - np.float64(w[i])
            err2 += e * e
            w2 += np.float64(w[i]) * np.float64(w[i])
            q2 += np.float64(q) * np.float64(q)
        scale[at] = s
        bound[at] = (np.sqrt(err2) + slack * (np.sqrt(w2) + 2.0 * np.float64(s) * np.sqrt(q2))) * 1.01
    return finite


quantize_into = kernel(quantize_into, fastmath=False)


def best_lower(approx, bound, norm):
    """The first row with the highest lower bound approx - bound * norm (float64); -1 where a sum
    is not finite."""
    best, at = -np.inf, 0
    for r in range(approx.size):
        low = np.float64(approx[r]) - bound[r] * norm
        if not np.isfinite(low):             # an overflowed sum: no bound holds, the caller reads it all
            return -1
        if low > best:
            best, at = low, r
    return at


best_lower = kernel(best_lower, fastmath=False)


def candidate_blocks(approx, bound, norm, edge, blocks):
    """The blocks of 64 holding a row whose upper bound approx + bound * norm reaches ``edge``, in
    order, into ``blocks``; their count, or -1 where more than ``blocks`` holds."""
    count = 0
    for b in range(approx.size // BLOCK):
        for r in range(b * BLOCK, b * BLOCK + BLOCK):
            if np.float64(approx[r]) + bound[r] * norm >= edge:
                if count == blocks.size:
                    return -1
                blocks[count] = b
                count += 1
                break
    return count


candidate_blocks = kernel(candidate_blocks, fastmath=False)
