"""The prompt attention kernel (asr_kernels/bf16_prompt_attention.py) against its torch twin, which
is held to SDPA; each query's bits alone; and the bfloat16 engine's tokens with it against SDPA's.

The kernel is made of AVX512-BF16 instructions: its own tests need a CPU that has them (the
developers' AMD EPYC and Intel Xeons do). The twin's test and the engine's choice run everywhere."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import engine
from asr_kernels import bf16_prompt_attention as pa
from conftest import tone_clip

needs_instruction = pytest.mark.skipif(not pa.available(), reason="this CPU has no AVX512-BF16 instruction")


def _case(n, ctx, heads, kvh, hd, block_size, seed):
    """q [n, heads, hd] and caches whose blocks are scattered (a shuffled table with spare blocks)."""
    g = torch.Generator().manual_seed(seed)
    used = -(-ctx // block_size)
    k_cache = torch.randn(used + 3, block_size, kvh, hd, generator=g).bfloat16()
    v_cache = torch.randn(used + 3, block_size, kvh, hd, generator=g).bfloat16()
    table = np.random.default_rng(seed).permutation(used + 3)[:used].astype(np.int64)
    q = (2 * torch.randn(n, heads, hd, generator=g)).bfloat16()
    return q, k_cache, v_cache, table


def _sdpa(q, k_cache, v_cache, table, ctx):
    n, heads, hd = q.shape
    blocks = torch.as_tensor(table)
    k = k_cache.index_select(0, blocks).flatten(0, 1)[:ctx].transpose(0, 1)[None]
    v = v_cache.index_select(0, blocks).flatten(0, 1)[:ctx].transpose(0, 1)[None]
    mask = torch.ones(n, ctx, dtype=torch.bool).tril(ctx - n)
    o = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k, v, attn_mask=mask, enable_gqa=True)
    return o[0].transpose(0, 1).reshape(n, heads * hd)


def _steps(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest distance between a and b in bfloat16 steps of the larger's largest value."""
    return float((a.double() - b.double()).abs().max() / (2 ** -8 * b.double().abs().max()))


SHAPES = [  # n, ctx, heads, kv_heads, head_dim, block_size
    (386, 395, 16, 8, 128, 64),    # a 0.6B prompt after its cached system prefix
    (80, 250, 16, 8, 128, 64),     # a live pass: new audio and draft after cached audio
    (2, 2, 4, 2, 16, 16),          # the random tiny checkpoint's head size
    (104, 104, 14, 14, 64, 104),   # one encoder window: every key head its own query head
    (33, 70, 4, 2, 48, 16),        # the trained tiny model's head size: 16-wide output tiles
    (5, 300, 2, 1, 80, 32),        # a 64-wide tile and a 16-wide one
    (100, 1500, 16, 8, 128, 64),   # a later chunk of a long prompt
]


@pytest.mark.parametrize("n,ctx,heads,kvh,hd,block_size", SHAPES)
def test_the_reference_is_sdpa(n, ctx, heads, kvh, hd, block_size):
    q, k_cache, v_cache, table = _case(n, ctx, heads, kvh, hd, block_size, seed=n)
    assert _steps(pa.attention_reference(q, k_cache, v_cache, table, ctx), _sdpa(q, k_cache, v_cache, table, ctx)) <= 2


@needs_instruction
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n,ctx,heads,kvh,hd,block_size", SHAPES)
def test_the_kernel_is_the_reference(n, ctx, heads, kvh, hd, block_size, causal):
    """Causal: a prompt after its cached part; not: an encoder window, every query seeing every key."""
    q, k_cache, v_cache, table = _case(n, ctx, heads, kvh, hd, block_size, seed=n)
    out = torch.full((n, heads * hd), float("nan"), dtype=torch.bfloat16)
    pa.attend_prompt(q, k_cache, v_cache, table, ctx, out, causal=causal)
    ref = pa.attention_reference(q, k_cache, v_cache, table, ctx, causal=causal)
    assert not out.isnan().any()
    assert _steps(out, ref) <= 1                                  # only the order of float32 sums differs
    assert (out != ref).float().mean() < 0.01


@needs_instruction
def test_a_querys_bits_do_not_depend_on_its_chunk_its_neighbours_or_the_threads():
    """A prompt in one piece, its last rows as a chunk after cached ones (a prefix-cache hit, a
    chunked prefill), a strided slice of a step's tokens, any share count: the same bits per query."""
    n, heads, kvh, hd = 150, 8, 2, 64
    q, k_cache, v_cache, table = _case(n, n, heads, kvh, hd, 32, seed=3)
    whole = torch.empty(n, heads * hd, dtype=torch.bfloat16)
    pa.attend_prompt(q, k_cache, v_cache, table, n, whole, shares=1)
    for shares in (2, 3, kvh):
        again = torch.empty_like(whole)
        pa.attend_prompt(q, k_cache, v_cache, table, n, again, shares=shares)
        assert torch.equal(again, whole)
    for last in (1, 7, 64, 149):
        chunk = torch.empty(last, heads * hd, dtype=torch.bfloat16)
        pa.attend_prompt(q[n - last:], k_cache, v_cache, table, n, chunk)
        assert torch.equal(chunk, whole[n - last:])
    step_q = torch.zeros(n + 9, heads, hd, dtype=torch.bfloat16)   # the row's tokens in the middle of a step
    step_q[4:4 + n] = q
    step_out = torch.zeros(n + 9, heads * hd, dtype=torch.bfloat16)
    pa.attend_prompt(step_q.narrow(0, 4, n), k_cache, v_cache, table, n, step_out.narrow(0, 4, n))
    assert torch.equal(step_out[4:4 + n], whole)
    assert not step_out[:4].any() and not step_out[4 + n:].any()     # nothing written outside its rows


