"""Triton kernels against their torch references, and the references against transformers.

The kernels run on the CPU through Triton's interpreter. triton.jit reads
TRITON_INTERPRET when it decorates a kernel, i.e. when a kernel module is imported,
so the variable is set first thing. Those interpreted modules are then kept private
to this file: the variable is removed and sys.modules is put back as it was, so the
rest of the session (the engine, on CPU or CUDA) imports normal kernels and its
triton_available(cpu) stays False.
"""
import os

_SAVED_INTERPRET = os.environ.get("TRITON_INTERPRET")
os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported (see below)

import importlib  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

import asr_kernels  # noqa: E402


def _import_interpreted(*names):
    """Import fresh, interpreted copies of asr_kernels.<name>, then put the session back.

    Whatever sys.modules and the ``asr_kernels`` package held before is restored, and so is
    TRITON_INTERPRET: left set for the whole session it would make
    the engine's triton_available(cpu) True and run its tests through the interpreter.
    """
    full = ["asr_kernels._rounding"] + [f"asr_kernels.{n}" for n in names]  # _rounding first
    saved = {m: sys.modules.pop(m) for m in full if m in sys.modules}
    for m in saved:  # `from asr_kernels import x` reads the package attribute first
        delattr(asr_kernels, m.rsplit(".", 1)[1])
    try:
        fresh = [importlib.import_module(m) for m in full][1:]
    finally:
        for m in full:
            sys.modules.pop(m, None)
            if hasattr(asr_kernels, m.rsplit(".", 1)[1]):
                delattr(asr_kernels, m.rsplit(".", 1)[1])
        for m, module in saved.items():
            sys.modules[m] = module
            setattr(asr_kernels, m.rsplit(".", 1)[1], module)
        if _SAVED_INTERPRET is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = _SAVED_INTERPRET
    return fresh


rmsnorm, qkr, pattn = _import_interpreted("rmsnorm", "qk_norm_rope", "paged_attention")

from transformers.models.qwen3.configuration_qwen3 import Qwen3Config  # noqa: E402
from transformers.models.qwen3.modeling_qwen3 import (  # noqa: E402
    Qwen3RMSNorm,
    Qwen3RotaryEmbedding,
    apply_rotary_pos_emb,
)

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-3}
EPS = 1e-6


def assert_close(actual, expected):
    tol = TOL[expected.dtype]
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def rope_cos_sin(positions, head_dim, dtype, theta=1e6):
    # cos, sin: [tokens, head_dim], transformers' default RoPE at each token's position.
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
    freqs = positions[:, None].float() * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def qk_inputs(tokens, n_heads, n_kv_heads, head_dim, dtype, *, seed=0, num_blocks=12,
              block_size=4, pad_every=3, fused=True):
    """Arguments of qk_norm_rope (all but eps) plus the untouched cache contents."""
    g = torch.Generator().manual_seed(seed)
    if fused:  # q, k, v as views of one qkv projection output, as the engine has them
        qkv = torch.randn(tokens, (n_heads + 2 * n_kv_heads) * head_dim, generator=g).to(dtype)
        q, k, v = qkv.split([n_heads * head_dim, n_kv_heads * head_dim, n_kv_heads * head_dim], -1)
        q = q.view(tokens, n_heads, head_dim)
        k, v = k.view(tokens, n_kv_heads, head_dim), v.view(tokens, n_kv_heads, head_dim)
    else:
        q = torch.randn(tokens, n_heads, head_dim, generator=g).to(dtype)
        k = torch.randn(tokens, n_kv_heads, head_dim, generator=g).to(dtype)
        v = torch.randn(tokens, n_kv_heads, head_dim, generator=g).to(dtype)
    qw = (1 + 0.5 * torch.randn(head_dim, generator=g)).to(dtype)
    kw = (1 + 0.5 * torch.randn(head_dim, generator=g)).to(dtype)
    cos, sin = rope_cos_sin(torch.randint(0, 8192, (tokens,), generator=g), head_dim, dtype)
    shape = (num_blocks, block_size, n_kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=g).to(dtype)
    v_cache = torch.randn(shape, generator=g).to(dtype)
    slots = torch.randperm(num_blocks * block_size, generator=g)[:tokens]
    if pad_every:
        slots[pad_every - 1::pad_every] = -1
    return (q, k, v, qw, kw, cos, sin, k_cache, v_cache, slots), (k_cache.clone(), v_cache.clone())


