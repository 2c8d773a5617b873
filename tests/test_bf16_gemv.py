"""The one-row GEMV over oneDNN's packed bfloat16 layout (asr_kernels/bf16_gemv.py): bit for bit its
torch twin over Qwen3's shapes and odd ones, whatever the shares; NaN stays NaN; within a bfloat16
rounding of the exact product; both block widths oneDNN packs (32 for AMX, 64 for AVX512-BF16 alone)
are recognised; and the engine's packed linear method takes it for one row only where oneDNN's packing
on this machine is a layout it reads."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from asr_kernels import bf16_gemv, team_run
from engine.network import platform
from engine.network.linear_methods import PackedBf16Linear, packed_linear

pytestmark = pytest.mark.skipif(not bf16_gemv.enabled(), reason="numba is not installed")
PACKS = platform.current().onednn_bf16_packing


def weight(n: int, k: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=gen) / k ** 0.5).to(torch.bfloat16)


def row(k: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(1, k, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16)


def kernel_over(w: torch.Tensor, block: int = 32) -> bf16_gemv.RowGemv:
    packed = bf16_gemv.pack_reference(w, block)
    return bf16_gemv.RowGemv(packed.data_ptr(), *w.shape, owner=packed, block=block)


@pytest.mark.parametrize("n, k", [(32, 2), (96, 64), (1024, 2048), (4096, 1024), (1024, 3072), (6144, 1024),
                                  (160, 1026)])
def test_equals_its_torch_twin(n, k):
    w, x = weight(n, k), row(k)
    assert torch.equal(kernel_over(w)(x)[0], bf16_gemv.gemv_reference(x[0], w))


@pytest.mark.parametrize("n, k", [(64, 2), (192, 64), (1024, 2048), (3072, 1024), (1024, 3072), (320, 1026)])
def test_blocks_of_64_equal_the_twin(n, k):
    w, x = weight(n, k), row(k)
    assert torch.equal(kernel_over(w, 64)(x)[0], bf16_gemv.gemv_reference(x[0], w))


@pytest.mark.parametrize("block, blocks", [(32, 1), (32, 3), (32, 7), (32, 64), (64, 1), (64, 5), (64, 32)])
def test_bits_do_not_depend_on_the_shares(block, blocks):
    w, x = weight(block * blocks, 256), row(256)
    gemv = kernel_over(w, block)
    alone = gemv.with_shares(x, 1)
    for shares in ([2, 3, blocks] if team_run.team_available() else []):
        assert torch.equal(gemv.with_shares(x, shares), alone)
    assert torch.equal(gemv(x), alone)


def test_within_a_rounding_of_the_exact_product():
    w, x = weight(2048, 1024), row(1024)
    exact = (x.double() @ w.double().T)[0]
    got = kernel_over(w)(x)[0].double()
    step = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - 7)    # one bfloat16 step
    assert ((got - exact).abs() <= step).all()


def test_nan_and_infinity_carry_through():
    w, x = weight(64, 32), row(32)
    x[0, 5] = float("nan")
    assert kernel_over(w)(x).isnan().all()
    x[0, 5], w[3, 7] = 0.0, float("inf")
    x[0, 7] = 1.0
    y = kernel_over(w)(x)[0]
    assert y[3] == float("inf") and y.isfinite().sum() == 63


def test_rejects_what_it_cannot_read():
    with pytest.raises(ValueError, match="multiple of 32"):
        bf16_gemv.RowGemv(0, 48, 64, owner=None)
    with pytest.raises(ValueError, match="multiple of 64"):
        bf16_gemv.RowGemv(0, 96, 64, owner=None, block=64)
    with pytest.raises(ValueError, match="block must be one of"):
        bf16_gemv.RowGemv(0, 96, 64, owner=None, block=16)
    with pytest.raises(ValueError, match=r"\[1, 64\] row"):
        kernel_over(weight(32, 64))(row(64).float())
    assert bf16_gemv.packed_block(torch.ops.mkldnn._reorder_linear_weight(weight(48, 64), 16), weight(48, 64)) is None
    assert bf16_gemv.packed_block(bf16_gemv.pack_reference(weight(64, 64)), weight(64, 64)) is None   # not oneDNN's


@pytest.mark.skipif(not PACKS, reason="this torch build has no oneDNN packing: nothing to read")
def test_reads_onednn_packing_only_where_it_is_the_layout():
    w = weight(1024, 2048)
    packed = torch.ops.mkldnn._reorder_linear_weight(w, 16)
    other = w.clone()
    other[-1, -1] += 1                        # the last block differs from what was packed
    assert bf16_gemv.packed_block(packed, other) is None
    gemv = bf16_gemv.row_gemv_for(packed, w)
    if gemv is None:                          # another layout on this CPU kind: oneDNN stays
        return
    x = row(2048)
    assert torch.equal(gemv(x)[0], bf16_gemv.gemv_reference(x[0], w))
    assert (gemv(x) != packed_linear(x, packed)).float().mean() < 1e-2    # oneDNN: another sum order


@pytest.mark.skipif(not PACKS, reason="this torch build has no oneDNN packing: nothing to read")
def test_reads_a_weight_padded_with_zero_rows():
    """A checkpoint widened with zero rows (tests/widened_model.py) reads alike under both widths in the
    blocks the check samples: every block then decides, and one-row steps still take the kernel."""
    plain = weight(1024, 2048)
    here = bf16_gemv.packed_block(torch.ops.mkldnn._reorder_linear_weight(plain, 16), plain)  # this CPU's layout
    padded = torch.zeros(1024, 2048, dtype=torch.bfloat16)
    padded[64:512] = plain[64:512]            # rows 0-63, 512-575 and 960-1023 (the sampled blocks) stay zero
    packed = torch.ops.mkldnn._reorder_linear_weight(padded, 16)
    assert bf16_gemv.packed_block(packed, padded) == here
    if here is None:                          # another layout on this CPU kind: oneDNN stays
        return
    x = row(2048)
    assert torch.equal(bf16_gemv.row_gemv_for(packed, padded)(x)[0], bf16_gemv.gemv_reference(x[0], padded))
    zeros = torch.zeros(128, 64, dtype=torch.bfloat16)      # every width holds it whole: the first is read
    assert bf16_gemv.packed_block(torch.ops.mkldnn._reorder_linear_weight(zeros, 16), zeros) == bf16_gemv.BLOCKS[0]


@pytest.mark.skipif(not PACKS, reason="this torch build has no oneDNN packing")
def test_packed_linear_takes_it_for_one_row_only(monkeypatch):
    w = weight(192, 64)
    method = PackedBf16Linear(w.clone())
    x = row(64)
    if method.row is not None:
        assert torch.equal(method(x)[0], bf16_gemv.gemv_reference(x[0], w))
    xs = torch.cat([x, row(64, seed=2)])
    assert torch.equal(method(xs), packed_linear(xs, method.packed))      # two rows: oneDNN
    monkeypatch.setenv(bf16_gemv.SWITCH, "0")
    assert PackedBf16Linear(w.clone()).row is None
    monkeypatch.setenv(bf16_gemv.SWITCH, "yes")
    with pytest.raises(ValueError, match=bf16_gemv.SWITCH):
        PackedBf16Linear(w.clone())


# What an AMD EPYC/Ryzen with AVX512-BF16 but no AMX runs: oneDNN limited to that ISA packs blocks of 64.
_AVX512_BF16_ONLY = textwrap.dedent("""
    import torch
    from asr_kernels import bf16_gemv
    w = (torch.randn(3072, 1024) / 32).to(torch.bfloat16)
    packed = torch.ops.mkldnn._reorder_linear_weight(w, 16)
    gemv = bf16_gemv.row_gemv_for(packed, w)
    x = torch.randn(1, 1024).to(torch.bfloat16)
    assert gemv is not None and gemv.block == 64, gemv and gemv.block
    assert torch.equal(gemv(x)[0], bf16_gemv.gemv_reference(x[0], w))
    p = torch.zeros_like(w)
    p[64:1024] = w[64:1024]                   # zero where the check samples under both widths
    gp = bf16_gemv.row_gemv_for(torch.ops.mkldnn._reorder_linear_weight(p, 16), p)
    assert gp is not None and gp.block == 64, gp and gp.block
    assert torch.equal(gp(x)[0], bf16_gemv.gemv_reference(x[0], p))
    print("ok")
