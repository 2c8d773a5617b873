"""The compiled row scaling for fbgemm's fp16 weights against its torch reference."""
from __future__ import annotations

import pytest
import torch

from asr_kernels import fp16_scale
from asr_kernels.fp16_scale import scale_reference, scale_rows

pytest.importorskip("numba")


def bf16_weight(n: int, k: int, seed: int = 0, scale: float = 0.02) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=g) * scale).bfloat16()


def assert_same(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    got, want = scale_rows(weight), scale_reference(weight)
    assert (got is None) == (want is None)
    if got is not None:
        assert got[0].dtype == got[1].dtype == torch.float32
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    return got


def test_the_compiled_pass_compiles_here():
    assert fp16_scale._compiled()


@pytest.mark.parametrize("shape", [(6144, 1024), (1024, 3072), (64, 2), (7, 5), (1, 1), (130, 33)])
@pytest.mark.parametrize("threads", [1, 2])
def test_rows_scale_as_the_reference_scales_them(shape, threads, monkeypatch):
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)      # shares of rows, or one
    w = bf16_weight(*shape, seed=shape[0])
    w[0, : min(2, shape[1])] = torch.tensor([0.0, -3e-5])[: min(2, shape[1])]
    if shape[0] > 2:
        w[-1] = 0.0                  # a row of zeros keeps a scale of one
        w[1] *= 2.0 ** -30           # rows of any magnitude: each gets its own power of two
    scaled, inverse = assert_same(w)
    assert torch.equal(scaled.half().float() * inverse[:, None], w.float())       # exact both ways
    top = scaled.abs().amax(dim=1)
    assert bool(((top >= 2 ** 14) & (top < 2 ** 15) | (top == 0)).all())


@pytest.mark.parametrize("spoiler", ["inf", "nan", "range beyond float16", "scale beyond float32",
                                     "subnormal largest", "large values", "range beyond float16, tiny row"])
def test_what_float16_cannot_hold_is_refused_as_the_reference_refuses_it(spoiler):
    w = bf16_weight(128, 96, seed=3)
    if spoiler == "inf":
        w[70, 5] = float("-inf")
    elif spoiler == "nan":
        w[127, 95] = float("nan")
    elif spoiler == "range beyond float16":
        w[9, :2] = torch.tensor([1.0, 2.0 ** -40])
    elif spoiler == "scale beyond float32":
        w[100] = bf16_weight(1, 96, scale=1e-36)[0]       # its 2^e would be 2^132
    elif spoiler == "subnormal largest":
        w[100] = 0.0
        w[100, 3] = 2.0 ** -130
    elif spoiler == "range beyond float16, tiny row":
        w[64] = 0.0               # 2^e = 2^106: 2^e * 2^24 is not a float32, so the check must not fold them
        w[64, :2] = torch.tensor([2.0 ** -92, 2.0 ** -126 + 2.0 ** -133], dtype=torch.float64).float()
    else:
        w[64] = bf16_weight(1, 96, scale=1e30)[0]        # scaled down: still exact
    got = assert_same(w)
    assert (got is not None) == (spoiler == "large values")


def test_other_dtypes_take_the_reference():
    w = bf16_weight(64, 32).float()
    got = scale_rows(w)
    want = scale_reference(w)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert scale_rows(torch.randn(64, 32)) is None        # float32 values with full mantissas


def test_a_buffer_given_is_filled_and_reused():
    w = bf16_weight(192, 64, seed=9)
    buffer = torch.full((192 * 64 + 100,), float("nan"))          # longer than needed, holding junk
    scaled, inverse = scale_rows(w, out=buffer)
    assert scaled.data_ptr() == buffer.data_ptr() and scaled.shape == (192, 64)
    want = scale_reference(w)
    assert torch.equal(scaled, want[0]) and torch.equal(inverse, want[1])
    again, _ = scale_rows(bf16_weight(64, 64, seed=10), out=buffer)                # a smaller weight after it
    assert again.data_ptr() == buffer.data_ptr() and torch.equal(again, scale_reference(bf16_weight(64, 64, seed=10))[0])
    for bad in (torch.empty(10), torch.empty(192 * 64, dtype=torch.float16), torch.empty(2 * 192 * 64)[::2]):
        with pytest.raises(ValueError, match="out must be"):
            scale_rows(w, out=bad)