def call(fn, args):
    q, k, v, qw, kw, cos, sin, k_cache, v_cache, slots = args
    return fn(q, k, v, qw, kw, EPS, cos, sin, k_cache, v_cache, slots)


def clone_caches(args):
    return args[:7] + (args[7].clone(), args[8].clone(), args[9])


# ---------------------------------------------------------------- dispatch


def test_triton_available(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not asr_kernels.triton_available("cpu")
    assert asr_kernels.triton_available(torch.device("cuda"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not asr_kernels.triton_available("cpu"), "the engine must not take the interpreter by accident"
    monkeypatch.setenv(asr_kernels.CPU_OPT_IN, "1")
    assert asr_kernels.triton_available("cpu")


@pytest.mark.parametrize("interpret, path", [("0", "reference"), ("1", "triton")])
def test_dispatch(monkeypatch, interpret, path):
    monkeypatch.setenv("TRITON_INTERPRET", interpret)
    monkeypatch.setenv(asr_kernels.CPU_OPT_IN, interpret)
    calls = []
    for mod, name in ((rmsnorm, "rms_norm_residual"), (qkr, "qk_norm_rope")):
        for kind in ("reference", "triton"):
            real = getattr(mod, f"{name}_{kind}")
            monkeypatch.setattr(mod, f"{name}_{kind}",
                                lambda *a, real=real, kind=kind: calls.append(kind) or real(*a))
    x = torch.randn(3, 64)
    rmsnorm.rms_norm_residual(x, x, torch.ones(64), EPS)
    args, _ = qk_inputs(3, 4, 2, 16, torch.float32)
    call(qkr.qk_norm_rope, args)
    assert calls == [path, path]


# ---------------------------------------------------------------- rms_norm_residual


# hidden=100 is not a power of two: exercises the masked tail of the row. As for
# qk_norm_rope, only bfloat16 runs the slow 33-token cases.
RMS_CASES = [
    pytest.param(tokens, hidden, dtype, with_residual,
                 id=f"{tokens}-{hidden}-{dtype}-{'res' if with_residual else 'nores'}")
    for tokens in (1, 7, 33)
    for hidden in (64, 1024, 100)
    for dtype in DTYPES
    for with_residual in (True, False)
    if dtype == torch.bfloat16 or tokens != 33
]


@pytest.mark.parametrize("tokens, hidden, dtype, with_residual", RMS_CASES)
def test_rms_norm_residual_matches_reference(tokens, hidden, dtype, with_residual):
    g = torch.Generator().manual_seed(tokens * hidden)
    x = torch.randn(tokens, hidden, generator=g).to(dtype)
    residual = torch.randn(tokens, hidden, generator=g).to(dtype) if with_residual else None
    weight = (1 + 0.5 * torch.randn(hidden, generator=g)).to(dtype)
    out, new_res = rmsnorm.rms_norm_residual_triton(x, residual, weight, EPS)
    ref_out, ref_res = rmsnorm.rms_norm_residual_reference(x, residual, weight, EPS)
    assert out.dtype == dtype and out.shape == (tokens, hidden)
    assert_close(out, ref_out)
    assert torch.equal(new_res, ref_res)  # one rounded add: bit-exact
    if not with_residual:
        assert new_res is x and ref_res is x


def test_rms_norm_float32_weight_promotes():
    # weight kept in float32 with bf16 activations: eager torch promotes the product.
    x, r = torch.randn(5, 64).bfloat16(), torch.randn(5, 64).bfloat16()
    w = torch.randn(64)
    out, _ = rmsnorm.rms_norm_residual_triton(x, r, w, EPS)
    ref, _ = rmsnorm.rms_norm_residual_reference(x, r, w, EPS)
    assert out.dtype == ref.dtype == torch.float32
    assert_close(out, ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_reference_matches_transformers(dtype):
    x, r = torch.randn(9, 256).to(dtype), torch.randn(9, 256).to(dtype)
    norm = Qwen3RMSNorm(256, eps=EPS).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(256))
        out, new_res = rmsnorm.rms_norm_residual_reference(x, r, norm.weight.detach(), EPS)
        assert torch.equal(new_res, x + r)
        assert torch.equal(out, norm(x + r))


def test_rms_norm_empty_and_bad_layouts():
    w = torch.ones(64)
    out, _ = rmsnorm.rms_norm_residual_triton(torch.empty(0, 64), None, w, EPS)
    assert out.shape == (0, 64)
    x = torch.randn(8, 64)
    bad = [
        (x.t().contiguous().t(), None, w),  # not contiguous
        (x, x.bfloat16(), w),  # residual dtype differs
        (x, x[:4], w),  # residual shape differs
        (x, None, torch.ones(32)),  # weight width differs
        (x[None], None, w),  # not 2-D
        (x.long(), None, w),  # not a float dtype
    ]
    for fn in (rmsnorm.rms_norm_residual_triton, rmsnorm.rms_norm_residual_reference):
        for xx, rr, ww in bad:
            with pytest.raises(ValueError):
                fn(xx, rr, ww, EPS)


# ---------------------------------------------------------------- qk_norm_rope


# Every shape in bfloat16 (the engine's dtype on GPU, and the one with the most rounding
# to get right); float32 and float16 skip the 33-token cases, which the interpreter runs
# slowly and which exercise no path the 7-token cases miss.
QK_CASES = [
    pytest.param(tokens, heads, head_dim, dtype, id=f"{tokens}-{heads[0]}x{heads[1]}-{head_dim}-{dtype}")
    for tokens in (1, 7, 33)
    for heads in ((16, 8), (4, 2), (14, 14))
    for head_dim in (16, 64, 128)
    for dtype in DTYPES
    if dtype == torch.bfloat16 or tokens != 33
]


@pytest.mark.parametrize("tokens, heads, head_dim, dtype", QK_CASES)
def test_qk_norm_rope_matches_reference(tokens, heads, head_dim, dtype):
    args, (k_before, v_before) = qk_inputs(tokens, *heads, head_dim, dtype, seed=tokens + head_dim,
                                           pad_every=3 if tokens > 1 else 0)
    ref_args = clone_caches(args)
    q_out = call(qkr.qk_norm_rope_triton, args)
    ref_q = call(qkr.qk_norm_rope_reference, ref_args)
    assert q_out.shape == (tokens, heads[0], head_dim) and q_out.is_contiguous()
    assert_close(q_out, ref_q)
    assert_close(args[7], ref_args[7])  # k_cache
    assert torch.equal(args[8], ref_args[8])  # v_cache: raw copies, bit-exact
    # Every slot nobody wrote (unused or belonging to a padding row) is untouched.
    slots = args[9]
    written = torch.zeros(k_before.shape[0] * k_before.shape[1], dtype=torch.bool)
    written[slots[slots >= 0]] = True
    for cache, before in ((args[7], k_before), (args[8], v_before)):
        flat, flat_before = cache.flatten(0, 1), before.flatten(0, 1)
        assert torch.equal(flat[~written], flat_before[~written])
        if written.any():
            assert not torch.equal(flat[written], flat_before[written])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_qk_norm_rope_separate_tensors(dtype):
    args, _ = qk_inputs(5, 8, 4, 64, dtype, fused=False)
    ref_args = clone_caches(args)
    assert_close(call(qkr.qk_norm_rope_triton, args), call(qkr.qk_norm_rope_reference, ref_args))
    assert_close(args[7], ref_args[7])
    assert torch.equal(args[8], ref_args[8])


@pytest.mark.parametrize("tokens, pad_every", [(1, 0), (7, 0), (33, 3)])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_qk_norm_rope_cpu_is_the_reference_bit_for_bit(tokens, pad_every, dtype):
    """The CPU decoder's path (q and k normed and rotated as one tensor, sin's sign folded in)
    gives exactly the reference's q_out and cache contents, padding rows included."""
    heads, kv_heads, head_dim = 16, 8, 128
    args, _ = qk_inputs(tokens, heads, kv_heads, head_dim, dtype, seed=tokens, num_blocks=20, pad_every=pad_every)
    ref_args = clone_caches(args)
    ref_q = call(qkr.qk_norm_rope_reference, ref_args)
    q, k, v, qw, kw, cos, sin, k_cache, v_cache, slots = args
    qk = torch.cat((q, k), dim=1)                     # the engine's adjacent q and k heads
    weight = torch.cat((qw.expand(heads, -1), kw.expand(kv_heads, -1)))
    valid = None if pad_every == 0 else slots >= 0
    q_out = qkr.qk_norm_rope_cpu(qk, weight, EPS, cos, qkr.signed_sin(sin), heads, v, k_cache, v_cache,
                                 slots if valid is None else slots[valid], valid)
    assert torch.equal(q_out, ref_q)
    assert torch.equal(k_cache, ref_args[7]) and torch.equal(v_cache, ref_args[8])


@pytest.mark.parametrize("fn", ["triton", "reference"])
def test_qk_norm_rope_padding_writes_nothing(fn):
    args, (k_before, v_before) = qk_inputs(6, 4, 2, 32, torch.bfloat16)
    args[9].fill_(-1)
    q_out = call(getattr(qkr, f"qk_norm_rope_{fn}"), args)
    assert torch.equal(args[7], k_before) and torch.equal(args[8], v_before)
    assert torch.isfinite(q_out.float()).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_qk_norm_rope_reference_matches_transformers(dtype):
    tokens, n_heads, n_kv, head_dim = 11, 4, 2, 64
    args, _ = qk_inputs(tokens, n_heads, n_kv, head_dim, dtype, pad_every=0)
    q, k, v, qw, kw, cos, sin, k_cache, v_cache, slots = args
    # cos/sin as Qwen3's own rotary module makes them for these positions.
    config = Qwen3Config(hidden_size=n_heads * head_dim, num_attention_heads=n_heads,
                         num_key_value_heads=n_kv, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6})
    positions = torch.arange(100, 100 + tokens)
    cos, sin = (t[0] for t in Qwen3RotaryEmbedding(config)(q, positions[None]))
    assert all(torch.equal(a, b) for a, b in zip((cos, sin), rope_cos_sin(positions, head_dim, dtype)))
    q_norm, k_norm = Qwen3RMSNorm(head_dim, eps=EPS).to(dtype), Qwen3RMSNorm(head_dim, eps=EPS).to(dtype)
    with torch.no_grad():
        q_norm.weight.copy_(qw)
        k_norm.weight.copy_(kw)
        # transformers: [tokens, heads, head_dim] with cos [tokens, head_dim] -> unsqueeze_dim=1
        want_q, want_k = apply_rotary_pos_emb(q_norm(q), k_norm(k), cos, sin, unsqueeze_dim=1)
    q_out = qkr.qk_norm_rope_reference(q, k, v, qw, kw, EPS, cos, sin, k_cache, v_cache, slots)
    assert torch.equal(q_out, want_q)
    assert torch.equal(k_cache.flatten(0, 1)[slots], want_k)
    assert torch.equal(v_cache.flatten(0, 1)[slots], v)


def test_qk_norm_rope_empty_and_bad_layouts():
    args, _ = qk_inputs(0, 4, 2, 16, torch.float32)
    assert call(qkr.qk_norm_rope_triton, args).shape == (0, 4, 16)
    args, _ = qk_inputs(4, 4, 2, 16, torch.float32)
    q, k, v, qw, kw, cos, sin, kc, vc, slots = args
    bad = [
        dict(q=q.transpose(1, 2).contiguous().transpose(1, 2)),  # head_dim not contiguous
        dict(k=k.bfloat16()),  # dtype mismatch
        dict(v=v[:, :1]),  # v heads differ from k
        dict(qw=torch.ones(8)),  # norm weight width
        dict(cos=cos[:2]),  # cos rows != tokens
        dict(kc=kc.transpose(0, 1), vc=vc.transpose(0, 1)),  # cache not contiguous
        dict(vc=vc[:, :, :1].contiguous()),  # cache heads differ
        dict(slots=slots.float()),  # slot dtype
        dict(q=torch.randn(4, 4, 15), k=torch.randn(4, 2, 15), v=torch.randn(4, 2, 15)),  # odd
    ]
    names = ("q", "k", "v", "qw", "kw", "cos", "sin", "kc", "vc", "slots")
    for fn in (qkr.qk_norm_rope_triton, qkr.qk_norm_rope_reference):
        for override in bad:
            case = dict(zip(names, args)) | override
            with pytest.raises(ValueError):
                call(fn, tuple(case[n] for n in names))


# ---------------------------------------------------------------- paged_attention


from kernel_inputs import PAGED_ROWS, paged_inputs  # noqa: E402

PAGED_CASES = [
    pytest.param(heads, head_dim, block_size, dtype, id=f"{heads[0]}x{heads[1]}-{head_dim}-bs{block_size}-{dtype}")
    for heads in ((4, 2), (4, 4), (8, 1))
    for head_dim in (16, 64)
    for block_size in (4, 16)
    for dtype in DTYPES
    if dtype == torch.bfloat16 or (head_dim == 16 and block_size == 4)
]


@pytest.mark.parametrize("heads, head_dim, block_size, dtype", PAGED_CASES)
def test_paged_attention_matches_reference(heads, head_dim, block_size, dtype):
    args = paged_inputs(PAGED_ROWS, *heads, head_dim, dtype, block_size=block_size, pad_rows=2, seed=head_dim)
    out = pattn.paged_attention_triton(*args)
    want = pattn.paged_attention_reference(*args)
    real = int(args[3][-1])
    assert out.shape == args[0].shape
    assert_close(out[:real], want[:real])
    assert torch.equal(out[real:], torch.zeros_like(out[real:]))   # padding tokens stay zero


def test_paged_attention_reference_equals_the_engine_torch_path():
    from engine.network.decoder import StepMetadata
    from engine.network.decoder import paged_attention as engine_attention

    rows = PAGED_ROWS
    q, k_cache, v_cache, cu_q, cu_k, table = paged_inputs(rows, 4, 2, 32, torch.float32, block_size=16)
    meta = StepMetadata(positions=torch.zeros(0), slot_mapping=torch.zeros(0), query_lens=[r[0] for r in rows],
                        context_lens=[r[1] for r in rows],
                        block_tables=[table[i, :-(-c // 16)].tolist() for i, (_, c) in enumerate(rows)])
    want = engine_attention(q, k_cache, v_cache, meta).view_as(q)
    got = pattn.paged_attention_reference(q, k_cache, v_cache, cu_q, cu_k, table)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_paged_attention_is_causal_within_a_chunk():
    # Changing the key at the chunk's last position changes only the last query's output.
    q, k_cache, v_cache, cu_q, cu_k, table = paged_inputs([(6, 10)], 2, 1, 16, torch.float32)
    before = pattn.paged_attention_triton(q, k_cache, v_cache, cu_q, cu_k, table)
    last = int(table[0, 9 // 4]) * 4 + 9 % 4          # slot of position 9, seen by the last query only
    k_cache.view(-1, 1, 16)[last] += 5
    after = pattn.paged_attention_triton(q, k_cache, v_cache, cu_q, cu_k, table)
    assert torch.equal(after[:5], before[:5]) and not torch.equal(after[5], before[5])


def test_paged_attention_bad_layouts():
    args = paged_inputs([(1, 5), (3, 3)], 4, 2, 16, torch.float32)
    q, kc, vc, cu_q, cu_k, table = args
    bad = [
        (q.transpose(1, 2).contiguous().transpose(1, 2), kc, vc, cu_q, cu_k, table),   # head_dim strided
        (q, kc.bfloat16(), vc.bfloat16(), cu_q, cu_k, table),                          # dtype mismatch
        (q[:, :3], kc, vc, cu_q, cu_k, table),                                          # 3 heads over 2
        (q, kc, vc, cu_q.long(), cu_k, table),                                          # int64 metadata
        (q, kc, vc, cu_q[:-1], cu_k, table),                                            # rows disagree
        (q, kc.transpose(0, 1), vc.transpose(0, 1), cu_q, cu_k, table),                 # cache strided
    ]
    for fn in (pattn.paged_attention_triton, pattn.paged_attention_reference):
        for case in bad:
            with pytest.raises(ValueError):
                fn(*case)


def test_engine_with_triton_attention_is_token_exact(tiny_model_dir, monkeypatch):
    # The engine's CUDA path without flash-attn, run on CPU: device-tensor metadata padded to
    # row and token buckets, mixed and chunked steps, attention through the (interpreted)
    # Triton kernel. Float32 greedy tokens equal the exact torch path's.
    from conftest import tone_clip as clip

    import engine
    import engine.serving.attention
    from engine.serving.runner import ModelRunner

    calls = []
    monkeypatch.setattr(engine.serving.attention, "paged_attention_kernel",
                        lambda *a: calls.append(a[3].numel() - 1) or pattn.paged_attention_triton(*a))
    clips = [clip(s, 300 + i) for i, s in enumerate([0.4, 3.0, 9.5, 1.2])]
    caps = dict(max_batch_size=3, max_prefill_rows=2, max_step_tokens=48)
    want = engine.load(tiny_model_dir, **caps, dtype="float32").generate(clips, max_new_tokens=10)
    eng = engine.load(tiny_model_dir, **caps, dtype="float32")
    eng.core.runner = ModelRunner(eng.net, eng.cache, eng.torch_device, pad_buckets=True, attention="triton")
    assert eng.runner.tensor_metadata and eng.runner.graphs is None   # graphs are for CUDA only
    assert eng.generate(clips, max_new_tokens=10) == want
    assert calls and set(calls) <= {8, 16}, "rows are padded to a row bucket"
