"""Fused residual add + RMSNorm, rounding exactly like transformers' Qwen3RMSNorm.

A decoder layer does ``residual = x + residual`` followed by ``norm(residual)`` twice.
Unfused, the sum makes a round trip through memory between the two ops; here one
program per token reads x and residual once and writes both outputs.

The rounding points follow Qwen3RMSNorm so the fused path reproduces the eager model:
the sum is rounded to the activation dtype (torch adds in that dtype), the statistics
and scaling run in float32, the result is cast back to the activation dtype and only
then multiplied by the weight (in the promoted dtype of weight and activation).
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

__all__ = [
    "rms_norm_residual",
    "rms_norm_residual_cpu",
    "rms_norm_residual_reference",
    "rms_norm_residual_triton",
]

_ACT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# One row must fit in one program's registers; Qwen3 hidden sizes are far below this.
_MAX_BLOCK = 65536


def _check(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor) -> None:
    # Shared by reference and launcher so CPU and CUDA reject the same inputs.
    if x.dim() != 2:
        raise ValueError(f"x must be [tokens, hidden], got shape {tuple(x.shape)}")
    if x.dtype not in _ACT_DTYPES:
        raise ValueError(f"x dtype {x.dtype} not supported; expected one of {_ACT_DTYPES}")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous")
    if residual is not None:
        if residual.shape != x.shape:
            raise ValueError(f"residual shape {tuple(residual.shape)} != x shape {tuple(x.shape)}")
        if residual.dtype != x.dtype:
            raise ValueError(f"residual dtype {residual.dtype} != x dtype {x.dtype}")
        if not residual.is_contiguous():
            raise ValueError("residual must be contiguous")
        if residual.device != x.device:
            raise ValueError(f"residual on {residual.device}, x on {x.device}")
    if weight.dim() != 1 or weight.shape[0] != x.shape[1]:
        raise ValueError(f"weight must be [hidden={x.shape[1]}], got shape {tuple(weight.shape)}")
    if weight.dtype not in _ACT_DTYPES:
        raise ValueError(f"weight dtype {weight.dtype} not supported")
    if not weight.is_contiguous():
        raise ValueError("weight must be contiguous")
    if weight.device != x.device:
        raise ValueError(f"weight on {weight.device}, x on {x.device}")


def rms_norm_residual_reference(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain torch statement of the math: (weight * rmsnorm(x + residual), x + residual).

    x, residual: [tokens, hidden]; weight: [hidden]. With residual None the second
    output is x itself (no copy).
    """
    _check(x, residual, weight)
    new_residual = x if residual is None else x + residual  # rounded to x.dtype
    h = new_residual.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype), new_residual


def rms_norm_residual_cpu(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference bit for bit, without its layout check (the CPU decoder checks once per step),
    in three torch calls instead of eight: ``torch.rms_norm`` without a weight widens to float32,
    scales by rsqrt(mean(h^2) + eps) and rounds back, as the reference does step by step (tested
    over shapes and dtypes in tests/test_rmsnorm_cpu.py). A decode step calls this 57 times."""
    new_residual = x if residual is None else x + residual  # rounded to x.dtype
    return weight * torch.rms_norm(new_residual, (x.shape[-1],), None, eps), new_residual


if triton is not None:

    @triton.jit
    def _rms_norm_residual_kernel(
        x_ptr,  # [tokens, hidden]
        res_ptr,  # [tokens, hidden], unused without residual
        w_ptr,  # [hidden]
        out_ptr,  # [tokens, hidden] in promote(weight, x) dtype
        new_res_ptr,  # [tokens, hidden], unused without residual
        n_cols,
        eps,
        HAS_RESIDUAL: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        # int64 row offset: tokens * hidden can pass 2**31 in long prefills.
        row = tl.program_id(0).to(tl.int64) * n_cols
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row + cols, mask=mask, other=0.0)
        act: tl.constexpr = x_ptr.dtype.element_ty
        h = x.to(tl.float32)
        if HAS_RESIDUAL:
            r = tl.load(res_ptr + row + cols, mask=mask, other=0.0)
            # torch adds in the activation dtype: round the sum before normalising it.
            h = round_to(h + r.to(tl.float32), act)
            tl.store(new_res_ptr + row + cols, h.to(act), mask=mask)
        # Masked lanes are 0, so they add nothing to the sum; divide by the true width.
        var = tl.sum(h * h, axis=0) / n_cols
        rstd = tl.rsqrt(var + eps)
        # Qwen3RMSNorm casts to the input dtype *before* the weight multiply.
        normed = round_to(h * rstd, act)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        out_dtype: tl.constexpr = out_ptr.dtype.element_ty
        tl.store(out_ptr + row + cols, round_to(w * normed, out_dtype).to(out_dtype), mask=mask)


def _num_warps(block: int) -> int:
    # Wider rows get more warps so each thread keeps a handful of elements.
    if block >= 32768:
        return 32
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def rms_norm_residual_triton(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton launcher; same contract as rms_norm_residual_reference."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    _check(x, residual, weight)
    tokens, hidden = x.shape
    block = triton.next_power_of_2(hidden)
    if block > _MAX_BLOCK:
        raise ValueError(f"hidden={hidden} exceeds the kernel's limit of {_MAX_BLOCK}")
    out = torch.empty((tokens, hidden), dtype=torch.promote_types(weight.dtype, x.dtype),
                      device=x.device)
    new_residual = x if residual is None else torch.empty_like(x)
    if tokens == 0:
        return out, new_residual
    _rms_norm_residual_kernel[(tokens,)](
        x,
        x if residual is None else residual,
        weight,
        out,
        new_residual,
        hidden,
        float(eps),
        HAS_RESIDUAL=residual is not None,
        BLOCK=block,
        num_warps=_num_warps(block),
    )
    return out, new_residual


def rms_norm_residual(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fused ``new_residual = x + residual; normed = weight * rmsnorm(new_residual)``.

    x, residual: [tokens, hidden] contiguous, same dtype; weight: [hidden].
    Returns (normed, new_residual); with residual None, new_residual is x.
    Uses Triton where triton_available(x.device), the torch reference elsewhere.
    """
    if triton_available(x.device):
        return rms_norm_residual_triton(x, residual, weight, eps)
    return rms_norm_residual_reference(x, residual, weight, eps)
