"""The compiled kernels of a float32 decode row (asr_kernels/f32_decode_row.py) against their torch
references over Qwen3's shapes and odd ones, within float32 rounding (only the order of sums and exp
differ); then the one-row float32 decoder (engine/network/decode_row.py) against decoder_forward's
torch path on the same weights and cache, and a float32 engine's tokens against transformers'."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from asr_kernels import f32_decode_row as kernels
from asr_kernels import team_run
from asr_kernels.qk_norm_rope import signed_sin
from asr_kernels.rmsnorm import rms_norm_residual_cpu
from decode_row_cases import attention_case, torch_reference, words_with_and_without

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")
EPS = 1e-6


def close(a: torch.Tensor, b: torch.Tensor, rtol: float = 2e-5) -> None:
    """Equal up to float32 rounding relative to the larger values of b."""
    assert a.shape == b.shape and a.dtype == b.dtype == torch.float32
    assert float((a - b).abs().max()) <= rtol * float(b.abs().max().clamp_min(1e-30))


def test_the_kernels_compile_wherever_numba_imports():
    assert kernels.compile_kernels() and kernels.enabled()


@pytest.mark.parametrize("hidden", [64, 1000, 1024, 2048])
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "first-layer"])
def test_residual_norm_is_the_reference(hidden, with_residual):
    g = torch.Generator().manual_seed(hidden)
    x, res = 4 * torch.randn(1, hidden, generator=g), torch.randn(1, hidden, generator=g)
    w = 1 + 0.5 * torch.randn(hidden, generator=g)
    ref_h, ref_res = rms_norm_residual_cpu(x, res if with_residual else None, w, EPS)
    h, new_res = torch.empty_like(x), res.clone()
    kernels.residual_norm(x.data_ptr(), new_res.data_ptr(), w.data_ptr(), h.data_ptr(), new_res.data_ptr(),
                          hidden, EPS, with_residual)
    assert torch.equal(new_res, ref_res)              # one float32 add: exact
    close(h, ref_h)


@pytest.mark.parametrize("n", [1, 17, 3072])
def test_silu_mul_is_the_reference(n):
    gate_up = 3 * torch.randn(1, 2 * n, generator=torch.Generator().manual_seed(n))
    gate, up = gate_up.chunk(2, dim=-1)
    out = torch.empty(1, n)
    kernels.silu_mul(gate_up.data_ptr(), out.data_ptr(), n)
    close(out, F.silu(gate) * up, rtol=1e-6)


@pytest.mark.parametrize("heads,kvh,hd", [(16, 8, 128), (4, 4, 64), (6, 2, 32)])
@pytest.mark.parametrize("ctx,table", [(1, [0]), (37, [2, 0, 3]), (200, list(range(7)))],
                         ids=["first-token", "scattered-blocks", "consecutive-blocks"])
def test_prologue_and_attend_are_the_reference(heads, kvh, hd, ctx, table, block_size=32):
    case = attention_case(heads, kvh, hd, ctx, block_size, table, ctx + heads, torch.float32)
    k_cache, v_cache, qkv, qkw, cos, sin, slot = (case.k_cache, case.v_cache, case.qkv, case.qkw, case.cos, case.sin,
                                                  case.slot)
    q, ref_k, ref_v, ref = torch_reference(case, heads, kvh, hd, ctx, table)     # torch prologue, then SDPA
    out, q_row = torch.empty(1, heads * hd), torch.empty(1, heads, hd)
    cos, sin = cos.contiguous(), signed_sin(sin).contiguous()      # named: the kernels read their addresses
    kernels.prologue(qkv.data_ptr(), qkw.data_ptr(), cos.data_ptr(), sin.data_ptr(), k_cache.data_ptr(),
                     v_cache.data_ptr(), slot, q_row.data_ptr(), heads, kvh, hd, EPS)
    close(q_row, q)
    close(k_cache, ref_k)
    assert torch.equal(v_cache, ref_v)                   # v is copied
    kernels.attend(q_row.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), np.asarray(table, np.int64),
                   block_size, ctx, out.data_ptr(), heads, kvh, hd)
    close(out, ref, rtol=1e-4)                          # through a softmax of scores in the tens


@pytest.mark.parametrize("heads,kvh,hd", [(16, 8, 128), (6, 3, 32)])
def test_one_rows_key_heads_shared_out_give_the_bits_of_one_thread(heads, kvh, hd):
    g = torch.Generator().manual_seed(kvh)
    block_size, ctx = 16, 300
    table = np.arange(-(-ctx // block_size) - 1, -1, -1, dtype=np.int64)              # reversed: scattered
    k_cache = torch.randn(len(table), block_size, kvh, hd, generator=g)
    v_cache = torch.randn(len(table), block_size, kvh, hd, generator=g)
    q = torch.randn(heads, hd, generator=g)
    outs = {}
    for shares in (1, 2, 3, kvh, None):
        if shares not in (1, None) and not team_run.team_available():
            continue
        out = torch.full((heads * hd,), float("nan"))
        kernels.attend(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), table, block_size, ctx, out.data_ptr(),
                       heads, kvh, hd, shares=shares)
        outs[shares] = out
    assert not outs[1].isnan().any()
    assert all(torch.equal(out, outs[1]) for out in outs.values())


def test_nan_stays_nan_and_address_refuses_what_the_kernels_cannot_read():
    x = torch.tensor([[float("nan")] + [1.0] * 7])
    out = torch.empty(1, 4)
    kernels.silu_mul(x.data_ptr(), out.data_ptr(), 4)
    assert out[0, 0].isnan() and not out[0, 1:].isnan().any()
    for bad in (torch.ones(4, dtype=torch.bfloat16), torch.ones(4, 2).t()):
        with pytest.raises(ValueError, match="contiguous float32"):
            kernels.address(bad)


# --- the one-row float32 decoder in the engine ------------------------------------------------------

@torch.no_grad()
def _decode_steps(eng, steps: int, use_kernels: bool):
    """Prefill one request, then ``steps`` one-row decode steps through decode_row_forward_f32 or
    decoder_forward's torch path: the hidden state of every step and the cache rows it wrote."""
    from engine.network.decode_row import decode_row_forward_f32
    from engine.network.decoder import decoder_forward
    from engine.serving.scheduler import ScheduledRow

    runner, cache = eng.runner, eng.cache
    req = eng.make_request(np.random.default_rng(3).standard_normal(16000).astype(np.float32) * 0.1)
    assert cache.allocator.grow(req.block_table, len(req.prompt_ids) + steps)
    rows = [ScheduledRow(req, 0, len(req.prompt_ids), True)]
    runner.encode_pending(rows)
    decoder_forward(runner.net, cache, runner.embeddings(runner.step_inputs(rows)), runner.step_inputs(rows).meta)
    out = []
    for i in range(steps):
        req.token_ids.append(11 + 7 * i)            # the next token, as if sampled
        rows = [ScheduledRow(req, len(req.prompt_ids) + i, 1, True)]
        inputs = runner.step_inputs(rows)
        embeds = runner.embeddings(inputs)
        forward = decode_row_forward_f32 if use_kernels else decoder_forward
        hidden = forward(runner.net, cache, embeds, inputs.meta)
        slot = inputs.meta.slot_mapping[0]
        out.append((hidden, [c.flatten(0, 1)[slot].clone() for c in list(cache.k) + list(cache.v)]))
    cache.allocator.release(req.block_table)
    req.token_ids.clear()
    return out


