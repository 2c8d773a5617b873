"""The compiled kernels of a bfloat16 decode row (asr_kernels/bf16_decode_row.py) against their torch
references, over Qwen3's shapes and odd ones: they round wherever the references round, so they
must agree to a bfloat16 rounding step (only the order of float32 sums differs). Then the one-row
decoder (engine/network/decode_row.py) against decoder_forward on the same weights and cache."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from asr_kernels import bf16_decode_row as kernels
from asr_kernels import team_run
from asr_kernels.qk_norm_rope import signed_sin
from asr_kernels.rmsnorm import rms_norm_residual_cpu
from decode_row_cases import attention_case, torch_reference, words_with_and_without

# Skipped only without numba: where it imports, the kernels must compile (compile_kernels() hides a
# failure from users by keeping the torch path, so this is where one shows).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


def test_the_kernels_compile_wherever_numba_imports():
    assert kernels.compile_kernels()
EPS = 1e-6


def ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """The largest distance between a and b in bfloat16 steps (of the larger magnitude)."""
    a, b = a.float(), b.float()
    step = torch.maximum(a.abs(), b.abs()).clamp_min(1e-30)
    step = 2.0 ** (torch.floor(torch.log2(step)) - 7)
    return int(((a - b).abs() / step).max().round())


def agree(a: torch.Tensor, b: torch.Tensor, max_ulps: int = 1, share: float = 0.01) -> None:
    """Every value within ``max_ulps`` bfloat16 steps; at most ``share`` of them differ at all."""
    assert a.shape == b.shape and a.dtype == b.dtype == torch.bfloat16
    assert ulps(a, b) <= max_ulps
    assert (a != b).float().mean().item() <= share


@pytest.mark.parametrize("hidden", [64, 1000, 1024, 2048])
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "first-layer"])
def test_residual_norm_is_the_reference(hidden, with_residual):
    g = torch.Generator().manual_seed(hidden)
    x = (4 * torch.randn(1, hidden, generator=g)).bfloat16()
    res = torch.randn(1, hidden, generator=g).bfloat16()
    w = (1 + 0.5 * torch.randn(hidden, generator=g)).bfloat16()
    ref_h, ref_res = rms_norm_residual_cpu(x, res if with_residual else None, w, EPS)
    h, new_res = torch.empty_like(x), res.clone()
    kernels.residual_norm(x.data_ptr(), new_res.data_ptr(), w.data_ptr(), h.data_ptr(), new_res.data_ptr(),
                          1, hidden, EPS, with_residual)
    assert torch.equal(new_res, ref_res)              # one rounded add: exact
    agree(h, ref_h)


@pytest.mark.parametrize("n", [1, 17, 3072])
def test_silu_mul_is_the_reference(n):
    g = torch.Generator().manual_seed(n)
    gate_up = (3 * torch.randn(1, 2 * n, generator=g)).bfloat16()
    gate, up = gate_up.chunk(2, dim=-1)
    out = torch.empty(1, n, dtype=torch.bfloat16)
    kernels.silu_mul(gate_up.data_ptr(), out.data_ptr(), 1, n)
    agree(out, F.silu(gate) * up, share=0.02)


@pytest.mark.parametrize("heads,kvh,hd", [(16, 8, 128), (4, 4, 64), (6, 2, 32)])
@pytest.mark.parametrize("ctx,table", [(1, [0]), (37, [2, 0, 3]), (200, list(range(7)))],
                         ids=["first-token", "scattered-blocks", "consecutive-blocks"])
def test_prologue_and_attend_are_the_reference(heads, kvh, hd, ctx, table, block_size=32):
    case = attention_case(heads, kvh, hd, ctx, block_size, table, ctx + heads, torch.bfloat16)
    k_cache, v_cache, qkv, qkw, cos, sin, slot = (case.k_cache, case.v_cache, case.qkv, case.qkw, case.cos, case.sin,
                                                  case.slot)
    q, ref_k, ref_v, ref = torch_reference(case, heads, kvh, hd, ctx, table)     # torch prologue, then SDPA
    out, q_rows = torch.empty(1, heads * hd, dtype=torch.bfloat16), torch.empty(1, heads, hd, dtype=torch.bfloat16)
    cos, sin = cos.contiguous(), signed_sin(sin).contiguous()      # named: the kernels read their addresses
    kernels.prologue(qkv.data_ptr(), qkw.data_ptr(), cos.data_ptr(), sin.data_ptr(), k_cache.data_ptr(),
                     v_cache.data_ptr(), np.asarray([slot], np.int64), 1, q_rows.data_ptr(), heads, kvh, hd, EPS)
    agree(q_rows, q)
    kernels.attend(q_rows.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), np.asarray(table, np.int64),
                   block_size, ctx, out.data_ptr(), heads, kvh, hd)
    agree(k_cache, ref_k, share=0.001)                  # the new k row: rotary rounds as the reference
    assert torch.equal(v_cache, ref_v)                   # v is copied
    # SDPA's flash kernel rounds its probabilities to bfloat16 and this kernel does not, so outputs near zero
    # differ by many of their own ulps: held instead to the float64 truth, at least as closely as the reference.
    slots = [table[p // block_size] * block_size + p % block_size for p in range(ctx)]
    keys, values = ref_k.view(-1, kvh, hd)[slots].double(), ref_v.view(-1, kvh, hd)[slots].double()
    group, q64 = heads // kvh, q[0].double()
    truth = torch.stack([torch.softmax(keys[:, h // group] @ q64[h] / hd ** 0.5, 0) @ values[:, h // group]
                         for h in range(heads)]).view(1, -1)
    ref_error, error = (ref.double() - truth).abs().max(), (out.double() - truth).abs().max()
    assert error <= 1.25 * ref_error + 1e-6
    assert (out.double() - ref.double()).abs().max() <= 2 * 2 ** -8 * ref.abs().max()   # two bfloat16 steps


def test_each_row_alone_equals_the_row_in_a_batch():
    """Rows never mix: a request's bits do not depend on the rows it is batched with."""
    g = torch.Generator().manual_seed(7)
    x, res = torch.randn(5, 1024, generator=g).bfloat16(), torch.randn(5, 1024, generator=g).bfloat16()
    w = torch.randn(1024, generator=g).bfloat16()
    h, new_res = kernels.norm_rows(x, res, w, EPS)
    for r in range(5):
        one_h, one_res = kernels.norm_rows(x[r:r + 1], res[r:r + 1], w, EPS)
        assert torch.equal(one_h[0], h[r]) and torch.equal(one_res[0], new_res[r])
    gate_up = torch.randn(3, 2 * 3072, generator=g).bfloat16()
    batch = kernels.silu_mul_rows(gate_up)
    assert all(torch.equal(kernels.silu_mul_rows(gate_up[r:r + 1])[0], batch[r]) for r in range(3))


