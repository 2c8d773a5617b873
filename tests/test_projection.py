"""oneDNN-packed bfloat16 projections give exactly what the plain path gives (F.linear, through
cpu_bf16 where the CPU emulates bfloat16); float32 projections through oneDNN (non-Intel x86)
agree with F.linear to float32 rounding and leave greedy tokens unchanged."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_engine_parity import clip

import engine
from engine.network import cpu_bf16
from engine.network import projection
from engine.network.projection import Projection, _packing_works, onednn_float32


@pytest.mark.parametrize("rows", [1, 5, 16, 300])
def test_packed_equals_plain(rows):
    w = torch.randn(192, 64).to(torch.bfloat16)
    x = torch.randn(rows, 64).to(torch.bfloat16)
    proj = Projection.for_device(w.clone())
    if _packing_works():
        assert proj.packed is not None and proj.weight is None
    assert torch.equal(proj(x), cpu_bf16.linear(x, w))


def test_float32_is_never_packed():
    assert Projection.for_device(torch.randn(8, 8)).packed is None


def test_bfloat16_engine_tokens_equal_unpacked(tiny_model_dir, monkeypatch):
    clips = [clip(s, i) for i, s in enumerate([1.0, 5.0, 9.0])]
    packed = engine.load(tiny_model_dir, dtype="bfloat16").generate(clips, max_new_tokens=16)
    monkeypatch.setattr(Projection, "for_device", classmethod(lambda cls, w: cls(w)))
    plain = engine.load(tiny_model_dir, dtype="bfloat16").generate(clips, max_new_tokens=16)
    assert packed == plain


@pytest.mark.parametrize("rows", [1, 2, 5, 16, 32, 33, 300])
def test_float32_route_agrees_with_f_linear(rows):
    w, x = torch.randn(192, 64), torch.randn(rows, 64)
    proj = Projection.for_device(w)
    assert proj.onednn == onednn_float32() and proj.weight is w      # the plain weight, not a copy
    torch.testing.assert_close(proj(x), F.linear(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(proj(x.t().contiguous().t()), F.linear(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vendor, machine, expected", [
    ("GenuineIntel", "x86_64", False), ("", "x86_64", False), ("AuthenticAMD", "aarch64", False)])
def test_float32_route_stays_on_mkl_where_it_was_not_measured(monkeypatch, vendor, machine, expected):
    monkeypatch.setattr(projection, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(projection.platform, "machine", lambda: machine)
    assert onednn_float32.__wrapped__() is expected


def test_onednn_pads_rows_to_a_power_of_two(monkeypatch):
    """Few row counts reach oneDNN (it keeps buffers per row count), and padding changes no row."""
    seen, real = [], projection._onednn_mm
    monkeypatch.setattr(projection, "_onednn_mm", lambda x, w: seen.append(x.shape[0]) or real(x, w))
    w = torch.randn(48, 16)
    for rows in range(1, 33):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(projection.onednn_linear(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5)
    assert sorted(set(seen)) == [1, 2, 4, 8, 16, 32]


def test_float32_route_on_amd():
    projection.onednn_float32.cache_clear()
    try:
        on_amd = projection.cpu_vendor() == "AuthenticAMD"
        if on_amd:
            assert onednn_float32(), "this AMD CPU should take oneDNN's float32 GEMMs"
    finally:
        projection.onednn_float32.cache_clear()


def test_float32_engine_tokens_equal_the_mkl_route(tiny_model_dir, monkeypatch):
    clips = [clip(s, i) for i, s in enumerate([1.0, 5.0, 9.0])]
    routed = engine.load(tiny_model_dir, dtype="float32").generate(clips, max_new_tokens=16)
    monkeypatch.setattr(projection, "onednn_float32", lambda: False)
    plain = engine.load(tiny_model_dir, dtype="float32").generate(clips, max_new_tokens=16)
    assert routed == plain
