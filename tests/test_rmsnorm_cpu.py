"""The CPU decoder's fused residual add + RMSNorm (``rms_norm_residual_cpu``: ``torch.rms_norm``
without a weight, then the weight) is the plain torch reference bit for bit, over the shapes a
step gives it (a decode row, a few rows, a prompt; Qwen3's hidden and head sizes and an odd
width), every activation dtype, with and without a residual, and a float32 weight that promotes.
A difference here would change bfloat16 transcripts and could break float32 parity."""
from __future__ import annotations

import pytest
import torch

from asr_kernels.rmsnorm import rms_norm_residual_cpu, rms_norm_residual_reference

EPS = 1e-6
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@pytest.mark.parametrize("tokens", [1, 3, 146])
@pytest.mark.parametrize("hidden", [128, 1000, 1024])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "no-residual"])
def test_rms_norm_residual_cpu_is_the_reference_bit_for_bit(tokens, hidden, dtype, with_residual):
    g = torch.Generator().manual_seed(tokens * 7919 + hidden)
    x = (4 * torch.randn(tokens, hidden, generator=g)).to(dtype)
    residual = torch.randn(tokens, hidden, generator=g).to(dtype) if with_residual else None
    weight = (1 + 0.5 * torch.randn(hidden, generator=g)).to(dtype)
    out, new_residual = rms_norm_residual_cpu(x, residual, weight, EPS)
    ref_out, ref_residual = rms_norm_residual_reference(x, residual, weight, EPS)
    assert out.dtype == ref_out.dtype == dtype
    assert torch.equal(out, ref_out)
    assert torch.equal(new_residual, ref_residual)
    if not with_residual:
        assert new_residual is x


def test_rms_norm_residual_cpu_float32_weight_promotes_like_the_reference():
    g = torch.Generator().manual_seed(1)
    x, r = torch.randn(5, 1024, generator=g).bfloat16(), torch.randn(5, 1024, generator=g).bfloat16()
    weight = torch.randn(1024, generator=g)
    out, _ = rms_norm_residual_cpu(x, r, weight, EPS)
    ref, _ = rms_norm_residual_reference(x, r, weight, EPS)
    assert out.dtype == ref.dtype == torch.float32
    assert torch.equal(out, ref)


def test_rms_norm_residual_cpu_tiny_and_huge_values():
    """Rows near zero (eps dominates) and with large values (squares near float16's range) round alike."""
    for dtype in DTYPES:
        x = torch.tensor([[1e-4] * 64, [200.0] * 32 + [-200.0] * 32, [0.0] * 64]).to(dtype)
        weight = torch.linspace(-2, 2, 64).to(dtype)
        assert torch.equal(rms_norm_residual_cpu(x, None, weight, EPS)[0],
                           rms_norm_residual_reference(x, None, weight, EPS)[0])