def test_padding_tokens_write_no_cache():
    heads, kvh, hd = 4, 2, 32
    k_cache, v_cache = torch.zeros(2, 4, kvh, hd, dtype=torch.bfloat16), torch.zeros(2, 4, kvh, hd, dtype=torch.bfloat16)
    qkv = torch.randn(2, (heads + 2 * kvh) * hd).bfloat16()
    rope = torch.ones(2, hd, dtype=torch.bfloat16)
    q = kernels.prologue_rows(qkv, torch.ones(heads + kvh, hd, dtype=torch.bfloat16), rope, rope, k_cache, v_cache,
                              np.asarray([5, -1], np.int64), heads, kvh, EPS)
    assert q.shape == (2, heads, hd)
    assert k_cache.view(-1, kvh, hd)[5].abs().sum() > 0 and torch.equal(v_cache.view(-1, kvh * hd)[5], qkv[0, -kvh * hd:])
    written = (k_cache.view(8, -1).abs().sum(1) > 0).nonzero().flatten().tolist()
    assert written == [5]                                   # the padding token (slot -1) wrote nothing


def test_bits_refuses_what_the_kernels_cannot_read():
    with pytest.raises(ValueError, match="bfloat16"):
        kernels.bits(torch.zeros(4))
    with pytest.raises(ValueError, match="contiguous"):
        kernels.bits(torch.zeros(4, 4, dtype=torch.bfloat16).t())


