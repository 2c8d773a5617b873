"""One row's greedy token from an int8 read of a bfloat16 LM head (asr_kernels/int8_argmax.py):
the approximation kernel equals its torch twin; its proven bound holds, also for rows chosen to
meet it; the token equals the full head's first largest logit bit for bit, through ties, near-ties,
zero and huge rows; where it cannot decide cheaply it says so and the engine reads the whole head;
and a bfloat16 engine gives the same tokens with it as without it."""
from __future__ import annotations

import pytest
import torch

from asr_kernels import bf16_gemv, int8_argmax as ia

pytestmark = pytest.mark.skipif(not (ia.enabled() and bf16_gemv.enabled()), reason="numba is not installed")


def head(n: int, k: int, seed: int = 0, scale: float = 0.05) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, k, generator=gen) * scale).to(torch.bfloat16)


def screen_over(w: torch.Tensor, block: int = 64) -> ia.ArgmaxScreen:
    """The screen over ``w`` packed as oneDNN packs it for AVX512-BF16 alone (64) or for AMX (32)."""
    packed = bf16_gemv.pack_reference(w, block)
    row = bf16_gemv.RowGemv(packed.data_ptr(), *w.shape, owner=packed, block=block)
    return ia.ArgmaxScreen(w, row)


def rows(k: int, count: int, seed: int = 1, scale: float = 3.0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(1, k, generator=gen) * scale).to(torch.bfloat16) for _ in range(count)]


