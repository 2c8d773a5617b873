"""The numba body of ``bf16_prompt_attention`` (imported only through it: numba is optional).

Both products run on AVX512-BF16's ``vdpbf16ps`` (``llvm.x86.avx512bf16.dpbf16ps.512``): 16 float32
sums, each adding two bfloat16 products a step. The tiles are LLVM IR loops (``_dot_tile``)
whose sums stay in registers; everything else is plain numba over a key head's packed copy.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic

from asr_kernels._bf16_decode_row_jit import as_float, call_int, emit_sum_loop, exp_reduced, inline, kernel, ptr, \
    round_into


class _BFloat(ir.types._BaseFloatType):
    """LLVM's ``bfloat``, which llvmlite has no type for (the intrinsic's operands are <32 x bfloat>)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self):
        return "bfloat"

    def format_constant(self, value):
        raise NotImplementedError("no bfloat constants are emitted")


_BFloat._create_instance()
_F32, _I32, _I64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
_V16F, _V16I, _V32B = ir.VectorType(_F32, 16), ir.VectorType(_I32, 16), ir.VectorType(_BFloat(), 32)
QK_ROWS, QK_BLOCKS = 8, 2       # a score tile: 8 query rows x 2 blocks of 16 keys (16 registers of sums)
PV_ROWS = 4                     # an output tile: 4 query rows x 64 (or 16) of head_dim: 16 (or 4) registers


def _dot_pairs(builder, acc, a, b):
    """acc[i] + a.bf16[2i] * b.bf16[2i] + a.bf16[2i + 1] * b.bf16[2i + 1], for 16 lanes of words."""
    ftype = ir.FunctionType(_V16F, [_V16F, _V32B, _V32B])
    fn = cgutils.get_or_insert_function(builder.module, ftype, "llvm.x86.avx512bf16.dpbf16ps.512")
    return builder.call(fn, [acc, builder.bitcast(a, _V32B), builder.bitcast(b, _V32B)])


def _splat(builder, word):
    undef = ir.Constant(_V16I, ir.Undefined)
    return builder.shuffle_vector(builder.insert_element(undef, word, ir.Constant(_I32, 0)), undef,
                                  ir.Constant(_V16I, [0] * 16))


def _dot_tile(rows: int, cols: int):
    """A tile of ``rows`` x ``cols`` registers of 16 float32 sums (an intrinsic: the shape is fixed in it):

        out[r * out_stride + 16 c + l] = sum over i < count, in i order, of
                                         a[r * a_stride + i] . b[i * b_step + c * b_col + l]

    where a and b hold words of two bfloat16 (a's broadcast to every lane) and ``.`` is their two
    products (``_dot_pairs``); strides in words (a, b) and floats (out); count > 0."""

    @intrinsic
    def dot_tile(typingctx, a_at, a_stride, b_at, b_step, b_col, count, out_at, out_stride):
        def codegen(context, builder, signature, args):
            a_at, a_stride, b_at, b_step, b_col, count, out_at, out_stride = args
            a = builder.inttoptr(a_at, _I32.as_pointer())
            b = builder.inttoptr(b_at, _I32.as_pointer())
            out = builder.inttoptr(out_at, _F32.as_pointer())

            def vector(pointer, at):                       # 16 lanes from word (or float) ``at``
                return builder.bitcast(builder.gep(pointer, [at]), ir.VectorType(pointer.type.pointee, 16).as_pointer())

            zero = ir.Constant(_V16F, [0.0] * 16)

            def step(i, flat):
                at = builder.mul(i, b_step)
                bs = [builder.load(vector(b, builder.add(at, builder.mul(b_col, ir.Constant(_I64, c)))), align=4)
                      for c in range(cols)]
                new = []
                for r in range(rows):
                    word = _splat(builder, builder.load(builder.gep(a, [builder.add(builder.mul(a_stride, ir.Constant(_I64, r)), i)])))
                    new += [_dot_pairs(builder, flat[r * cols + c], word, bs[c]) for c in range(cols)]
                return new

            sums = emit_sum_loop(builder, count, [zero] * (rows * cols), step, "tile", may_be_empty=False)
            for r in range(rows):
                for c in range(cols):
                    at = builder.add(builder.mul(out_stride, ir.Constant(_I64, r)), ir.Constant(_I64, 16 * c))
                    builder.store(sums[r * cols + c], vector(out, at), align=4)
            return context.get_dummy_value()
        return types.void(*[types.int64] * 8), codegen
    return dot_tile


# Scores: QK_ROWS queries x QK_BLOCKS blocks of 16 keys. Outputs: PV_ROWS queries x 64 columns of
# head_dim, and 16 for what is left (head_dim a multiple of 16).
qk_tile, pv_tile64, pv_tile16 = _dot_tile(QK_ROWS, QK_BLOCKS), _dot_tile(PV_ROWS, 4), _dot_tile(PV_ROWS, 1)


@inline
def softmax_row(s, scale):
    """s = exp(s * scale - max), in place; returns the float32 sum (its order depends on len(s) alone).
    The exponential is exp_into's (``exp_reduced``, Cephes' expf) for arguments of -87 and above, in one loop that
    vectorizes (2^k from its exponent bits); below -87 it gives exp(-87), about 1.6e-38, where the true
    value is smaller still: beside the largest term (1) neither changes a float32 sum. NaN stays NaN."""
    n = s.shape[0]
    m = s[0] * scale
    for j in range(n):
        v = s[j] * scale
        s[j] = v
        m = v if v > m else m
    total = np.float32(0.0)
    for j in range(n):
        x = s[j] - m
        x = x if not x < np.float32(-87.0) else np.float32(-87.0)
        p, k = exp_reduced(x)
        e = p * as_float(np.uint32((np.int32(k) + np.int32(127)) << np.int32(23)))
        s[j] = e
        total += e
    return total


