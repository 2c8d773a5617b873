"""Causal varlen attention over the paged KV cache, for CUDA without flash-attn.

One step packs rows of many requests on one token axis: decode rows (one query),
whole prompts, and chunks of long prompts whose earlier tokens already sit in the
cache. Each row's keys and values are read in place through its block table; the
metadata is the flash-attn varlen layout (cu_seqlens_q, cu_seqlens_k, block_table)
in device tensors, so a captured CUDA graph replays with new rows copied in.

The grid is static for a given (tokens, rows) bucket: ``cdiv(tokens, BLOCK_M) + rows``
query tiles per head. Row r's tiles start at ``cu_q[r] // BLOCK_M + r``, a strictly
increasing index, so a program finds its row by binary search and exits when its tile
lies past the row's queries (padding rows have none). Query i of a row with q_len
queries and ctx cached tokens sits at position ctx - q_len + i and sees keys 0..pos.

Softmax runs online in float32 (flash-attention 2); float32 inputs take IEEE dots,
not TF32, so the float32 engine stays close to the exact torch path.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from asr_kernels import interpret_mode, triton_available

try:
    import triton
    import triton.language as tl
except Exception:  # no triton on this platform: only the reference is usable
    triton = None
    tl = None

__all__ = ["paged_attention", "paged_attention_reference", "paged_attention_triton"]

_ACT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
BLOCK_M = 16   # query tile; tl.dot needs at least 16 rows
BLOCK_N = 32   # keys per inner step


def _check(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table) -> None:
    # Shared by reference and launcher so CPU and CUDA reject the same inputs.
    if q.dim() != 3 or q.stride(-1) != 1:
        raise ValueError(f"q must be [tokens, heads, head_dim], last dim contiguous; got {tuple(q.shape)}")
    if q.dtype not in _ACT_DTYPES:
        raise ValueError(f"dtype {q.dtype} not supported; expected one of {_ACT_DTYPES}")
    if k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"caches must be [blocks, block_size, kv_heads, head_dim] alike, got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("k_cache and v_cache must be contiguous")
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise ValueError(f"cache dtype {k_cache.dtype} != q dtype {q.dtype}")
    heads, head_dim = q.shape[1:]
    kv_heads = k_cache.shape[2]
    if k_cache.shape[3] != head_dim:
        raise ValueError(f"cache head_dim {k_cache.shape[3]} != q head_dim {head_dim}")
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not group evenly over {kv_heads} kv heads")
    rows = block_table.shape[0] if block_table.dim() == 2 else -1
    for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        if t.dtype != torch.int32 or t.shape != (rows + 1,) or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous int32 [rows + 1 = {rows + 1}], "
                             f"got {t.dtype} {tuple(t.shape)}")
    if block_table.dtype != torch.int32 or not block_table.is_contiguous():
        raise ValueError(f"block_table must be a contiguous int32 [rows, max_blocks], got {block_table.dtype}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache), ("cu_seqlens_q", cu_seqlens_q),
                    ("cu_seqlens_k", cu_seqlens_k), ("block_table", block_table)):
        if t.device != q.device:
            raise ValueError(f"{name} on {t.device}, q on {q.device}")


def paged_attention_reference(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table) -> torch.Tensor:
    """Plain torch statement of the math: per row, gather its keys through the block table
    and run causal SDPA with the queries at the end of the context.

    q: [tokens, heads, hd]; caches: [blocks, block_size, kv_heads, hd]; cu_seqlens_*: [rows + 1]
    int32; block_table: [rows, max_blocks] int32 -> [tokens, heads, hd]. Tokens past
    cu_seqlens_q[-1] (a bucket's padding) get zeros.
    """
    _check(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table)
    out = torch.zeros_like(q)
    block_size = k_cache.shape[1]
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for r in range(block_table.shape[0]):
        q0, q_len, ctx = cu_q[r], cu_q[r + 1] - cu_q[r], cu_k[r + 1] - cu_k[r]
        if q_len == 0:
            continue
        blocks = block_table[r, :-(-ctx // block_size)].long()
        k = k_cache[blocks].flatten(0, 1)[:ctx].transpose(0, 1)[None]    # [1, kv_heads, ctx, hd]
        v = v_cache[blocks].flatten(0, 1)[:ctx].transpose(0, 1)[None]
        qr = q[q0:q0 + q_len].transpose(0, 1)[None]                      # [1, heads, q_len, hd]
        mask = torch.arange(ctx, device=q.device)[None, :] <= torch.arange(ctx - q_len, ctx, device=q.device)[:, None]
        o = F.scaled_dot_product_attention(qr, k, v, attn_mask=mask, enable_gqa=True)
        out[q0:q0 + q_len] = o[0].transpose(0, 1)
    return out


# triton.jit reads TRITON_INTERPRET when it decorates, so this is what the kernel below runs on.
_INTERPRETED = interpret_mode()

if triton is not None:

    @triton.jit
    def _dot(a, b, IEEE: tl.constexpr, UPCAST: tl.constexpr):
        """a @ b with a float32 accumulator. IEEE: float32 inputs without TF32. UPCAST: 16-bit
        inputs widened first, for Triton's CPU interpreter, whose 16-bit dot returns garbage
        (widening is exact; only the accumulation order can differ from the GPU's)."""
        if UPCAST:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        elif IEEE:
            return tl.dot(a, b, input_precision="ieee")
        else:
            return tl.dot(a, b)

    @triton.jit
    def _paged_attention_kernel(
        q_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
        cu_q_ptr, cu_k_ptr, table_ptr,
        stride_qt, stride_qh, stride_ot, stride_oh,
        stride_cb, stride_cs, stride_ch,   # cache [blocks, block_size, kv_heads, hd]
        stride_tr,                         # block table row
        num_rows, scale,
        GROUP: tl.constexpr, CACHE_BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SEARCH_STEPS: tl.constexpr, IEEE: tl.constexpr,
        UPCAST: tl.constexpr,
    ):
        tile = tl.program_id(0)
        head = tl.program_id(1)
        kv_head = head // GROUP
        # The row whose tiles hold this one: the largest r with cu_q[r] // BLOCK_M + r <= tile.
        lo = 0
        hi = num_rows
        for _ in tl.static_range(SEARCH_STEPS):
            mid = (lo + hi) // 2
            go_right = tl.load(cu_q_ptr + mid) // BLOCK_M + mid <= tile
            lo = tl.where(go_right, mid, lo)
            hi = tl.where(go_right, hi, mid)
        row = lo
        q_start = tl.load(cu_q_ptr + row)
        q_len = tl.load(cu_q_ptr + row + 1) - q_start
        m0 = (tile - (q_start // BLOCK_M + row)) * BLOCK_M
        if m0 < q_len:
            ctx = tl.load(cu_k_ptr + row + 1) - tl.load(cu_k_ptr + row)
            offs_m = m0 + tl.arange(0, BLOCK_M)
            offs_d = tl.arange(0, BLOCK_D)
            m_mask = offs_m < q_len
            d_mask = offs_d < HEAD_DIM
            tok = (q_start + offs_m).to(tl.int64)
            q = tl.load(q_ptr + tok[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
                        mask=m_mask[:, None] & d_mask[None, :], other=0.0)
            q_pos = ctx - q_len + offs_m                                   # [BLOCK_M]
            m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
            l_i = tl.zeros([BLOCK_M], tl.float32)
            acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
            # Causal: no query of this tile sees past the last one's position.
            kv_end = tl.minimum(ctx, ctx - q_len + m0 + BLOCK_M)
            for n0 in range(0, kv_end, BLOCK_N):
                offs_n = n0 + tl.arange(0, BLOCK_N)
                n_mask = offs_n < kv_end
                block = tl.load(table_ptr + row * stride_tr + offs_n // CACHE_BLOCK, mask=n_mask, other=0)
                base = block.to(tl.int64) * stride_cb + (offs_n % CACHE_BLOCK) * stride_cs + kv_head * stride_ch
                kv_mask = n_mask[:, None] & d_mask[None, :]
                k = tl.load(k_cache_ptr + base[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)
                s = _dot(q, tl.trans(k), IEEE, UPCAST) * scale
                seen = n_mask[None, :] & (offs_n[None, :] <= q_pos[:, None])
                s = tl.where(seen, s, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, axis=1))
                m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)   # padding queries see nothing
                p = tl.exp(s - m_safe[:, None])
                alpha = tl.exp(m_i - m_safe)
                l_i = l_i * alpha + tl.sum(p, axis=1)
                v = tl.load(v_cache_ptr + base[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)
                acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, IEEE, UPCAST)
                m_i = m_new
            out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
            tl.store(out_ptr + tok[:, None] * stride_ot + head * stride_oh + offs_d[None, :],
                     out.to(out_ptr.dtype.element_ty), mask=m_mask[:, None] & d_mask[None, :])


def paged_attention_triton(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table) -> torch.Tensor:
    """Triton launcher; same contract as paged_attention_reference. No host syncs: the grid
    depends only on the shapes, so the call can be captured in a CUDA graph."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    _check(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table)
    tokens, heads, head_dim = q.shape
    rows = block_table.shape[0]
    out = torch.zeros_like(q)   # padding tokens: attended by nobody, output zero
    if tokens == 0 or rows == 0:
        return out
    grid = (triton.cdiv(tokens, BLOCK_M) + rows, heads)
    _paged_attention_kernel[grid](
        q, k_cache, v_cache, out, cu_seqlens_q, cu_seqlens_k, block_table,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_table.stride(0),
        rows, 1.0 / math.sqrt(head_dim),
        GROUP=heads // k_cache.shape[2], CACHE_BLOCK=k_cache.shape[1], HEAD_DIM=head_dim,
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        SEARCH_STEPS=max(1, rows.bit_length()), IEEE=q.dtype == torch.float32,
        UPCAST=_INTERPRETED and q.dtype != torch.float32,
    )
    return out


def paged_attention(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table) -> torch.Tensor:
    """Causal varlen attention of packed rows over their paged cache.

    q: [tokens, heads, head_dim] (last dim contiguous); k_cache, v_cache: [num_blocks,
    block_size, kv_heads, head_dim] contiguous; cu_seqlens_q, cu_seqlens_k: [rows + 1] int32
    (query tokens and cached tokens of each row, cumulative; padding rows repeat the last
    value); block_table: [rows, max_blocks] int32. Returns [tokens, heads, head_dim].
    Uses Triton where triton_available(q.device), the torch reference elsewhere.
    """
    if triton_available(q.device):
        return paged_attention_triton(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table)
    return paged_attention_reference(q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, block_table)
