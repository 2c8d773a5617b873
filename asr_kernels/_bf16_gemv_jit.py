"""The numba body of ``bf16_gemv`` (imported only through it: numba is optional).

The inner loop over one block is written in LLVM IR (``block_dot32``, ``block_dot64``): numba keeps
an array accumulator in memory, a chain of store-load-add per pair; here the block's sums stay in
8-float registers (four or eight), and the stream is prefetched ahead (the distance was chosen by
measurement: tests/bench/RESULTS.md).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.core import cgutils
from numba.extending import intrinsic

from asr_kernels._bf16_decode_row_jit import as_float, call_int, emit_prefetch, emit_sum_loop, kernel, ptr, \
    round_into

# The int64 fields of gemv_team's data, in order (bf16_gemv.RowGemv fills them).
FIELDS = ("thread_num", "team_size", "x", "w", "out", "n", "k", "shares", "block", "float_rows")
_N_FIELDS = len(FIELDS)
PREFETCH_BYTES = 2048           # how far ahead of the pair being read its stream is prefetched
_HIGH, _S16, _INF, _INF16 = np.uint32(0xFFFF0000), np.uint32(16), np.uint32(0x7F800000), np.uint32(0x7F80)

_F32, _I32, _I64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
_V8F, _V8I = ir.VectorType(_F32, 8), ir.VectorType(_I32, 8)


def _const(t, v):
    return ir.Constant(t, v)


def _block_dot(block: int):
    """The LLVM IR loop over one block of ``block`` outputs (an intrinsic: ``block`` is fixed in it)."""
    groups = block // 8                                        # 8-float registers of sums
    lines = block * 4 // 64                                    # cache lines of one pair's words

    @intrinsic
    def block_dot(typingctx, w_at, x_even_at, x_odd_at, pairs, out_at):
        """out[0:block] (float32) = for each output j, the sum over pairs i, in i order, of
        x_even[i] * w[i, j].even + x_odd[i] * w[i, j].odd, where w [pairs, block] holds uint32 words of
        two bfloat16 (even k in the low half). Each product is added by a fused multiply-add (one rounding;
        a product of bfloat16 values is exact in float32 anyway), in k order: no reassociation."""
        def codegen(context, builder, signature, args):
            w_at, x_even_at, x_odd_at, pairs, out_at = args
            words = builder.inttoptr(w_at, _V8I.as_pointer())                 # [pairs * groups] x 8 words
            raw = builder.inttoptr(w_at, ir.IntType(8).as_pointer())
            x_even = builder.inttoptr(x_even_at, _F32.as_pointer())
            x_odd = builder.inttoptr(x_odd_at, _F32.as_pointer())
            out = builder.inttoptr(out_at, _V8F.as_pointer())
            zero, undef = _const(_V8F, [0.0] * 8), _const(_V8F, ir.Undefined)
            splat = _const(ir.VectorType(_I32, 8), [0] * 8)
            shift, high = _const(_V8I, [16] * 8), _const(_V8I, [-65536] * 8)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V8F, [_V8F] * 3), "llvm.fma.v8f32")

            def step(i, accs):
                a = builder.shuffle_vector(builder.insert_element(undef, builder.load(builder.gep(x_even, [i])),
                                                                  _const(_I32, 0)), undef, splat)
                c = builder.shuffle_vector(builder.insert_element(undef, builder.load(builder.gep(x_odd, [i])),
                                                                  _const(_I32, 0)), undef, splat)
                ahead = builder.add(builder.mul(i, _const(_I64, block * 4)), _const(_I64, PREFETCH_BYTES))
                for line in range(lines):                          # this pair's words, line by line
                    emit_prefetch(builder, builder.gep(raw, [builder.add(ahead, _const(_I64, 64 * line))]))
                sums = []
                for g, acc in enumerate(accs):
                    at = builder.add(builder.mul(i, _const(_I64, groups)), _const(_I64, g))
                    v = builder.load(builder.gep(words, [at]), align=4)
                    even = builder.bitcast(builder.shl(v, shift), _V8F)
                    odd = builder.bitcast(builder.and_(v, high), _V8F)
                    sums.append(builder.call(fma, [c, odd, builder.call(fma, [a, even, acc])]))
                return sums

            for g, result in enumerate(emit_sum_loop(builder, pairs, [zero] * groups, step, "block_dot")):
                builder.store(result, builder.gep(out, [_const(_I64, g)]), align=4)
            return context.get_dummy_value()
        return types.void(types.int64, types.int64, types.int64, types.int64, types.int64), codegen
    return block_dot


# Outputs per block of oneDNN's packed layout: 32 where it packs for AMX, 64 for AVX512-BF16 alone
# (bf16_gemv.BLOCKS; checked per weight at load).
block_dot32, block_dot64 = _block_dot(32), _block_dot(64)


def gemv_team(data):
    """out = x @ W.T for one row x [k] over W packed as [n / block][k / 2][block][2] (oneDNN's
    blocked bfloat16 layout: ``block`` outputs side by side, k in pairs; block 32 or 64), as a team's
    body (team_run.run_compiled; thread_num 0 means no team: one share on the calling thread).
    Each share takes whole blocks; each output sums its pairs in k order in float32 (even k, then
    odd). A bfloat16 x gives outputs rounded to bfloat16 (nearest even); a float32 x (``float_rows``)
    gives the float32 sums as they are. ``bf16_gemv.gemv_reference`` is its twin."""
    thread_num, team_size, x_at, w_at, out_at, n, k, shares, block, float_rows = carray(data, (_N_FIELDS,),
                                                                                        np.int64)
    half = k // 2
    x_even, x_odd = np.empty(half, np.float32), np.empty(half, np.float32)
    if float_rows:
        x = carray(ptr(x_at), (k,), np.float32)
        for i in range(half):
            x_even[i] = x[2 * i]
            x_odd[i] = x[2 * i + 1]
    else:
        x_pairs = carray(ptr(x_at), (half,), np.uint32)
        for i in range(half):
            x_even[i] = as_float(x_pairs[i] << _S16)
            x_odd[i] = as_float(x_pairs[i] & _HIGH)
    out = carray(ptr(out_at), (n,), np.uint16)          # bfloat16 outputs (not read for float_rows)
    acc = np.empty(block, np.float32)
    blocks = n // block
    per_share = (blocks + shares - 1) // shares
    first, stride = (call_int(thread_num), call_int(team_size)) if thread_num != 0 else (0, 1)
    for share in range(first, shares, stride):
        for b in range(share * per_share, min(blocks, share * per_share + per_share)):
            at = w_at + b * block * k * 2
            sums = out_at + b * block * 4 if float_rows else acc.ctypes.data
            if block == 64:
                block_dot64(at, x_even.ctypes.data, x_odd.ctypes.data, half, sums)
            else:
                block_dot32(at, x_even.ctypes.data, x_odd.ctypes.data, half, sums)
            if not float_rows:
                round_into(acc, out[b * block:(b + 1) * block])     # to bfloat16, nearest even


gemv_team = kernel(gemv_team, c_signature=types.void(types.voidptr), fastmath={"contract"})


def copy_blocks(w_bits, out, first, last):
    """Blocks ``first`` to ``last`` of 64 rows of a float32 or bfloat16 weight (``w_bits`` [n, k], its
    bits as uint32 or uint16) into ``out`` [n / 64][k / 2][64][2] uint16 (the blocked layout, bfloat16
    bits); False where a value is not a finite bfloat16 (float32 bits below the top 16 set, or an
    exponent of all ones): the caller drops the copy."""
    wide = w_bits.itemsize == 4
    shift, low, inf = (_S16, np.uint32(0xFFFF), _INF) if wide else (np.uint32(0), np.uint32(0), _INF16)
    exact = True
    for b in range(first, last):
        for j in range(64):
            row = w_bits[b * 64 + j]
            for i in range(row.shape[0] // 2):
                even, odd = np.uint32(row[2 * i]), np.uint32(row[2 * i + 1])
                if ((even | odd) & low) != 0 or (even & inf) == inf or (odd & inf) == inf:
                    exact = False
                out[b, i, j, 0] = np.uint16(even >> shift)
                out[b, i, j, 1] = np.uint16(odd >> shift)
    return exact


copy_blocks = kernel(copy_blocks)
