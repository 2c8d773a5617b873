"""Fused Qwen3 attention prologue: per-head QK RMSNorm, RoPE, and paged KV-cache write.

Between the qkv projection and attention, Qwen3 runs q_norm/k_norm per head, rotates q
and k, and the engine stores k and v into the paged cache. Eagerly that is a dozen
small kernels and as many round trips through memory; here one program per token
reads its q, k and v heads once, writes the rotated q to q_out and the rotated k plus
the raw v straight into the cache slot.

The math (and every rounding point) is transformers' Qwen3: RMSNorm in float32, cast
to the activation dtype, times the weight; then ``x * cos + rotate_half(x) * sin`` in
the activation dtype, each product and the sum rounded as eager torch rounds them.
"""
from __future__ import annotations

import torch

from asr_kernels import triton_available
from asr_kernels._rounding import round_to

try:
    import triton
    import triton.language as tl
except Exception:  # no triton on this platform: only the reference is usable
    triton = None
    tl = None

__all__ = ["qk_norm_rope", "qk_norm_rope_reference", "qk_norm_rope_triton", "qk_norm_rope_cpu", "signed_sin"]

_ACT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# One token's heads form one register tile; Qwen3 (<= 64 heads x 128) stays well below.
_MAX_TILE = 32768


def _check(q, k, v, q_norm_weight, k_norm_weight, cos, sin, k_cache, v_cache, slot_mapping):
    # Shared by reference and launcher so CPU and CUDA reject the same inputs.
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 3:
            raise ValueError(f"{name} must be [tokens, heads, head_dim], got {tuple(t.shape)}")
    tokens, _, head_dim = q.shape
    if k.shape[0] != tokens or k.shape[2] != head_dim:
        raise ValueError(f"k shape {tuple(k.shape)} does not match q shape {tuple(q.shape)}")
    if v.shape != k.shape:
        raise ValueError(f"v shape {tuple(v.shape)} != k shape {tuple(k.shape)}")
    if head_dim % 2:
        raise ValueError(f"head_dim must be even for rotate_half, got {head_dim}")
    if q.dtype not in _ACT_DTYPES:
        raise ValueError(f"dtype {q.dtype} not supported; expected one of {_ACT_DTYPES}")
    # One dtype throughout: the cache stores exactly what eager attention would see, and
    # a float32 norm weight would silently promote the eager result to float32.
    named = (("k", k), ("v", v), ("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight),
             ("cos", cos), ("sin", sin), ("k_cache", k_cache), ("v_cache", v_cache))
    for name, t in named:
        if t.dtype != q.dtype:
            raise ValueError(f"{name} dtype {t.dtype} != q dtype {q.dtype}")
    for name, t in named + (("slot_mapping", slot_mapping),):
        if t.device != q.device:
            raise ValueError(f"{name} on {t.device}, q on {q.device}")
    # q, k, v may be views into one qkv projection output: any token/head strides work
    # as long as each head's head_dim values are adjacent.
    for name, t in (("q", q), ("k", k), ("v", v), ("cos", cos), ("sin", sin)):
        if t.stride(-1) != 1:
            raise ValueError(f"{name} must be contiguous in its last dimension")
    for name, w in (("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight)):
        if w.shape != (head_dim,) or not w.is_contiguous():
            raise ValueError(f"{name} must be a contiguous [{head_dim}], got {tuple(w.shape)}")
    for name, t in (("cos", cos), ("sin", sin)):
        if t.shape != (tokens, head_dim):
            raise ValueError(f"{name} must be [tokens={tokens}, head_dim={head_dim}], got {tuple(t.shape)}")
    if k_cache.dim() != 4 or k_cache.shape[2:] != k.shape[1:]:
        raise ValueError(f"k_cache must be [num_blocks, block_size, {k.shape[1]}, {head_dim}], "
                         f"got {tuple(k_cache.shape)}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache shape {tuple(v_cache.shape)} != k_cache shape {tuple(k_cache.shape)}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("k_cache and v_cache must be contiguous (flat slot addressing)")
    if slot_mapping.shape != (tokens,) or slot_mapping.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"slot_mapping must be int64 [tokens={tokens}], "
                         f"got {slot_mapping.dtype} {tuple(slot_mapping.shape)}")
    if not slot_mapping.is_contiguous():
        raise ValueError("slot_mapping must be contiguous")


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def qk_norm_rope_reference(q, k, v, q_norm_weight, k_norm_weight, eps, cos, sin,
                           k_cache, v_cache, slot_mapping) -> torch.Tensor:
    """Plain torch statement of the math; same contract as qk_norm_rope."""
    _check(q, k, v, q_norm_weight, k_norm_weight, cos, sin, k_cache, v_cache, slot_mapping)

    def norm(x, w):  # x: [tokens, heads, head_dim]
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(x.dtype)

    c, s = cos[:, None, :], sin[:, None, :]  # [tokens, 1, head_dim]: broadcast over heads
    def rope(x):  # x: [tokens, heads, head_dim], in the activation dtype throughout
        return x * c + _rotate_half(x) * s

    q_out = rope(norm(q, q_norm_weight))
    k_rot = rope(norm(k, k_norm_weight))
    n_kv, head_dim = k.shape[1:]
    slots = slot_mapping.long()
    if bool((slots < 0).any()):  # -1 marks padding rows: they write nothing
        valid = slots >= 0
        slots, k_rot, v = slots[valid], k_rot[valid], v[valid]
    # index_copy_ writes rows in place; cheaper than boolean-mask index_put on every step.
    k_cache.view(-1, n_kv, head_dim).index_copy_(0, slots, k_rot.to(k_cache.dtype))
    v_cache.view(-1, n_kv, head_dim).index_copy_(0, slots, v.to(v_cache.dtype))
    return q_out.contiguous()


def signed_sin(sin: torch.Tensor) -> torch.Tensor:
    """sin [tokens, head_dim] with rotate_half's sign folded in: rotate_half(x) * sin equals
    roll(x) * signed_sin(sin) bit for bit ((-a) * b and a * (-b) round alike)."""
    half = sin.shape[-1] // 2
    return torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)


def qk_norm_rope_cpu(qk, qk_norm_weight, eps, cos, sin_signed, n_heads, v, k_cache, v_cache, slots, valid=None):
    """The reference's math, bit for bit, in half the torch calls: for CPU decode steps, where a
    layer's dozen small ops cost more than their arithmetic.

    qk: [tokens, n_heads + n_kv_heads, head_dim], the adjacent q and k parts of one qkv output,
    normed and rotated together; qk_norm_weight: [n_heads + n_kv_heads, head_dim] (q_norm's weight
    on the q heads, k_norm's on the k heads); cos, sin_signed: [tokens, head_dim] (``signed_sin``),
    or their [tokens, 1, head_dim] views, which a caller calling once per layer makes once per step;
    slots: [valid tokens] int64 cache slots; valid: None, or the [tokens] mask of the non-padding
    tokens whose k and v are written (as the reference skips slot -1).
    Inputs are trusted (checked once per step by the caller with ``_check``). Returns q_out."""
    # torch.rms_norm without a weight is the reference's float32 norm, rounded back (see
    # asr_kernels/rmsnorm.py); rolling by half a head is the reference's half swap, as one op.
    n = qk_norm_weight * torch.rms_norm(qk, (qk.shape[-1],), None, eps)
    rolled = n.roll(n.shape[-1] // 2, dims=-1)
    if cos.dim() == 2:                                   # broadcast over the heads
        cos, sin_signed = cos[:, None, :], sin_signed[:, None, :]
    out = n * cos + rolled * sin_signed
    n_kv, head_dim = v.shape[1:]
    k_rot = out[:, n_heads:]
    if valid is not None:
        k_rot, v = k_rot[valid], v[valid]
    k_cache.view(-1, n_kv, head_dim).index_copy_(0, slots, k_rot.to(k_cache.dtype))
    v_cache.view(-1, n_kv, head_dim).index_copy_(0, slots, v.to(v_cache.dtype))
    return out[:, :n_heads].contiguous()


if triton is not None:

    @triton.jit
    def _norm_rope_tile(x_ptr, stride_h, n_heads, w_ptr, cos, sin, eps, head_dim,
                        BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
        """One token's heads -> [BLOCK_H, BLOCK_D] float32 tile, normed and rotated,
        every value already rounded to the activation dtype."""
        act: tl.constexpr = x_ptr.dtype.element_ty
        heads = tl.arange(0, BLOCK_H)[:, None]
        d = tl.arange(0, BLOCK_D)[None, :]
        half = head_dim // 2
        # rotate_half(x)[d] = -x[d + half] for the first half, x[d - half] for the second.
        # Normalising is per head, so rotate_half(norm(x)) is norm applied to the
        # permuted load: load x twice rather than shuffling registers.
        d_rot = tl.where(d < half, d + half, d - half)
        sign = tl.where(d < half, -1.0, 1.0)
        mask = (heads < n_heads) & (d < head_dim)
        x = tl.load(x_ptr + heads * stride_h + d, mask=mask, other=0.0).to(tl.float32)
        x_rot = tl.load(x_ptr + heads * stride_h + d_rot, mask=mask, other=0.0).to(tl.float32)
        # Masked lanes are 0: they add nothing to the sum; divide by the true head_dim.
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / head_dim + eps)[:, None]
        w = tl.load(w_ptr + d, mask=d < head_dim, other=0.0).to(tl.float32)
        w_rot = tl.load(w_ptr + d_rot, mask=d < head_dim, other=0.0).to(tl.float32)
        # Qwen3RMSNorm: float32 scale, cast to the activation dtype, then the weight.
        n = round_to(w * round_to(x * rstd, act), act)
        n_rot = round_to(w_rot * round_to(x_rot * rstd, act), act)
        # Eager RoPE rounds each product and the sum to the activation dtype.
        return round_to(round_to(n * cos, act) + round_to(sign * n_rot * sin, act), act)

    @triton.jit
    def _qk_norm_rope_kernel(
        q_ptr, k_ptr, v_ptr,  # [tokens, heads, head_dim], last dim contiguous
        qw_ptr, kw_ptr,  # [head_dim]
        cos_ptr, sin_ptr,  # [tokens, head_dim], last dim contiguous
        k_cache_ptr, v_cache_ptr,  # [num_blocks, block_size, n_kv_heads, head_dim]
        slot_ptr,  # [tokens]
        q_out_ptr,  # [tokens, n_heads, head_dim] contiguous
        stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh, stride_cos, stride_sin,
        n_heads, n_kv_heads, head_dim, eps,
        BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_D: tl.constexpr,
    ):
        # int64 token index: tokens * stride can pass 2**31 in long prefills.
        t = tl.program_id(0).to(tl.int64)
        d = tl.arange(0, BLOCK_D)[None, :]
        cos = tl.load(cos_ptr + t * stride_cos + d, mask=d < head_dim, other=0.0).to(tl.float32)
        sin = tl.load(sin_ptr + t * stride_sin + d, mask=d < head_dim, other=0.0).to(tl.float32)

        q = _norm_rope_tile(q_ptr + t * stride_qt, stride_qh, n_heads, qw_ptr, cos, sin, eps,
                            head_dim, BLOCK_HQ, BLOCK_D)
        hq = tl.arange(0, BLOCK_HQ)[:, None]
        q_dst = q_out_ptr + t * n_heads * head_dim + hq * head_dim + d
        tl.store(q_dst, q.to(q_out_ptr.dtype.element_ty), mask=(hq < n_heads) & (d < head_dim))

        # Contiguous cache: block_id * block_size + offset is the row of the flattened
        # [num_blocks * block_size, n_kv_heads, head_dim] view. A -1 slot marks a
        # padding row: skip k and v entirely, nothing of it may reach the cache.
        slot = tl.load(slot_ptr + t).to(tl.int64)
        if slot >= 0:
            k = _norm_rope_tile(k_ptr + t * stride_kt, stride_kh, n_kv_heads, kw_ptr, cos, sin,
                                eps, head_dim, BLOCK_HK, BLOCK_D)
            hk = tl.arange(0, BLOCK_HK)[:, None]
            kv_mask = (hk < n_kv_heads) & (d < head_dim)
            v = tl.load(v_ptr + t * stride_vt + hk * stride_vh + d, mask=kv_mask, other=0.0)
            cache_off = slot * n_kv_heads * head_dim + hk * head_dim + d
            tl.store(k_cache_ptr + cache_off, k.to(k_cache_ptr.dtype.element_ty), mask=kv_mask)
            tl.store(v_cache_ptr + cache_off, v, mask=kv_mask)


def qk_norm_rope_triton(q, k, v, q_norm_weight, k_norm_weight, eps, cos, sin,
                        k_cache, v_cache, slot_mapping) -> torch.Tensor:
    """Triton launcher; same contract as qk_norm_rope.

    Slots are not range-checked on the device (that would need a host sync): the
    caller guarantees each slot is -1 or below num_blocks * block_size.
    """
    if triton is None:
        raise RuntimeError("triton is not installed")
    _check(q, k, v, q_norm_weight, k_norm_weight, cos, sin, k_cache, v_cache, slot_mapping)
    tokens, n_heads, head_dim = q.shape
    n_kv_heads = k.shape[1]
    block_d = triton.next_power_of_2(head_dim)
    block_hq, block_hk = triton.next_power_of_2(n_heads), triton.next_power_of_2(n_kv_heads)
    if block_hq * block_d > _MAX_TILE:
        raise ValueError(f"{n_heads} heads x {head_dim} exceed the kernel's tile limit {_MAX_TILE}")
    q_out = torch.empty((tokens, n_heads, head_dim), dtype=q.dtype, device=q.device)
    if tokens == 0:
        return q_out
    _qk_norm_rope_kernel[(tokens,)](
        q, k, v, q_norm_weight, k_norm_weight, cos, sin, k_cache, v_cache, slot_mapping, q_out,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        cos.stride(0), sin.stride(0),
        n_heads, n_kv_heads, head_dim, float(eps),
        BLOCK_HQ=block_hq, BLOCK_HK=block_hk, BLOCK_D=block_d,
        num_warps=8 if block_hq * block_d >= 4096 else 4,
    )
    return q_out


def qk_norm_rope(q, k, v, q_norm_weight, k_norm_weight, eps, cos, sin,
                 k_cache, v_cache, slot_mapping) -> torch.Tensor:
    """Qwen3 QK-norm + RoPE for q and k; writes rotated k and raw v into the paged cache.

    q: [tokens, n_heads, head_dim]; k, v: [tokens, n_kv_heads, head_dim] (strided views
    of one qkv output are fine, the last dim must be contiguous); q_norm_weight,
    k_norm_weight: [head_dim]; cos, sin: [tokens, head_dim], gathered at each token's
    position; k_cache, v_cache: [num_blocks, block_size, n_kv_heads, head_dim]
    contiguous, updated in place; slot_mapping: [tokens] int64 flat slots
    (block_id * block_size + offset), -1 for padding rows that write nothing.
    All floating tensors share one dtype. Returns q_out [tokens, n_heads, head_dim].
    Uses Triton where triton_available(q.device), the torch reference elsewhere.
    """
    if triton_available(q.device):
        return qk_norm_rope_triton(q, k, v, q_norm_weight, k_norm_weight, eps, cos, sin,
                                   k_cache, v_cache, slot_mapping)
    return qk_norm_rope_reference(q, k, v, q_norm_weight, k_norm_weight, eps, cos, sin,
                                  k_cache, v_cache, slot_mapping)