def test_one_row_decoder_is_the_torch_path_within_float32_rounding(tiny_model_dir):
    import engine

    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    assert eng.runner.decode_row is not None            # chosen at load for float32 on CPU
    for (h, cache_rows), (h_ref, cache_ref) in zip(_decode_steps(eng, 6, True), _decode_steps(eng, 6, False)):
        close(h, h_ref, rtol=1e-4)
        for a, b in zip(cache_rows, cache_ref):
            close(a, b, rtol=1e-4)


@pytest.mark.parametrize("compact", [False, True], ids=["float32-weights", "compact-weights"])
def test_float32_engine_keeps_transformers_tokens_through_it(compact, monkeypatch, tmp_path_factory):
    """One clip at a time in float32 (every decode step one row) through the compiled kernels, with
    float32 weights or, as on a CPU without native bfloat16, compact ones read by the one-row copy:
    transformers' greedy tokens."""
    from checkpoints import build_checkpoint
    from conftest import tone_clip
    from platforms import on_platform
    from reference import reference_generate

    import engine

    on_platform(monkeypatch, native_bf16=False)
    model = build_checkpoint(tmp_path_factory.mktemp("tiny-bf16"), seed=3, dtype=torch.bfloat16)
    eng = engine.load(model, device="cpu", dtype="float32", compact_weights=compact)
    assert (getattr(eng.runner.net.language_model.layers[0].qkv, "row", None) is not None) == compact   # the copy
    assert eng.runner.decode_row is not None
    calls = []
    inner = eng.runner.decode_row
    eng.runner.decode_row = lambda embeds, meta: calls.append(embeds.shape[0]) or inner(embeds, meta)
    for seconds in (1.0, 8.1):
        audio = tone_clip(seconds, int(seconds * 7))
        assert eng.generate([audio], max_new_tokens=24)[0] == reference_generate(model, audio, max_new_tokens=24)
    assert calls.count(1) >= 20


def test_a_trained_model_hears_the_same_words_either_way(monkeypatch):
    """The user's view in float32: transcripts of real (synthetic) speech are the same words with the
    compiled kernels as with the torch ops, and the kernels did run."""
    from real_speech import wer

    sentence, with_kernels, without = words_with_and_without(monkeypatch, kernels.SWITCH, "float32")
    assert with_kernels == without
    assert wer([sentence], [with_kernels]) <= 0.2