""")


@pytest.mark.skipif(not (PACKS and platform.current().native_bf16), reason="oneDNN packs no bfloat16 blocks here")
def test_reads_the_blocks_of_64_onednn_packs_without_amx():
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}
    done = subprocess.run([sys.executable, "-c", _AVX512_BF16_ONLY], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# --- float32 rows over a copy of bfloat16-valued weights (compact weights where bfloat16 is not native) ---

@pytest.mark.parametrize("n, k", [(64, 2), (192, 64), (1024, 2048), (4096, 1024), (1024, 3072), (320, 1026)])
def test_float32_rows_equal_the_twin(n, k):
    w = weight(n, k, seed=n)
    x = torch.randn(1, k, generator=torch.Generator().manual_seed(k))
    gemv = bf16_gemv.float_row_copy(w.float())
    assert gemv.dtype == torch.float32 and gemv.block == bf16_gemv.COPY_BLOCK
    out = gemv(x)
    assert out.dtype == torch.float32 and torch.equal(out[0], bf16_gemv.gemv_reference(x[0], w))
    for shares in ([1, 2, n // 64] if team_run.team_available() else [1]):
        assert torch.equal(gemv.with_shares(x, shares), out)
    assert torch.equal(gemv.block_outputs(x, n // 64 - 1), out[0, -64:])
    with pytest.raises(ValueError, match="float32"):
        gemv(x.bfloat16())


def test_a_float_row_copy_only_of_what_it_holds_exactly(monkeypatch):
    w = weight(64 * 5, 64).float()
    for source in (w, w.bfloat16()):                            # one pass over float32 or bfloat16 bits
        copy = bf16_gemv.float_row_copy(source)
        assert torch.equal(copy.owner, bf16_gemv.pack_reference(w.bfloat16(), 64))
    for row, value in ((7, w[7, 3] + 2 ** -20), (300, float("nan")), (64, float("inf"))):
        off = w.clone()                                         # not a bfloat16 value, or not finite
        off[row, 3] = value
        assert bf16_gemv.float_row_copy(off) is None
    for row, col, value in ((0, 0, float("nan")), (319, 63, float("-inf")), (100, 8, float("inf"))):
        off = w.bfloat16()                                      # bfloat16 that is not finite, anywhere
        off[row, col] = value
        assert bf16_gemv.float_row_copy(off) is None
    assert bf16_gemv.float_row_copy(w[:96]) is None             # rows not a multiple of 64
    monkeypatch.setenv(bf16_gemv.SWITCH, "0")
    assert bf16_gemv.float_row_copy(w) is None