@needs_instruction
def test_what_it_cannot_read_is_a_valueerror():
    q, k_cache, v_cache, table = _case(4, 8, 2, 1, 64, 8, seed=0)
    out = torch.empty(4, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="multiple of 16"):
        pa.attend_prompt(q[..., :40].contiguous(), k_cache[..., :40].contiguous(), v_cache[..., :40].contiguous(),
                         table, 8, out)
    with pytest.raises(ValueError, match="n <= ctx"):
        pa.attend_prompt(q, k_cache, v_cache, table, 3, out)
    with pytest.raises(ValueError, match="bfloat16"):
        pa.attend_prompt(q.float(), k_cache, v_cache, table, 8, out)
    with pytest.raises(ValueError, match="cannot hold"):
        pa.attend_prompt(q, k_cache, v_cache, table[:0], 8, out)


def test_the_engine_takes_it_only_where_the_cpu_fits(monkeypatch):
    """AVX512-BF16 without AMX takes the kernel; with AMX, SDPA packs for the tiles; without the
    instruction there is nothing to run (and nothing is compiled: LLVM would abort)."""
    for features, fits in (({"avx512bf16": True, "amx-bf16": False}, True),
                           ({"avx512bf16": True, "amx-bf16": True}, False),
                           ({"avx512bf16": False}, False), ({}, False)):
        monkeypatch.setattr(pa, "_cpu_features", lambda features=features: features)
        assert pa.cpu_fits() == fits


@needs_instruction
def test_bfloat16_engine_tokens_with_the_kernel_equal_sdpas(tiny_model_dir, monkeypatch):
    """The random tiny checkpoint (head size 16) in bfloat16: every prompt's attention through the
    kernel gives the greedy tokens SDPA gives."""
    monkeypatch.setattr(pa, "cpu_fits", lambda: True)              # an AMX machine runs it here too
    calls = []
    attend = pa.attend_prompt
    monkeypatch.setattr(pa, "attend_prompt", lambda *a, **k: calls.append(a[4]) or attend(*a, **k))
    clips = [tone_clip(s, i) for i, s in enumerate([1.0, 5.0, 9.0])]
    eng = engine.load(tiny_model_dir, dtype="bfloat16")
    with_kernel = eng.generate(clips, max_new_tokens=16)
    assert calls                                                   # the prompts took it
    monkeypatch.setenv(pa.SWITCH, "0")
    calls.clear()
    with_sdpa = engine.load(tiny_model_dir, dtype="bfloat16").generate(clips, max_new_tokens=16)
    assert not calls
    assert with_kernel == with_sdpa


@needs_instruction
def test_encoder_windows_through_the_kernel_are_sdpas(tiny_model_dir, monkeypatch):
    """The audio encoder in bfloat16 over 20 s (windows of 104, 104 and 52 tokens): the same
    embeddings as with SDPA, to the rounding of its sums."""
    from engine.network.encoder import encode_audio
    from engine.network.features import log_mel

    monkeypatch.setattr(pa, "cpu_fits", lambda: True)
    calls = []
    attend = pa.attend_prompt
    monkeypatch.setattr(pa, "attend_prompt", lambda *a, **k: calls.append(k.get("causal")) or attend(*a, **k))
    net = engine.load(tiny_model_dir, dtype="bfloat16").net
    features = [log_mel(tone_clip(20.0, 5)), log_mel(tone_clip(3.0, 6))]
    with_kernel = encode_audio(net, features)
    assert calls and not any(calls)                                # windows, not causal prompts
    monkeypatch.setenv(pa.SWITCH, "0")
    with_sdpa = encode_audio(net, features)
    for a, b in zip(with_kernel, with_sdpa):
        assert a.shape == b.shape
        assert torch.nn.functional.cosine_similarity(a.float().flatten(), b.float().flatten(), dim=0) > 0.999
        assert _steps(a, b) <= 8


def test_a_named_numba_target_decides_the_instruction(monkeypatch):
    """With ``NUMBA_CPU_NAME`` set numba compiles for that CPU, not this one: the kernel exists
    only if that target's features name AVX512-BF16 (an AVX2 target on an AVX-512 machine would
    otherwise abort in LLVM)."""
    from numba.core import config

    for name, features, has in (("haswell", "", False), ("znver4", "+avx512f,+avx512bf16", True),
                                ("haswell", "+avx2,+fma", False)):
        monkeypatch.setattr(config, "CPU_NAME", name)
        monkeypatch.setattr(config, "CPU_FEATURES", features)
        assert bool(pa._cpu_features.__wrapped__().get("avx512bf16")) == has
