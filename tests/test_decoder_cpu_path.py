"""The CPU decoder path (checks once per step, q and k normed together) is the kernels' torch
references bit for bit: same hidden states, same cache contents, float32 and bfloat16."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import engine
import engine.network.decoder as decoder
from engine.serving.scheduler import ScheduledRow
from asr_kernels import bf16_decode_row as row_kernels
from asr_kernels.qk_norm_rope import qk_norm_rope_reference
from asr_kernels.rmsnorm import rms_norm_residual_reference

SR = 16000


def _noise(seconds: float, seed: int) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(seconds * SR))).astype(np.float32)


def _step(eng, requests):
    """Prefill every request's prompt in one mixed step; the hidden states and the cache after it."""
    rows = []
    for req in requests:
        assert eng.cache.allocator.grow(req.block_table, len(req.prompt_ids))
        rows.append(ScheduledRow(req, 0, len(req.prompt_ids), True))
    eng.runner.encode_pending(rows)
    hidden = eng.runner.hidden_states(eng.runner.step_inputs(rows))
    size = eng.cache.block_size
    slots = torch.tensor([req.block_table[t // size] * size + t % size
                          for req in requests for t in range(len(req.prompt_ids))])
    written = [cache.flatten(0, 1)[slots] for cache in eng.cache.k + eng.cache.v]   # per layer: [tokens, kvh, hd]
    for req in requests:
        eng.cache.allocator.release(req.block_table)
    return hidden, written


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cpu_decoder_path_equals_the_kernel_references(tiny_model_dir, dtype, monkeypatch):
    # the torch ops (bfloat16's compiled small ops are held to these in tests/test_bf16_decode_row.py)
    monkeypatch.setenv(row_kernels.SWITCH, "0")
    eng = engine.load(tiny_model_dir, device="cpu", dtype=dtype)
    make = lambda: [eng.make_request(_noise(1.3, 1)), eng.make_request(_noise(2.1, 2), context="Qwen")]
    first = make()
    hidden, caches = _step(eng, first)
    # the dispatching path, each kernel through its checked torch reference, per layer
    monkeypatch.setattr(decoder, "triton_available", lambda device: True)
    monkeypatch.setattr(decoder, "qk_norm_rope", qk_norm_rope_reference)
    monkeypatch.setattr(decoder, "rms_norm_residual", rms_norm_residual_reference)
    second = make()
    ref_hidden, ref_caches = _step(eng, second)
    assert hidden.dtype == getattr(torch, dtype)
    assert torch.equal(hidden, ref_hidden)
    assert all(torch.equal(a, b) for a, b in zip(caches, ref_caches))