def test_exp_is_about_an_ulp_from_the_truth_and_keeps_the_special_values():
    from asr_kernels._bf16_decode_row_jit import exp_into

    x = np.concatenate([np.linspace(-110, 95, 400_001, dtype=np.float32),
                        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72, -87.33, -103.9], np.float32)])
    out, scratch = np.empty_like(x), [np.empty(len(x), np.int32) for _ in range(2)]
    exp_into(x, out, *scratch)
    truth = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        truth32 = truth.astype(np.float32)
    normal = np.isfinite(truth32) & (np.abs(truth32) >= np.finfo(np.float32).tiny)
    assert (np.abs(out[normal] - truth[normal]) / np.spacing(truth32[normal])).max() <= 1.5
    tiny = np.isfinite(x) & ~normal & np.isfinite(truth32)             # subnormal results and underflow to 0
    assert np.abs(out[tiny] - truth[tiny]).max() <= 1.5 * 2.0 ** -149
    assert np.isnan(out[x != x]).all() and out[x == np.inf][0] == np.inf and out[x == -np.inf][0] == 0
    assert (out[(x >= 88.7229) & np.isfinite(x)] == np.inf).all()             # past ln(FLT_MAX) = 88.72284
    exp_into(x, x, *scratch)                                          # in place: the same values
    assert np.array_equal(x, out, equal_nan=True)


def test_many_rows_shared_over_the_team_give_the_same_bits(monkeypatch):
    """A prompt's rows are split over torch's threads: the split never changes a row's bits."""
    g = torch.Generator().manual_seed(11)
    heads, kvh, hd, tokens = 4, 2, 32, 37
    x, res = torch.randn(tokens, 256, generator=g).bfloat16(), torch.randn(tokens, 256, generator=g).bfloat16()
    w = torch.randn(256, generator=g).bfloat16()
    gate_up = (3 * torch.randn(tokens, 2 * 96, generator=g)).bfloat16()
    qkv = torch.randn(tokens, (heads + 2 * kvh) * hd, generator=g).bfloat16()
    qkw = torch.randn(heads + kvh, hd, generator=g).bfloat16()
    cos, sin = torch.randn(tokens, hd, generator=g).bfloat16(), torch.randn(tokens, hd, generator=g).bfloat16()
    slots = np.random.default_rng(0).permutation(64)[:tokens].astype(np.int64)
    slots[5] = -1                                                     # a padding token

    def run():
        # the caches a block wider on each side: a write at slot -1 (the padding token) would land there
        wide_k, wide_v = (torch.zeros(6, 16, kvh, hd, dtype=torch.bfloat16) for _ in range(2))
        kc, vc = wide_k[1:5], wide_v[1:5]
        q = kernels.prologue_rows(qkv, qkw, cos, sin, kc, vc, slots, heads, kvh, EPS)
        unused = torch.ones(64, dtype=torch.bool)
        unused[torch.from_numpy(slots[slots >= 0])] = False
        for wide, cache in ((wide_k, kc), (wide_v, vc)):
            assert not wide[0].any() and not wide[5].any()                           # nothing written outside
            assert not cache.reshape(64, -1)[unused].any()                           # nor at unused slots
        return [*kernels.norm_rows(x, res, w, EPS), *kernels.norm_rows(x.clone(), None, w, EPS),
                kernels.silu_mul_rows(gate_up), q, kc, vc]

    if sys.platform.startswith("linux"):
        assert team_run.team_available()                              # the shares below run on torch's team
    alone = run()
    monkeypatch.setattr(kernels, "MIN_SHARE_VALUES", 1)               # every call shared out
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    shared = run()
    assert all(torch.equal(a, b) for a, b in zip(alone, shared))
    for r in (0, 17, 36):                                             # and each row as if alone
        assert torch.equal(kernels.silu_mul_rows(gate_up[r:r + 1])[0], alone[4][r])


