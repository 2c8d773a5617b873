"""The numba kernels of ``bf16_decode_row`` (imported only through it: numba is optional).

Module-level functions, so that numba's on-disk cache can hold them (closures are compiled again
in every process). bfloat16 values are uint16 bits; see ``bf16_decode_row`` for what each computes.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# Not nnan/ninf: a NaN in the activations must stay a NaN (the sampler and tests see it).
_FASTMATH = {"reassoc", "contract", "nsz", "arcp", "afn"}
inline = njit(inline="always", fastmath=_FASTMATH)
_KERNEL = dict(nogil=True, fastmath=_FASTMATH, boundscheck=False, error_model="numpy")


def kernel(function, c_signature=None, **options):
    """njit (or, given ``c_signature``, a C callback: cfunc) with numba's on-disk cache (compiling
    takes seconds, loading a fraction of one), or without it where numba finds no place for one (a
    frozen app has no source files beside it)."""
    options = {**_KERNEL, **options}
    compile_with = njit
    if c_signature is not None:          # a C callback holds no GIL to release
        options.pop("nogil")
        compile_with = lambda **o: cfunc(c_signature, **o)  # noqa: E731
    try:
        return compile_with(cache=True, **options)(function)
    except RuntimeError:
        return compile_with(**options)(function)


@intrinsic
def ptr(typingctx, address):
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return types.voidptr(address), codegen


@intrinsic
def as_float(typingctx, value):
    """The float32 whose bits are the uint32 ``value`` (widening bfloat16 bits in a loop's registers)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


def emit_prefetch(builder, pointer) -> None:
    """LLVM IR asking for the cache line at ``pointer`` (an i8*) ahead of its use: llvm.prefetch
    for a read, kept in every cache level, of data."""
    i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
    function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                              "llvm.prefetch.p0i8")
    builder.call(function, [pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])


def emit_sum_loop(builder, count, sums: list, body, name: str, may_be_empty: bool = True) -> list:
    """LLVM IR for ``for i in range(count)`` (count an i64) carrying vector sums in registers (phis,
    where numba would keep an array accumulator in memory): ``sums`` are their starting values,
    ``body(i, current)`` emits one step and returns the new sums. Returns the sums after the loop:
    the starting ones where count <= 0, unless the caller promises count > 0 (``may_be_empty``)."""
    i64 = ir.IntType(64)
    entry = builder.block
    loop = builder.function.append_basic_block(f"{name}.loop")
    done = builder.function.append_basic_block(f"{name}.done")
    if may_be_empty:
        builder.cbranch(builder.icmp_signed(">", count, ir.Constant(i64, 0)), loop, done)
    else:
        builder.branch(loop)
    builder.position_at_end(loop)
    i = builder.phi(i64)
    current = [builder.phi(s.type) for s in sums]
    i.add_incoming(ir.Constant(i64, 0), entry)
    for phi, start in zip(current, sums):
        phi.add_incoming(start, entry)
    new = body(i, current)
    following = builder.add(i, ir.Constant(i64, 1))
    end = builder.block
    i.add_incoming(following, end)
    for phi, value in zip(current, new):
        phi.add_incoming(value, end)
    builder.cbranch(builder.icmp_signed("<", following, count), loop, done)
    builder.position_at_end(done)
    if not may_be_empty:
        return new
    results = [builder.phi(s.type) for s in sums]
    for result, start, value in zip(results, sums, new):
        result.add_incoming(start, entry)
        result.add_incoming(value, end)
    return results


@intrinsic
def prefetch(typingctx, address):
    """Ask for the cache line at ``address`` ahead of its use (``emit_prefetch``)."""
    def codegen(context, builder, signature, args):
        emit_prefetch(builder, builder.inttoptr(args[0], ir.IntType(8).as_pointer()))
        return context.get_dummy_value()
    return types.void(types.int64), codegen


@intrinsic
def call_int(typingctx, address):
    """Call the C function ``int f(void)`` at ``address`` (an OpenMP team query)."""
    def codegen(context, builder, signature, args):
        function = ir.FunctionType(ir.IntType(32), [])
        return builder.call(builder.inttoptr(args[0], function.as_pointer()), [])
    return types.int32(types.int64), codegen