def key_head(q_at, kc_at, vc_at, table, block_size, ctx, n, out_at, heads, kvh, hd, g, q_row, out_row, causal):
    """Every query of one row's ``n`` prompt tokens for the query heads of key head ``g``. Query i sits
    at position ctx - n + i and attends keys 0..ctx - n + i (``causal``) or all ctx keys. A query's bits
    depend on its own keys only: its scores, softmax and sums run over its keys alone, in key order,
    whatever tile it is in."""
    pairs = hd // 2
    group = heads // kvh
    width = (ctx + 31) // 32 * 32                  # keys, padded to whole score tiles
    kp = np.zeros(width * pairs, np.uint32)        # [width / 16][pairs][16]: one key block's pairs
    vp = np.zeros(width // 2 * hd, np.uint32)      # [width / 2][hd]: keys 2j and 2j + 1 at d
    for p in range(ctx):
        at = ((table[p // block_size] * block_size + p % block_size) * kvh + g) * hd
        key = carray(ptr(kc_at + at * 2), (pairs,), np.uint32)
        value = carray(ptr(vc_at + at * 2), (hd,), np.uint16)
        base = (p // 16) * pairs * 16 + p % 16
        for i in range(pairs):
            kp[base + i * 16] = key[i]
        shift = np.uint32(16 * (p % 2))
        row = (p // 2) * hd
        for d in range(hd):
            vp[row + d] |= np.uint32(value[d]) << shift
    scale = np.float32(1.0 / math.sqrt(hd))
    qs = np.zeros(QK_ROWS * pairs, np.uint32)
    scores = np.empty((QK_ROWS, width), np.float32)
    probs = np.zeros((QK_ROWS, width), np.uint16)  # bfloat16 bits; pairs of them are pv_tile's a words
    sums = np.empty(QK_ROWS, np.float32)
    acc = np.empty(PV_ROWS * 64, np.float32)
    for h in range(g * group, (g + 1) * group):
        for i0 in range(0, n, QK_ROWS):
            rows = min(QK_ROWS, n - i0)
            for r in range(QK_ROWS):
                src = carray(ptr(q_at + ((i0 + min(r, rows - 1)) * q_row + h * hd) * 2), (pairs,), np.uint32)
                for i in range(pairs):
                    qs[r * pairs + i] = src[i]
            keys = ctx - n + i0 + rows if causal else ctx    # the tile's last query sees this many keys
            tiles = (keys + 31) // 32
            for c in range(tiles):               # k: [pairs][16] words per block of 16 keys
                qk_tile(qs.ctypes.data, pairs, kp.ctypes.data + c * 32 * pairs * 4, 16, 16 * pairs, pairs,
                        scores.ctypes.data + c * 32 * 4, width)
            span = tiles * 32
            for r in range(rows):
                own = ctx - n + i0 + r + 1 if causal else ctx    # this query's keys
                s = scores[r, :own]
                sums[r] = softmax_row(s, scale)
                round_into(s, probs[r, :own])
                for j in range(own, span):
                    probs[r, j] = 0
            for r0 in range(0, rows, PV_ROWS):
                p_at = probs.ctypes.data + r0 * width * 2
                d0 = 0
                while d0 < hd:
                    cols = 64 if hd - d0 >= 64 else 16
                    v_at = vp.ctypes.data + d0 * 4
                    if cols == 64:                   # v: [key pairs][hd] words
                        pv_tile64(p_at, width // 2, v_at, hd, 16, span // 2, acc.ctypes.data, cols)
                    else:
                        pv_tile16(p_at, width // 2, v_at, hd, 16, span // 2, acc.ctypes.data, cols)
                    for r in range(r0, min(r0 + PV_ROWS, rows)):
                        a = acc[(r - r0) * cols:(r - r0 + 1) * cols]
                        inv = np.float32(1.0) / sums[r]
                        for d in range(cols):
                            a[d] = a[d] * inv
                        round_into(a, carray(ptr(out_at + ((i0 + r) * out_row + h * hd + d0) * 2), (cols,), np.uint16))
                    d0 += cols


key_head = kernel(key_head)

# The int64 fields of prompt_team's data, in order (bf16_prompt_attention.attend_prompt fills them).
FIELDS = ("thread_num", "team_size", "q", "k_cache", "v_cache", "table", "table_len", "block_size", "ctx", "n",
          "out", "heads", "kv_heads", "head_dim", "q_row", "out_row", "causal", "shares")
_N_FIELDS = len(FIELDS)


def prompt_team(data):
    """key_head for every key head, as a team's body (team_run.run_compiled; thread_num 0: no team,
    every key head on the calling thread). Share i of ``shares`` holds key heads i, i + shares..."""
    (thread_num, team_size, q_at, kc_at, vc_at, table_at, table_len, block_size, ctx, n, out_at, heads, kvh, hd,
     q_row, out_row, causal, shares) = carray(data, (_N_FIELDS,), np.int64)
    table = carray(ptr(table_at), (table_len,), np.int64)
    first, stride = (call_int(thread_num), call_int(team_size)) if thread_num != 0 else (0, 1)
    for share in range(first, shares, stride):
        for g in range(share, kvh, shares):
            key_head(q_at, kc_at, vc_at, table, block_size, ctx, n, out_at, heads, kvh, hd, g, q_row, out_row,
                     causal != 0)


prompt_team = kernel(prompt_team, c_signature=types.void(types.voidptr), fastmath={"contract"})
