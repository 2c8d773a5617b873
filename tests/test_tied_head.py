"""A tied bfloat16 LM head reads its own oneDNN-packed copy: the same logits and greedy tokens as
plain F.linear, while the token embedding keeps reading the plain matrix it shares."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from checkpoints import build_checkpoint
from platforms import on_platform
from test_engine_parity import clip

import engine
from engine.network import platform
from engine.network.choose_linear import LinearChooser
from engine.network.linear_methods import PackedBf16Linear, PlainLinear

needs_packing = pytest.mark.skipif(not platform.current().onednn_bf16_packing,
                                   reason="this torch build has no oneDNN packing: the plain head runs")


@needs_packing
def test_tied_bf16_head_is_packed_and_leaves_the_shared_matrix_alone():
    w = torch.randn(300, 64).to(torch.bfloat16)
    before = w.clone()
    head = LinearChooser(None, None, compact=False)("head", w, tied=True)
    assert type(head) is PackedBf16Linear
    x = torch.randn(3, 64).to(torch.bfloat16)
    assert torch.equal(head(x), F.linear(x, w))
    assert torch.equal(w, before)          # the embedding's matrix is untouched


def test_without_packing_the_tied_head_shares_the_matrix(monkeypatch):
    on_platform(monkeypatch, onednn_bf16_packing=False)
    w = torch.randn(300, 64).to(torch.bfloat16)
    head = LinearChooser(None, None, compact=False)("head", w, tied=True)
    assert type(head) is PlainLinear and head.weight is w


@needs_packing
def test_tied_bf16_engine_tokens_equal_the_plain_head(tmp_path, monkeypatch):
    model = build_checkpoint(tmp_path / "tied-bf16", seed=7, tie=True, dtype=torch.bfloat16)
    clips = [clip(s, i) for i, s in enumerate([2.0, 6.0])]
    eng = engine.load(model, device="cpu", dtype="bfloat16")
    assert type(eng.runner.net.head) is PackedBf16Linear
    assert eng.runner.net.language_model.embed_tokens.weight.numel() > 0
    packed = eng.generate(clips, max_new_tokens=12)
    del eng
    monkeypatch.setattr(LinearChooser, "__call__", _plain_head(LinearChooser.__call__))
    plain = engine.load(model, device="cpu", dtype="bfloat16").generate(clips, max_new_tokens=12)
    assert packed == plain and all(len(t) > 1 for t in packed)


def _plain_head(call):
    def plain(self, name, *weights, tied=False):
        if tied:
            return PlainLinear(weights[0])
        return call(self, name, *weights, tied=tied)
    return plain
