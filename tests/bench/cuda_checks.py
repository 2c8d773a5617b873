"""CUDA checks for a lent GPU (run by gpu_check.sh; pytest does not collect this file by default).

Graph replay equals eager (with flash-attn when installed, else the Triton paged kernel),
flash-attn and the Triton attention equal the exact torch path, the Triton kernels equal
their references on the device, and CUDA float32 keeps token parity with transformers.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from checkpoints import build_checkpoint  # noqa: E402
from reference import reference_generate  # noqa: E402
from conftest import tone_clip as clip  # noqa: E402

import engine  # noqa: E402

if not torch.cuda.is_available():
    raise SystemExit("cuda_checks.py needs a CUDA GPU")

CLIPS = [clip(s, i) for i, s in enumerate([0.4, 3.0, 8.1, 17.0, 31.0, 5.5])]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_checkpoint(tmp_path_factory.mktemp("tiny"), seed=0)


def test_cuda_float32_tokens_equal_transformers(model_dir):
    eng = engine.load(model_dir, device="cuda", dtype="float32")   # float32: exact torch attention path
    assert eng.runner.backend == "torch"
    for audio in CLIPS:
        assert eng.generate([audio], max_new_tokens=24)[0] == reference_generate(model_dir, audio, max_new_tokens=24)


def test_graph_replay_equals_eager(model_dir):
    graphs = engine.load(model_dir, device="cuda", dtype="bfloat16")
    print(f"attention backend: {graphs.runner.backend}")
    assert graphs.runner.backend in ("flash", "triton")
    eager = engine.load(model_dir, device="cuda", dtype="bfloat16")
    eager.runner.graphs = None
    assert graphs.runner.graphs is not None
    assert graphs.generate(CLIPS, max_new_tokens=24) == eager.generate(CLIPS, max_new_tokens=24)
    assert len(graphs.runner.graphs.graphs) >= 2     # decode and mixed buckets were captured


@pytest.mark.parametrize("backend", ["flash", "triton"])
def test_attention_backend_equals_torch_path(model_dir, backend):
    from engine.serving.flash import flash_attn_installed
    from engine.serving.runner import ModelRunner

    if backend == "flash" and not flash_attn_installed():
        pytest.skip("flash-attn is not installed on this machine")
    eng = engine.load(model_dir, device="cuda", dtype="bfloat16")
    fast = ModelRunner(eng.net, eng.cache, eng.torch_device, cuda_graphs=False, attention=backend)
    exact = ModelRunner(eng.net, eng.cache, eng.torch_device, attention="torch")
    reqs = [eng.add_request(eng.make_request(c)) for c in CLIPS[:4]]
    rows = eng.scheduler.schedule()
    fast.encode_pending(rows)
    inputs = fast.step_inputs(rows)
    h_fast = fast.hidden_states(inputs).float()
    h_exact = exact.hidden_states(inputs).float()
    torch.testing.assert_close(h_fast[:inputs.num_tokens], h_exact[:inputs.num_tokens], rtol=3e-2, atol=3e-2)
    for r in reqs:
        eng.scheduler.release(r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_paged_attention_kernel_on_device(dtype):
    from kernel_inputs import PAGED_ROWS, paged_inputs

    from asr_kernels.paged_attention import (
        paged_attention_reference,
        paged_attention_triton,
    )

    rows = PAGED_ROWS + [(1, 700), (300, 900), (1, 4000)]
    args = [t.cuda() for t in paged_inputs(rows, 16, 8, 128, dtype, block_size=256, pad_rows=3)]
    real = int(args[3][-1])
    out, want = paged_attention_triton(*args), paged_attention_reference(*args)
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out[:real], want[:real], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_triton_kernels_on_device(dtype):
    from asr_kernels.qk_norm_rope import qk_norm_rope_reference, qk_norm_rope_triton
    from asr_kernels.rmsnorm import rms_norm_residual_reference, rms_norm_residual_triton

    dev = "cuda"
    x, res, w = (torch.randn(37, 1024, device=dev, dtype=dtype) for _ in range(2)), None, None
    x, res = list(x)
    w = torch.randn(1024, device=dev, dtype=dtype)
    for a, b in zip(rms_norm_residual_triton(x, res, w, 1e-6), rms_norm_residual_reference(x, res, w, 1e-6)):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2)
    tokens, heads, kvh, hd, blocks, bs = 37, 16, 8, 128, 4, 256
    qkv = torch.randn(tokens, (heads + 2 * kvh) * hd, device=dev, dtype=dtype)
    q, k, v = qkv.split([heads * hd, kvh * hd, kvh * hd], -1)
    q, k, v = q.view(tokens, heads, hd), k.view(tokens, kvh, hd), v.view(tokens, kvh, hd)
    qw, kw = torch.randn(hd, device=dev, dtype=dtype), torch.randn(hd, device=dev, dtype=dtype)
    pos = torch.arange(tokens, device=dev).float()[:, None] * (1e-3 ** (torch.arange(0, hd, 2, device=dev) / hd))
    emb = torch.cat([pos, pos], -1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    slots = torch.randperm(blocks * bs, device=dev)[:tokens]
    slots[3] = -1
    caches = [torch.zeros(blocks, bs, kvh, hd, device=dev, dtype=dtype) for _ in range(4)]
    out_t = qk_norm_rope_triton(q, k, v, qw, kw, 1e-6, cos, sin, caches[0], caches[1], slots)
    out_r = qk_norm_rope_reference(q, k, v, qw, kw, 1e-6, cos, sin, caches[2], caches[3], slots)
    torch.testing.assert_close(out_t, out_r, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(caches[0], caches[2], rtol=2e-2, atol=2e-2)
    assert torch.equal(caches[1], caches[3])