@pytest.mark.parametrize("threads,heads,kvh,hd", [(1, 8, 2, 64), (2, 8, 2, 64), (3, 6, 3, 32), (2, 16, 8, 128)])
def test_attention_of_many_rows_is_each_row_alone(threads, heads, kvh, hd):
    """attend_rows deals rows out to the team's threads by their context: bits as attend row by row."""
    g = torch.Generator().manual_seed(threads)
    block_size = 16
    ctxs = [700, 5, 300, 1, 260, 33]
    tables, at = [], 0
    for ctx in ctxs:
        n = -(-ctx // block_size)
        tables.append(np.arange(at + n - 1, at - 1, -1, dtype=np.int64))   # blocks in reverse: scattered
        at += n
    k_cache = torch.randn(at, block_size, kvh, hd, generator=g).bfloat16()
    v_cache = torch.randn(at, block_size, kvh, hd, generator=g).bfloat16()
    starts = [0, 1, 2, 4, 5, 6]                                       # token 3: a prompt's token, not touched
    q = torch.randn(7, heads, hd, generator=g).bfloat16()
    batch = kernels.row_batch(tables, ctxs, starts, threads=threads)
    assert len(batch.shares) == (threads if team_run.team_available() else 1)     # no team: the caller's thread
    assert sorted(np.concatenate(batch.shares).tolist()) == list(range(len(ctxs)))                  # each once
    out = torch.full((7, heads * hd), 7.0, dtype=torch.bfloat16)
    kernels.attend_rows(q, k_cache, v_cache, batch, out, heads, kvh)
    for table, ctx, start in zip(tables, ctxs, starts):
        one = torch.empty(heads * hd, dtype=torch.bfloat16)
        kernels.attend(q[start].data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), table, block_size, ctx,
                       one.data_ptr(), heads, kvh, hd)
        assert torch.equal(out[start], one)
    assert (out[3] == 7.0).all()


