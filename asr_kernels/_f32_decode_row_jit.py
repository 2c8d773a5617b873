"""The numba kernels of ``f32_decode_row`` (imported only through it: numba is optional).

float32 forms of ``_bf16_decode_row_jit``'s kernels for one decode row, reading and writing float32
values by address: the same steps with nothing rounded between them (float32 is the compute dtype).
Module-level functions, so that numba's on-disk cache can hold them.
"""
from __future__ import annotations

import math

import numpy as np
from numba import carray, types

from asr_kernels._bf16_decode_row_jit import HEADS_FIELDS, call_int, exp_into, inline, kernel, prefetch, ptr, \
    softmax_heads


@inline
def normed(a, w, eps):
    """a = w * (a * rsqrt(mean(a^2) + eps)), in place (torch.rms_norm's float32 steps, then the weight)."""
    n = a.shape[0]
    s = np.float32(0.0)
    for i in range(n):
        s += a[i] * a[i]
    inv = np.float32(1.0) / np.sqrt(s / np.float32(n) + np.float32(eps))
    for i in range(n):
        a[i] = w[i] * (a[i] * inv)


@kernel
def residual_norm_k(x_at, res_at, w_at, h_at, new_res_at, n, eps, has_res):
    x, w = carray(ptr(x_at), (n,), np.float32), carray(ptr(w_at), (n,), np.float32)
    h, new_res = carray(ptr(h_at), (n,), np.float32), carray(ptr(new_res_at), (n,), np.float32)
    if has_res:
        res = carray(ptr(res_at), (n,), np.float32)
        for i in range(n):
            new_res[i] = x[i] + res[i]       # new_res may be res itself: each value read before it is written
    else:
        for i in range(n):
            new_res[i] = x[i]
    for i in range(n):
        h[i] = new_res[i]
    normed(h, w, eps)


@kernel
def prologue_k(qkv_at, qkw_at, cos_at, sin_at, kc_at, vc_at, slot, q_at, heads, kvh, hd, eps):
    nqk, row, half = heads + kvh, kvh * hd, hd // 2
    qkv = carray(ptr(qkv_at), ((heads + 2 * kvh) * hd,), np.float32)
    qkw = carray(ptr(qkw_at), (nqk * hd,), np.float32)
    cos, sin = carray(ptr(cos_at), (hd,), np.float32), carray(ptr(sin_at), (hd,), np.float32)
    n = np.empty(hd, np.float32)
    for head in range(nqk):
        for d in range(hd):
            n[d] = qkv[head * hd + d]
        normed(n, qkw[head * hd:(head + 1) * hd], eps)
        if head < heads:
            out = carray(ptr(q_at + head * hd * 4), (hd,), np.float32)
        elif slot >= 0:                            # padding (slot -1) writes no cache
            out = carray(ptr(kc_at + (slot * row + (head - heads) * hd) * 4), (hd,), np.float32)
        else:
            continue
        for d in range(hd):                        # n * cos + roll(n, half) * signed sin
            out[d] = n[d] * cos[d] + n[d + half - hd if d >= half else d + half] * sin[d]
    if slot >= 0:
        v_new = carray(ptr(vc_at + slot * row * 4), (row,), np.float32)
        for i in range(row):
            v_new[i] = qkv[nqk * hd + i]


# Cached positions ahead of the one being read whose keys (or values) are asked for (as in
# _bf16_decode_row_jit: the hardware prefetcher stops at every 4 KB page, one position of the 0.6B).
AHEAD = 8