# exp for float32 (Cephes' expf): x = k ln2 + r with ln2 in two parts, |r| <= ln2 / 2, exp(r) as a
# polynomial, times 2^k. About 1 ulp from the true value (1.007 at most over [-110, 95]), subnormal
# results included.
_LOG2E, _LN2_HI, _LN2_LO = np.float32(1.4426950408889634), np.float32(0.693359375), np.float32(-2.12194440e-4)
_P = (np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3),
      np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1))


@njit(inline="always", fastmath={"contract"})
def exp_reduced(v):
    """(p, k) with exp(v) = p * 2^k: k = round(v / ln2), p the polynomial of the rest (|r| <= ln2 / 2).
    No reassociation here, which would undo the two-part ln2; callers build 2^k for their range."""
    k = np.floor(v * _LOG2E + np.float32(0.5))
    r = (v - k * _LN2_HI) - k * _LN2_LO
    p = _P[0]
    p = p * r + _P[1]
    p = p * r + _P[2]
    p = p * r + _P[3]
    p = p * r + _P[4]
    p = p * r + _P[5]
    return p * r * r + r + np.float32(1.0), k


def exp_into(x, out, scale_a, scale_b):
    """out = exp(x), float32 arrays of one length (out may be x), in loops that vectorize: numba calls
    libm's expf one value at a time (Intel's SVML is not there), ten times slower. scale_a, scale_b:
    int32 scratch of the same length."""
    for i in range(x.shape[0]):
        v = x[i]
        v = v if v > np.float32(-104.0) else np.float32(-104.0)      # exp underflows to 0 below; NaN -> here
        v = v if v < np.float32(89.0) else np.float32(89.0)          # and overflows to inf above
        p, k = exp_reduced(v)
        out[i] = p if x[i] == x[i] else x[i]   # NaN stays NaN
        ki = np.int32(k)                        # 2^k as 2^a * 2^b, each a normal float for k in [-150, 129]
        a = ki >> np.int32(1)
        scale_a[i] = (a + np.int32(127)) << np.int32(23)
        scale_b[i] = (ki - a + np.int32(127)) << np.int32(23)
    fa, fb = scale_a.view(np.float32), scale_b.view(np.float32)
    for i in range(x.shape[0]):
        out[i] = out[i] * fa[i] * fb[i]


exp_into = kernel(exp_into, fastmath={"contract"})


@inline
def widen(src, dst):            # bfloat16 bits -> float32
    out = dst.view(np.uint32)
    for i in range(src.shape[0]):
        out[i] = np.uint32(src[i]) << np.uint32(16)