@pytest.mark.parametrize("n, k", [(64, 2), (128, 48), (1024, 1024), (4096, 1000), (2048, 3072)])
def test_the_approximation_equals_its_torch_twin(n, k):
    w = head(n, k)
    screen = screen_over(w)
    q, scale = ia.quantize_rows(w)
    for x in rows(k, 3):
        xf = x.reshape(-1).float()
        for shares in (1, 2):
            got = ia._approx(screen.packed, xf, screen.scale, shares)
            torch.testing.assert_close(got, ia.approx_reference(xf, q, scale), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("n, k", [(256, 64), (1024, 1024), (512, 3072)])
def test_the_bound_holds_even_for_rows_aimed_at_it(n, k):
    """|approx - exact float32 sum| <= B ||x|| for random rows and for rows along each output's own
    quantization error (where Cauchy-Schwarz is tight)."""
    w = head(n, k, seed=3)
    screen = screen_over(w)
    q, scale = ia.quantize_rows(w)
    error = scale.double()[:, None] * q.double() - w.double()               # [n, k]
    aimed = [(error[r] / error[r].norm() * 40).to(torch.bfloat16)[None] for r in range(0, n, n // 8)]
    for x in rows(k, 4) + aimed:
        xf = x.reshape(-1).float()
        exact = (w.double() @ xf.double())                                  # the true sums
        approx = ia._approx(screen.packed, xf, screen.scale, 2).double()
        slack = screen.bound * xf.double().norm()
        assert bool(((approx - exact).abs() <= slack).all())
        # and the bound is not vacuous: under the logits' spread (a quarter of it at k = 1024, the 0.6B's)
        assert float(slack.max()) < 0.75 * float(exact.std())


@pytest.mark.parametrize("n, k", [(192, 48), (8192 + 64, 1024)])
def test_the_load_time_kernel_builds_the_torch_twins_copy(n, k):
    """Scale and int8 values as ``quantize_rows`` gives them, in ``pack_blocks``' layout, and the
    bound as ``bound_coefficients`` (the same float64 sums in another order); a zero row included."""
    w = head(n, k, seed=13)
    w[5] = 0
    screen = screen_over(w)
    q, scale = ia.quantize_rows(w)
    assert torch.equal(screen.scale, scale)
    assert torch.equal(screen.packed, ia.pack_blocks(q))
    torch.testing.assert_close(screen.bound, ia.bound_coefficients(w, q, scale), rtol=1e-9, atol=0)


@pytest.mark.parametrize("block", [64, 32])
def test_the_token_is_the_full_heads_first_largest_logit(block):
    n, k = 4096, 1024
    w = head(n, k, seed=5)
    screen = screen_over(w, block)
    decided = 0
    for x in rows(k, 40, seed=6):
        got = screen.greedy(x)
        decided += got is not None
        assert got in (None, ia.reference_token(x.reshape(-1), w))
    assert decided == 40


def test_ties_and_near_ties_go_to_the_first_index():
    """Duplicate rows in different blocks tie exactly: the first wins, as torch's max gives it.
    Rows one bfloat16 step apart, and rows whose sums round to the same bfloat16, are resolved
    on the exact logits."""
    n, k = 1024, 256
    w = head(n, k, seed=7)
    x = rows(k, 1, seed=8)[0]
    top = ia.reference_token(x.reshape(-1), w)
    for copy_at in (5, top + 1 if top + 1 < n else 0, 700, n - 1):
        tied = w.clone()
        tied[copy_at] = w[top]
        assert screen_over(tied).greedy(x) == ia.reference_token(x.reshape(-1), tied)
    nudged = w.clone()
    for i, r in enumerate((3, 300, 900)):       # the top row with a last component nudged by a step
        nudged[r] = w[top]
        nudged[r, -1 - i] = torch.nextafter(w[top, -1 - i].float(), torch.tensor(9.0)).to(torch.bfloat16)
    assert screen_over(nudged).greedy(x) == ia.reference_token(x.reshape(-1), nudged)


def test_zero_huge_and_not_finite_rows():
    n, k = 512, 128
    w = head(n, k, seed=9)
    screen = screen_over(w)
    zero = torch.zeros(1, k, dtype=torch.bfloat16)
    assert screen.greedy(zero) == ia.reference_token(zero.reshape(-1), w) == 0   # all logits 0: the first
    huge = rows(k, 1, seed=10, scale=1e30)[0]
    assert screen.greedy(huge) in (None, ia.reference_token(huge.reshape(-1), w))
    nan = zero.clone()
    nan[0, 3] = float("nan")
    assert screen.greedy(nan) is None                                             # the caller reads it all


def test_where_too_much_is_close_it_says_so():
    """A head of equal rows leaves every group of 64 a candidate: greedy returns None (the whole head
    is read), and never a wrong token."""
    n, k = 64 * (ia.MAX_BLOCKS + 2), 64
    w = head(1, k, seed=11).expand(n, k).contiguous()
    assert screen_over(w).greedy(rows(k, 1)[0]) is None


def test_it_is_built_only_where_it_applies(monkeypatch):
    w = head(256, 64)
    assert ia.screen_for(w, None) is None                                    # no one-row kernel
    odd = head(32 * 9, 64)                                                   # rows not a multiple of 64
    packed = bf16_gemv.pack_reference(odd, 32)
    odd_row = bf16_gemv.RowGemv(packed.data_ptr(), *odd.shape, owner=packed, block=32)
    assert ia.screen_for(odd, odd_row) is None
    with pytest.raises(ValueError, match="multiple of 64"):
        ia.ArgmaxScreen(odd, odd_row)
    with pytest.raises(ValueError, match="must read"):
        ia.ArgmaxScreen(w[:192], screen_over(w).row)                         # another weight's kernel
    for at, value in (((3, 3), float("inf")), ((255, 63), float("nan")), ((128, 0), float("-inf"))):
        bad = w.clone()                                                      # found by the build's own pass
        bad[at] = value
        wide = bf16_gemv.pack_reference(bad, 64)
        assert ia.screen_for(bad, bf16_gemv.RowGemv(wide.data_ptr(), 256, 64, owner=wide, block=64)) is None
    assert ia.screen_for(bad.float(), bf16_gemv.float_row_copy(bad.float())) is None   # float32: no copy of it
    monkeypatch.setenv(ia.SWITCH, "0")
    good = bf16_gemv.pack_reference(w, 64)
    assert ia.screen_for(w, bf16_gemv.RowGemv(good.data_ptr(), 256, 64, owner=good, block=64)) is None


def test_block_outputs_are_the_full_rows_bits():
    w = head(640, 96, seed=12)
    packed = bf16_gemv.pack_reference(w, 64)
    row = bf16_gemv.RowGemv(packed.data_ptr(), 640, 96, owner=packed, block=64)
    x = rows(96, 1)[0]
    full = row(x).reshape(-1)
    for b in range(10):
        assert torch.equal(row.block_outputs(x, b), full[b * 64:(b + 1) * 64])
    with pytest.raises(ValueError, match="outside"):
        row.block_outputs(x, 10)


@pytest.fixture(scope="module")
def wide_vocab_dir(tmp_path_factory):
    """The random tiny checkpoint with a vocabulary of 1024 (a multiple of 64, as the 0.6B's), tied."""
    from checkpoints import TINY, build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("tiny-1024"), seed=4, dims=dict(TINY, vocab_size=1024), tie=True)


def tokens(eng, clips) -> list[list[int]]:
    out = []
    for clip in clips:                                   # one at a time: every decode step is one row
        req = eng.submit(clip, max_new_tokens=24, ignore_eos=True)
        while not req.finished:
            eng.step()
        out.append(list(req.token_ids))
    return out


def test_bfloat16_engine_tokens_with_it_equal_the_whole_heads(wide_vocab_dir, monkeypatch):
    """Where the head has a one-row kernel (oneDNN's bfloat16 packing: AVX512-BF16 or AMX) the engine
    builds the screen and every one-row token comes through it; elsewhere it builds none. Either way
    the tokens are the whole head's."""
    import numpy as np

    import engine

    gen = np.random.default_rng(0)
    clips = [(0.1 * gen.standard_normal(int(16000 * s))).astype(np.float32) for s in (1.5, 3.0, 2.2)]
    eng = engine.load(wide_vocab_dir, device="cpu", dtype="bfloat16")
    net = eng.runner.net
    row = getattr(net.head, "row", None)
    assert (net.head_screen is not None) == (row is not None)               # vocabulary 1024: 16 groups of 64
    calls = []
    if net.head_screen is not None:
        original = net.head_screen.greedy
        monkeypatch.setattr(net.head_screen, "greedy", lambda x: calls.append(original(x)) or calls[-1])
    with_screen = tokens(eng, clips)
    assert all(t is not None for t in calls) and (len(calls) >= 3 * 23 or net.head_screen is None)
    monkeypatch.setenv(ia.SWITCH, "0")
    plain = engine.load(wide_vocab_dir, device="cpu", dtype="bfloat16")
    assert plain.runner.net.head_screen is None
    assert tokens(plain, clips) == with_screen
    monkeypatch.delenv(ia.SWITCH)
    # a one-shot CLI run on under a minute of audio loads without compact weights: no copy to build
    assert engine.load(wide_vocab_dir, device="cpu", dtype="bfloat16", compact_weights=False).runner.net.head_screen is None


# --- float32 rows over a one-row copy (a float32 model's compact head: CPUs without native bfloat16) ---

def float_screen(w: torch.Tensor) -> ia.ArgmaxScreen:
    """The screen over a float32 head of bfloat16 values, read one row at a time by ``float_row_copy``."""
    row = bf16_gemv.float_row_copy(w.float())
    assert row is not None and row.dtype == torch.float32
    return ia.screen_for(w.float(), row)


def float_rows(k: int, count: int, seed: int = 1, scale: float = 3.0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(1, k, generator=gen) * scale for _ in range(count)]


def test_float32_rows_get_the_float32_heads_first_largest_logit():
    """No rounding to bfloat16 after the sums: the token is the first largest float32 logit of the
    kernel's math, decided without the whole head for ordinary rows."""
    w = head(4096, 1024, seed=5)
    screen = float_screen(w)
    decided = 0
    for x in float_rows(1024, 40, seed=6):
        got = screen.greedy(x)
        decided += got is not None
        assert got in (None, ia.reference_token(x.reshape(-1), w))
        assert got in (None, int(screen.row(x)[0].max(dim=-1).indices))         # the whole head through the kernel
    assert decided == 40


def test_float32_ties_go_to_the_first_index_and_bfloat16_rows_are_left_to_the_head():
    n, k = 1024, 256
    w = head(n, k, seed=7)
    x = float_rows(k, 1, seed=8)[0]
    top = ia.reference_token(x.reshape(-1), w)
    for copy_at in (5, 700, n - 1):
        tied = w.clone()
        tied[copy_at] = w[top]
        assert float_screen(tied).greedy(x) == ia.reference_token(x.reshape(-1), tied) == min(copy_at, top)
    # a bfloat16 row through a float32 kernel: its logits are rounded after the sums, so the screen
    # leaves it to the whole head rather than decide on unrounded values
    assert float_screen(w).greedy(x.bfloat16()) is None


@pytest.fixture(scope="module")
def wide_bf16_vocab_dir(tmp_path_factory):
    """As ``wide_vocab_dir``, stored in bfloat16 as real checkpoints are (compact weights need it)."""
    from checkpoints import TINY, build_checkpoint

    return build_checkpoint(tmp_path_factory.mktemp("tiny-1024-bf16"), seed=4, dims=dict(TINY, vocab_size=1024),
                            tie=True, dtype=torch.bfloat16)


def test_float32_engine_tokens_with_it_equal_the_whole_heads(wide_bf16_vocab_dir, monkeypatch):
    """A CPU without native bfloat16 (float32, compact weights): the head's one-row copy and its screen
    are built, every one-row token comes through the screen, and the tokens are the ones without it."""
    import numpy as np
    from platforms import on_platform

    import engine

    on_platform(monkeypatch, native_bf16=False)
    gen = np.random.default_rng(0)
    clips = [(0.1 * gen.standard_normal(int(16000 * s))).astype(np.float32) for s in (1.5, 3.0, 2.2)]
    eng = engine.load(wide_bf16_vocab_dir, device="cpu", dtype="float32")
    net = eng.runner.net
    assert net.head.row is not None and net.head_screen is not None
    calls = []
    original = net.head_screen.greedy
    monkeypatch.setattr(net.head_screen, "greedy", lambda x: calls.append(original(x)) or calls[-1])
    with_screen = tokens(eng, clips)
    assert len(calls) >= 3 * 23 and all(t is not None for t in calls)
    monkeypatch.setenv(ia.SWITCH, "0")
    plain = engine.load(wide_bf16_vocab_dir, device="cpu", dtype="float32")
    assert plain.runner.net.head_screen is None
    assert tokens(plain, clips) == with_screen
