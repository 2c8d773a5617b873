"""bfloat16 GEMMs of many rows run in float32 on CPUs that emulate bfloat16; nothing else changes."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.network import ops as cpu_bf16


def _inputs(rows: int, out: int, inp: int = 64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, inp, generator=g).bfloat16()
    w = torch.randn(out, inp, generator=g).bfloat16()
    b = torch.randn(out, generator=g).bfloat16()
    return x, w, b


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setattr(cpu_bf16, "_emulated_bf16", lambda: True)


def test_many_rows_go_through_float32_and_round_once(emulated):
    x, w, b = _inputs(40, 96)
    assert cpu_bf16.upcasts(x, w)
    out = cpu_bf16.linear(x, w, b)
    assert out.dtype == torch.bfloat16 and out.shape == (40, 96)
    assert torch.equal(out, F.linear(x.float(), w.float(), b.float()).bfloat16())
    # the same products as bfloat16's own GEMM, up to the order of the float32 additions
    torch.testing.assert_close(out, F.linear(x, w, b), rtol=1.6e-2, atol=1e-2)


def test_a_weight_taller_than_a_block_is_converted_piece_by_piece(emulated, monkeypatch):
    monkeypatch.setattr(cpu_bf16, "UPCAST_BLOCK", 32)
    x, w, b = _inputs(20, 100)
    whole = F.linear(x.float(), w.float(), b.float()).bfloat16()
    torch.testing.assert_close(cpu_bf16.linear(x, w, b), whole, rtol=0, atol=0)
    assert torch.equal(cpu_bf16.linear(x, w), F.linear(x.float(), w.float()).bfloat16())


def test_few_rows_float32_and_native_bf16_stay_on_f_linear(emulated, monkeypatch):
    x, w, b = _inputs(cpu_bf16.UPCAST_ROWS - 1, 48)
    assert not cpu_bf16.upcasts(x, w)
    assert torch.equal(cpu_bf16.linear(x, w, b), F.linear(x, w, b))       # decode rows: bf16 GEMV
    x32, w32 = torch.randn(40, 64), torch.randn(48, 64)
    assert not cpu_bf16.upcasts(x32, w32)
    assert torch.equal(cpu_bf16.linear(x32, w32), F.linear(x32, w32))
    monkeypatch.setattr(cpu_bf16, "_emulated_bf16", lambda: False)      # AVX512-BF16 or AMX
    x, w, b = _inputs(40, 48)
    assert not cpu_bf16.upcasts(x, w)
    assert torch.equal(cpu_bf16.linear(x, w, b), F.linear(x, w, b))


def test_bfloat16_convolutions_run_in_float32_where_emulated(emulated):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1).bfloat16()
    x = torch.randn(2, 4, 16, 20).bfloat16().contiguous(memory_format=torch.channels_last)
    out = cpu_bf16.conv2d(conv, x)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 8, 8, 10)
    expected = F.conv2d(x.float(), conv.weight.float(), conv.bias.float(), 2, 1).bfloat16()
    assert torch.equal(out, expected)
    torch.testing.assert_close(out, conv(x), rtol=1.6e-2, atol=2e-2)
    x32 = x.float()
    assert torch.equal(cpu_bf16.conv2d(conv.float(), x32), conv.float()(x32))


def test_bfloat16_attention_runs_in_float32_where_emulated(emulated):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 4, n, 16, generator=g).bfloat16() for n in (3, 9, 9))
    mask = torch.ones(3, 9, dtype=torch.bool).tril(6)
    out = cpu_bf16.attention(q, k, v, attn_mask=mask)
    assert out.dtype == torch.bfloat16
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask).bfloat16()
    assert torch.equal(out, expected)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), rtol=2e-2, atol=2e-2)
    q32 = q.float()
    assert torch.equal(cpu_bf16.attention(q32, k.float(), v.float(), is_causal=False),
                       F.scaled_dot_product_attention(q32, k.float(), v.float()))


def test_a_single_bfloat16_query_is_attended_in_float32_on_every_cpu():
    """A decode row: torch's bfloat16 SDPA is several times slower for one query than float32."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 4, n, 16, generator=g).bfloat16() for n in (1, 9, 9))
    out = cpu_bf16.attention(q, k, v)
    expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).bfloat16()
    assert out.dtype == torch.bfloat16 and torch.equal(out, expected)
    # grouped-query attention (4 query heads over 2 key heads): the heads of a group fold into one row
    k2, v2 = k[:, :2], v[:, :2]
    grouped = cpu_bf16.attention(q, k2, v2, enable_gqa=True)
    reference = F.scaled_dot_product_attention(q.float(), k2.float(), v2.float(), enable_gqa=True)
    assert grouped.shape == q.shape and grouped.dtype == torch.bfloat16
    torch.testing.assert_close(grouped.float(), reference, rtol=1e-2, atol=1e-2)
    if not cpu_bf16.emulated(q):
        folded = F.scaled_dot_product_attention(q.view(1, 2, 2, 16), k2, v2).view(q.shape)
        assert torch.equal(grouped, folded)
    q3 = torch.randn(1, 4, 3, 16, generator=g).bfloat16()   # more queries stay in bfloat16 where native
    if not cpu_bf16.emulated(q3):
        assert torch.equal(cpu_bf16.attention(q3, k, v), F.scaled_dot_product_attention(q3, k, v))