@pytest.mark.parametrize("heads,kvh,hd", [(16, 8, 128), (6, 3, 32), (4, 2, 64)])
def test_one_rows_key_heads_shared_out_give_the_bits_of_one_thread(heads, kvh, hd):
    """A row alone attends with its key heads dealt over torch's team: every share count gives the
    same bits (a request decodes alike alone and in a batch), and every head is written once."""
    g = torch.Generator().manual_seed(kvh)
    block_size, ctx = 16, 300
    table = np.arange(-(-ctx // block_size) - 1, -1, -1, dtype=np.int64)              # reversed: scattered
    k_cache = torch.randn(len(table), block_size, kvh, hd, generator=g).bfloat16()
    v_cache = torch.randn(len(table), block_size, kvh, hd, generator=g).bfloat16()
    q = torch.randn(heads, hd, generator=g).bfloat16()
    outs = {}
    for shares in (1, 2, 3, kvh, None):               # None: the default, torch's threads from 128 positions on
        out = torch.full((heads * hd,), float("nan"), dtype=torch.bfloat16)
        kernels.attend(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), table, block_size, ctx, out.data_ptr(),
                       heads, kvh, hd, shares=shares)
        outs[shares] = out
    assert not outs[1].isnan().any()
    assert all(torch.equal(out, outs[1]) for out in outs.values())


def test_nan_stays_nan():
    x = torch.tensor([[float("nan")] + [1.0] * 7]).bfloat16()
    out = torch.empty(1, 4, dtype=torch.bfloat16)
    kernels.silu_mul(x.data_ptr(), out.data_ptr(), 1, 4)
    assert out[0, 0].isnan() and not out[0, 1:].isnan().any()


# --- the one-row decoder in the engine -------------------------------------------------------------

def _decode_steps(eng, steps: int, mode: str, monkeypatch):
    """Prefill one request, then ``steps`` one-row decode steps through ``mode``: "row"
    (decode_row_forward), "compiled" (decoder_forward, which takes the same kernels) or "torch"
    (decoder_forward with them switched off). The hidden state of every step and the cache rows it wrote."""
    import engine.network.decoder as decoder_module
    from engine.network.decode_row import decode_row_forward
    from engine.serving.scheduler import ScheduledRow

    monkeypatch.setenv(kernels.SWITCH, "0" if mode == "torch" else "1")
    runner, cache = eng.runner, eng.cache
    req = eng.make_request(np.random.default_rng(3).standard_normal(16000).astype(np.float32) * 0.1)
    assert cache.allocator.grow(req.block_table, len(req.prompt_ids) + steps)
    rows = [ScheduledRow(req, 0, len(req.prompt_ids), True)]
    runner.encode_pending(rows)
    decoder_module.decoder_forward(runner.net, cache, runner.embeddings(runner.step_inputs(rows)),
                                   runner.step_inputs(rows).meta, runner.attention)
    out = []
    for i in range(steps):
        req.token_ids.append(11 + 7 * i)            # the next token, as if sampled
        rows = [ScheduledRow(req, len(req.prompt_ids) + i, 1, True)]
        inputs = runner.step_inputs(rows)
        embeds = runner.embeddings(inputs)
        if mode == "row":
            hidden = decode_row_forward(runner.net, cache, embeds, inputs.meta)
        else:
            hidden = decoder_module.decoder_forward(runner.net, cache, embeds, inputs.meta, runner.attention)
        slot = inputs.meta.slot_mapping[0]
        out.append((hidden, [c.flatten(0, 1)[slot].clone() for c in list(cache.k) + list(cache.v)]))
    cache.allocator.release(req.block_table)
    req.token_ids.clear()
    return out


def test_one_row_decoder_is_decoder_forward_bit_for_bit_and_near_the_torch_path(tiny_model_dir, monkeypatch):
    import engine

    eng = engine.load(tiny_model_dir, device="cpu", dtype="bfloat16")
    assert eng.runner.decode_row is not None            # chosen at load for bfloat16 on CPU
    row, compiled = _decode_steps(eng, 6, "row", monkeypatch), _decode_steps(eng, 6, "compiled", monkeypatch)
    for (h, cache_rows), (h_ref, cache_ref) in zip(row, compiled):
        assert torch.equal(h, h_ref)
        assert all(torch.equal(a, b) for a, b in zip(cache_rows, cache_ref))
    for (h, cache_rows), (h_ref, cache_ref) in zip(row, _decode_steps(eng, 6, "torch", monkeypatch)):
        assert h.shape == h_ref.shape and h.dtype == torch.bfloat16
        scale = h_ref.abs().max()
        assert (h.float() - h_ref.float()).abs().max() <= 4 * 2 ** -8 * scale
        assert torch.nn.functional.cosine_similarity(h.float(), h_ref.float()).item() > 0.999
        for a, b in zip(cache_rows, cache_ref):        # k (rotated) and v of every layer, as the torch path wrote
            # the hidden state's bound: a projection's last-bit difference (oneDNN's sum order is its own,
            # and differs by CPU kind) goes through the k norm and the rotation
            assert (a.float() - b.float()).abs().max() <= 4 * 2 ** -8 * b.abs().max().clamp_min(1e-3)


@pytest.mark.parametrize("shared", [False, True], ids=["one-thread", "rows-shared-over-the-team"])
def test_a_step_of_many_decode_rows_is_decoder_forward_bit_for_bit(tiny_model_dir, monkeypatch, shared):
    """A queue's decode step (three rows of one token) through the decode-row decoder equals
    decoder_forward's compiled path, with the rows' attention on one thread or shared out."""
    import engine
    from engine.network.decode_row import decode_row_forward, decode_rows_only
    from engine.network.decoder import decoder_forward
    from engine.serving.scheduler import ScheduledRow

    if shared:
        monkeypatch.setattr(kernels, "MIN_SHARE_POSITIONS", 1)
    eng = engine.load(tiny_model_dir, device="cpu", dtype="bfloat16")
    runner, cache = eng.runner, eng.cache
    reqs = [eng.make_request((0.1 * np.random.default_rng(s).standard_normal(8000 * (s + 1))).astype(np.float32))
            for s in range(3)]
    for req in reqs:
        assert cache.allocator.grow(req.block_table, len(req.prompt_ids) + 1)
    prompt = [ScheduledRow(req, 0, len(req.prompt_ids), True) for req in reqs]
    runner.encode_pending(prompt)
    inputs = runner.step_inputs(prompt)
    decoder_forward(runner.net, cache, runner.embeddings(inputs), inputs.meta, runner.attention)
    for req in reqs:
        req.token_ids.append(17)
    rows = [ScheduledRow(req, len(req.prompt_ids), 1, True) for req in reqs]
    inputs = runner.step_inputs(rows)
    embeds = runner.embeddings(inputs)
    assert decode_rows_only(embeds, inputs.meta)
    ref = decoder_forward(runner.net, cache, embeds, inputs.meta, runner.attention)
    inputs = runner.step_inputs(rows)                  # fresh step metadata: its row batch is built again
    out = decode_row_forward(runner.net, cache, embeds, inputs.meta)
    assert len(inputs.meta.row_batch.shares) == (2 if shared and torch.get_num_threads() > 1
                                                 and team_run.team_available() else 1)
    assert torch.equal(out, ref)


def test_a_request_decodes_alike_alone_and_in_a_batch(tiny_model_dir):
    """The queue's promise kept with the compiled ops: one clip's tokens alone (one-row steps) equal
    its tokens when it shares every step with other clips (decoder_forward over many rows)."""
    import engine

    eng = engine.load(tiny_model_dir, device="cpu", dtype="bfloat16")
    clips = [(0.1 * np.random.default_rng(s).standard_normal(16000 + 4000 * s)).astype(np.float32) for s in range(3)]
    alone = [eng.generate(c, max_new_tokens=12)[0] for c in clips]
    together = eng.generate(clips, max_new_tokens=12)
    assert together == alone


def test_a_trained_model_hears_the_same_words_either_way(monkeypatch):
    """The user's view: bfloat16 transcripts of real (synthetic) speech are the same words with the
    compiled ops as with the torch ops, and the one-row decoder did run."""
    from real_speech import wer

    sentence, with_kernels, without = words_with_and_without(monkeypatch, kernels.SWITCH, "bfloat16")
    assert with_kernels == without
    assert wer([sentence], [with_kernels]) <= 0.2


def test_where_the_compiled_ops_are_not_chosen(tiny_model_dir, monkeypatch):
    import engine

    from asr_kernels import f32_decode_row

    monkeypatch.setenv(f32_decode_row.SWITCH, "0")       # float32 has kernels of its own (test_f32_decode_row.py)
    assert engine.load(tiny_model_dir, device="cpu", dtype="float32").runner.decode_row is None
    monkeypatch.delenv(f32_decode_row.SWITCH)
    monkeypatch.setenv(kernels.SWITCH, "yes")
    with pytest.raises(ValueError, match=kernels.SWITCH):
        engine.load(tiny_model_dir, device="cpu", dtype="bfloat16")