@inline
def prefetch_position(cache_at, table, block_size, p, row, g_lo, g_hi, hd):
    at = cache_at + ((table[p // block_size] * block_size + p % block_size) * row + g_lo * hd) * 4
    end = at + (g_hi - g_lo) * hd * 4
    for line in range(at - at % 64, end, 64):
        prefetch(line)


def attend_one(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd, g_lo, g_hi):
    """One query [heads, hd] over the ctx cached keys and values of its row, for key heads g_lo..g_hi
    (and their query heads) only -> out [heads * hd]: softmax(q k / sqrt(hd)) v per head."""
    row, group = kvh * hd, heads // kvh
    h_lo, h_hi = g_lo * group, g_hi * group
    q = carray(ptr(q_at), (heads, hd), np.float32)
    out = carray(ptr(out_at), (heads, hd), np.float32)
    scale = np.float32(1.0 / math.sqrt(hd))
    scores = np.empty((heads, ctx), np.float32)
    for p in range(min(AHEAD, ctx)):
        prefetch_position(kc_at, table, block_size, p, row, g_lo, g_hi, hd)
    for p in range(ctx):                           # scores[h, p] = q_h . k_p(h // group) * scale
        if p + AHEAD < ctx:
            prefetch_position(kc_at, table, block_size, p + AHEAD, row, g_lo, g_hi, hd)
        elif p + AHEAD - ctx < ctx:                # the keys' last positions: the values' first ones
            prefetch_position(vc_at, table, block_size, p + AHEAD - ctx, row, g_lo, g_hi, hd)
        keys = carray(ptr(kc_at + (table[p // block_size] * block_size + p % block_size) * row * 4), (kvh, hd),
                      np.float32)
        for g in range(g_lo, g_hi):
            k = keys[g]
            for h in range(g * group, (g + 1) * group):
                qh, s = q[h], np.float32(0.0)
                for d in range(hd):
                    s += qh[d] * k[d]
                scores[h, p] = s * scale
    softmax_heads(scores, h_lo, h_hi)
    for h in range(h_lo, h_hi):
        for d in range(hd):
            out[h, d] = np.float32(0.0)
    for p in range(ctx):                           # out_h = sum_p softmax[h, p] v_p(h // group)
        if p + AHEAD < ctx:
            prefetch_position(vc_at, table, block_size, p + AHEAD, row, g_lo, g_hi, hd)
        values = carray(ptr(vc_at + (table[p // block_size] * block_size + p % block_size) * row * 4), (kvh, hd),
                        np.float32)
        for g in range(g_lo, g_hi):
            v = values[g]
            for h in range(g * group, (g + 1) * group):
                oh, w = out[h], scores[h, p]
                for d in range(hd):
                    oh[d] += w * v[d]


attend_one = kernel(attend_one)      # not inlined: compiled once for its two callers below


@kernel
def attend_k(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd):
    attend_one(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd, 0, kvh)


# attend_heads_team's data: the int64 fields of _bf16_decode_row_jit's, in its order (HEADS_FIELDS).
_N_HEADS_FIELDS = len(HEADS_FIELDS)


def attend_heads_team(data):
    """attend_one as an OpenMP team's body: share i of ``shares`` holds key heads kvh * i // shares
    up to kvh * (i + 1) // shares, and team thread t takes shares t, t + size..."""
    (thread_num, team_size, q_at, kc_at, vc_at, table_at, table_len, block_size, ctx, out_at, heads, kvh, hd,
     shares) = carray(data, (_N_HEADS_FIELDS,), np.int64)
    table = carray(ptr(table_at), (table_len,), np.int64)
    for share in range(call_int(thread_num), shares, call_int(team_size)):
        attend_one(q_at, kc_at, vc_at, table, block_size, ctx, out_at, heads, kvh, hd,
                   kvh * share // shares, kvh * (share + 1) // shares)


attend_heads_team = kernel(attend_heads_team, c_signature=types.void(types.voidptr))


@kernel
def silu_mul_k(gate_up_at, out_at, n):
    gate_up, out = carray(ptr(gate_up_at), (2 * n,), np.float32), carray(ptr(out_at), (n,), np.float32)
    c = 512                                        # the row in pieces whose scratch stays in L1
    t, e = np.empty(c, np.float32), np.empty(c, np.float32)
    sa, sb = np.empty(c, np.int32), np.empty(c, np.int32)
    for lo in range(0, n, c):
        m = min(c, n - lo)
        for i in range(m):
            t[i] = -gate_up[lo + i]
        exp_into(t[:m], e[:m], sa[:m], sb[:m])
        for i in range(m):                         # silu(gate) * up
            out[lo + i] = gate_up[lo + i] / (np.float32(1.0) + e[i]) * gate_up[n + lo + i]