@inline
def round_into(src, dst):       # float32 -> bfloat16 bits, to nearest even (NaN stays NaN)
    u = src.view(np.uint32)
    for i in range(u.shape[0]):
        x = u[i]
        if (x & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
            dst[i] = np.uint16((x >> np.uint32(16)) | np.uint32(0x40))
        else:
            dst[i] = np.uint16((x + np.uint32(0x7FFF) + ((x >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


@inline
def round_trip(a, scratch):     # a = float32(bf16(a)), in place
    round_into(a, scratch)
    widen(scratch, a)


@inline
def normed(a, weight_bits, scratch, w, eps):
    """a = bf16(w * bf16(a * rsqrt(mean(a^2) + eps))), in place (a holds bfloat16 values)."""
    n = a.shape[0]
    s = np.float32(0.0)
    for i in range(n):
        s += a[i] * a[i]
    inv = np.float32(1.0) / np.sqrt(s / np.float32(n) + np.float32(eps))
    for i in range(n):
        a[i] = a[i] * inv
    round_trip(a, scratch)
    widen(weight_bits, w)
    for i in range(n):
        a[i] = a[i] * w[i]


@kernel
def residual_norm_k(x_at, res_at, w_at, h_at, new_res_at, rows, n, eps, has_res):
    weight = carray(ptr(w_at), (n,), np.uint16)
    a, scratch, t = np.empty(n, np.float32), np.empty(n, np.float32), np.empty(n, np.uint16)
    for r in range(rows):                          # each row alone: a row's bits never depend on the others
        x = carray(ptr(x_at + r * n * 2), (n,), np.uint16)
        new_res = carray(ptr(new_res_at + r * n * 2), (n,), np.uint16)
        widen(x, a)
        if has_res:
            widen(carray(ptr(res_at + r * n * 2), (n,), np.uint16), scratch)
            for i in range(n):
                a[i] = a[i] + scratch[i]
        round_into(a, t)
        widen(t, a)
        for i in range(n):
            new_res[i] = t[i]
        normed(a, weight, t, scratch, eps)
        round_into(a, carray(ptr(h_at + r * n * 2), (n,), np.uint16))


@kernel
def prologue_k(qkv_at, qkw_at, cos_at, sin_at, kc_at, vc_at, slots, tokens, q_at, heads, kvh, hd, eps):
    nqk, row, width = heads + kvh, kvh * hd, (heads + 2 * kvh) * hd
    qkw = carray(ptr(qkw_at), (nqk * hd,), np.uint16)
    cos, sin = np.empty(hd, np.float32), np.empty(hd, np.float32)
    n, rolled, w, t = np.empty(hd, np.float32), np.empty(hd, np.float32), np.empty(hd, np.float32), \
        np.empty(hd, np.uint16)
    half = hd // 2
    for token in range(tokens):
        qkv = carray(ptr(qkv_at + token * width * 2), (width,), np.uint16)
        widen(carray(ptr(cos_at + token * hd * 2), (hd,), np.uint16), cos)
        widen(carray(ptr(sin_at + token * hd * 2), (hd,), np.uint16), sin)
        slot = slots[token]
        for head in range(nqk):
            widen(qkv[head * hd:(head + 1) * hd], n)
            normed(n, qkw[head * hd:(head + 1) * hd], t, w, eps)
            round_trip(n, t)
            for d in range(hd):                    # roll(n, half) * signed sin: rotate_half(n) * sin
                rolled[d] = n[d + half - hd if d >= half else d + half] * sin[d]
            for d in range(hd):
                n[d] = n[d] * cos[d]
            round_trip(n, t)
            round_trip(rolled, t)
            for d in range(hd):
                n[d] = n[d] + rolled[d]
            if head < heads:
                round_into(n, carray(ptr(q_at + (token * heads + head) * hd * 2), (hd,), np.uint16))
            elif slot >= 0:                        # padding tokens (slot -1) write no cache
                round_into(n, carray(ptr(kc_at + (slot * row + (head - heads) * hd) * 2), (hd,), np.uint16))
        if slot >= 0:
            v_new = carray(ptr(vc_at + slot * row * 2), (row,), np.uint16)
            v_new[:] = qkv[nqk * hd:]


# Cached positions ahead of the one being read whose keys (or values) are asked for: a step's weights
# have just streamed through the caches, so a row's cached context comes from memory, and the
# hardware prefetcher stops at every 4 KB page (two positions of the 0.6B).
AHEAD = 8


@inline
def prefetch_position(cache_at, table, block_size, p, row, g_lo, g_hi, hd):
    at = cache_at + ((table[p // block_size] * block_size + p % block_size) * row + g_lo * hd) * 2
    end = at + (g_hi - g_lo) * hd * 2
    for line in range(at - at % 64, end, 64):           # every line the range touches, aligned or not
        prefetch(line)


@inline
def softmax_heads(scores, h_lo, h_hi):
    """scores[h] = softmax(scores[h]) over the context, in place, for heads h_lo..h_hi (float32; its
    max subtracted first, exp_into's exponential)."""
    ctx = scores.shape[1]
    sa, sb = np.empty(ctx, np.int32), np.empty(ctx, np.int32)
    for h in range(h_lo, h_hi):
        sh = scores[h]
        m = sh[0]
        for p in range(1, ctx):
            m = max(m, sh[p])
        for p in range(ctx):
            sh[p] = sh[p] - m
        exp_into(sh, sh, sa, sb)
        z = np.float32(0.0)
        for p in range(ctx):
            z += sh[p]
        for p in range(ctx):
            sh[p] = sh[p] / z


def attend_one(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd, g_lo, g_hi):
    """One query [heads, hd] over the ctx cached keys and values of its row, for key heads g_lo..g_hi
    (and their query heads) only: each head's sums are the same whichever range holds it. The query
    heads that share a key head go two at a time over its cached row, widened in registers (1.3x
    faster than one head at a time over a widened copy; the same sums in the same order)."""
    row = kvh * hd
    group = heads // kvh
    h_lo, h_hi = g_lo * group, g_hi * group
    q = np.empty(heads * hd, np.float32)
    widen(carray(ptr(q_at + h_lo * hd * 2), ((h_hi - h_lo) * hd,), np.uint16), q[h_lo * hd:h_hi * hd])
    q2 = q.reshape(heads, hd)
    scale = np.float32(1.0 / math.sqrt(hd))
    scores = np.empty((heads, ctx), np.float32)
    for p in range(min(AHEAD, ctx)):
        prefetch_position(kc_at, table, block_size, p, row, g_lo, g_hi, hd)
    for p in range(ctx):                           # scores[h, p] = q_h . k_p(h // group) * scale
        if p + AHEAD < ctx:
            prefetch_position(kc_at, table, block_size, p + AHEAD, row, g_lo, g_hi, hd)
        elif p + AHEAD - ctx < ctx:                # the keys' last positions: the values' first ones
            prefetch_position(vc_at, table, block_size, p + AHEAD - ctx, row, g_lo, g_hi, hd)
        at = (table[p // block_size] * block_size + p % block_size) * row * 2
        keys = carray(ptr(kc_at + at), (kvh, hd), np.uint16)
        for g in range(g_lo, g_hi):
            k, h, end = keys[g], g * group, (g + 1) * group
            while h + 1 < end:
                q0, q1 = q2[h], q2[h + 1]
                s0, s1 = np.float32(0.0), np.float32(0.0)
                for d in range(hd):
                    kd = as_float(np.uint32(k[d]) << np.uint32(16))
                    s0 += q0[d] * kd
                    s1 += q1[d] * kd
                scores[h, p], scores[h + 1, p] = s0 * scale, s1 * scale
                h += 2
            if h < end:
                qh, s = q2[h], np.float32(0.0)
                for d in range(hd):
                    s += qh[d] * as_float(np.uint32(k[d]) << np.uint32(16))
                scores[h, p] = s * scale
    softmax_heads(scores, h_lo, h_hi)
    acc = np.zeros((heads, hd), np.float32)
    for p in range(ctx):                           # out_h = sum_p softmax[h, p] v_p(h // group)
        if p + AHEAD < ctx:
            prefetch_position(vc_at, table, block_size, p + AHEAD, row, g_lo, g_hi, hd)
        at = (table[p // block_size] * block_size + p % block_size) * row * 2
        values = carray(ptr(vc_at + at), (kvh, hd), np.uint16)
        for g in range(g_lo, g_hi):
            v, h, end = values[g], g * group, (g + 1) * group
            while h + 1 < end:
                a0, a1, w0, w1 = acc[h], acc[h + 1], scores[h, p], scores[h + 1, p]
                for d in range(hd):
                    vd = as_float(np.uint32(v[d]) << np.uint32(16))
                    a0[d] += w0 * vd
                    a1[d] += w1 * vd
                h += 2
            if h < end:
                ah, w = acc[h], scores[h, p]
                for d in range(hd):
                    ah[d] += w * as_float(np.uint32(v[d]) << np.uint32(16))
    round_into(acc.reshape(heads * hd)[h_lo * hd:h_hi * hd],
               carray(ptr(out_at + h_lo * hd * 2), ((h_hi - h_lo) * hd,), np.uint16))


attend_one = kernel(attend_one)      # not inlined: compiled once for its four callers below


@kernel
def attend_k(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd):
    attend_one(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd, 0, kvh)


@kernel
def attend_rows_k(q_at, kc_at, vc_at, tables, ctxs, starts, rows, block_size, out_at, heads, kvh, hd):
    """attend_one for each row r in rows: its query at token starts[r], its blocks tables[r], ctxs[r] long."""
    width = heads * hd * 2
    for r in rows:
        attend_one(q_at + starts[r] * width, kc_at, vc_at, tables[r], block_size, ctxs[r], out_at + starts[r] * width,
                   heads, kvh, hd, 0, kvh)


# The int64 fields of attend_team's data, in order (bf16_decode_row.attend_rows fills them).
TEAM_FIELDS = ("thread_num", "team_size", "q", "k_cache", "v_cache", "block_size", "out", "heads", "kv_heads",
               "head_dim", "rows", "tables", "table_width", "ctxs", "starts", "shares", "share_rows", "share_width",
               "share_counts")
_N_FIELDS = len(TEAM_FIELDS)    # attend_team unpacks them by position: the names above in this order


def attend_team(data):
    """attend_rows_k as an OpenMP team's body (team_run.run_compiled): each team thread takes the
    shares of its number, share i being the rows share_rows[i, :share_counts[i]]. Whole rows: a
    thread given half of each row's key heads reads every cached row at a stride and ran 1.4x slower."""
    (thread_num, team_size, q_at, kc_at, vc_at, block_size, out_at, heads, kvh, hd, rows, tables_at, width, ctxs_at,
     starts_at, shares, share_rows_at, share_width, counts_at) = carray(data, (_N_FIELDS,), np.int64)
    tables = carray(ptr(tables_at), (rows, width), np.int64)
    ctxs, starts = carray(ptr(ctxs_at), (rows,), np.int64), carray(ptr(starts_at), (rows,), np.int64)
    share_rows = carray(ptr(share_rows_at), (shares, share_width), np.int64)
    counts = carray(ptr(counts_at), (shares,), np.int64)
    size = heads * hd * 2
    for share in range(call_int(thread_num), shares, call_int(team_size)):
        for j in range(counts[share]):
            r = share_rows[share, j]
            attend_one(q_at + starts[r] * size, kc_at, vc_at, tables[r], block_size, ctxs[r],
                       out_at + starts[r] * size, heads, kvh, hd, 0, kvh)


attend_team = kernel(attend_team, c_signature=types.void(types.voidptr))

# The int64 fields of attend_heads_team's data, in order (bf16_decode_row.attend fills them).
HEADS_FIELDS = ("thread_num", "team_size", "q", "k_cache", "v_cache", "table", "table_len", "block_size", "ctx",
                "out", "heads", "kv_heads", "head_dim", "shares")
_N_HEADS_FIELDS = len(HEADS_FIELDS)


def attend_heads_team(data):
    """One row's attend_one as an OpenMP team's body: share i of ``shares`` holds key heads
    kvh * i // shares up to kvh * (i + 1) // shares, and team thread t takes shares t, t + size..."""
    (thread_num, team_size, q_at, kc_at, vc_at, table_at, table_len, block_size, ctx, out_at, heads, kvh, hd,
     shares) = carray(data, (_N_HEADS_FIELDS,), np.int64)
    table = carray(ptr(table_at), (table_len,), np.int64)
    for share in range(call_int(thread_num), shares, call_int(team_size)):
        attend_one(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd,
                   kvh * share // shares, kvh * (share + 1) // shares)


attend_heads_team = kernel(attend_heads_team, c_signature=types.void(types.voidptr))


@kernel
def silu_mul_k(gate_up_at, out_at, rows, n):
    c = 512                                        # a row in pieces whose scratch stays in L1
    g, u, e, t2 = np.empty(c, np.float32), np.empty(c, np.float32), np.empty(c, np.float32), np.empty(c, np.float32)
    t, sa, sb = np.empty(c, np.uint16), np.empty(c, np.int32), np.empty(c, np.int32)
    for r in range(rows):
        gate_up = carray(ptr(gate_up_at + r * 2 * n * 2), (2 * n,), np.uint16)
        out = carray(ptr(out_at + r * n * 2), (n,), np.uint16)
        for lo in range(0, n, c):
            m = min(c, n - lo)
            gp, up, ep, tp, t16 = g[:m], u[:m], e[:m], t2[:m], t[:m]
            widen(gate_up[lo:lo + m], gp)
            widen(gate_up[n + lo:n + lo + m], up)
            for i in range(m):
                tp[i] = -gp[i]
            exp_into(tp, ep, sa[:m], sb[:m])
            for i in range(m):
                gp[i] = gp[i] / (np.float32(1.0) + ep[i])
            round_trip(gp, t16)
            for i in range(m):
                gp[i] = gp[i] * up[i]
            round_into(gp, out[lo:lo + m])
