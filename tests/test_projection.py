"""oneDNN-packed bfloat16 projections give exactly what the plain path gives (F.linear, through
cpu_bf16 where the CPU emulates bfloat16)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_engine_parity import clip

import engine
from engine.network import cpu_bf16
from engine.network.projection import Projection, _packing_works


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
