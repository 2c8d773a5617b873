"""Many requests in shared steps give exactly the tokens each gets alone (float32)."""
from __future__ import annotations

import pytest
import torch
from conftest import tone_clip as clip

import engine
from engine.serving.runner import (
    DECODE_BUCKETS,
    MIXED_BUCKETS,
    bucket_for,
    build_step_inputs,
)

LENGTHS = [0.4, 3.0, 9.5, 1.2, 17.0, 0.8, 5.5, 2.2, 12.0, 0.5, 7.0, 4.1]


@pytest.fixture(scope="module")
def clips():
    return [clip(s, 100 + i) for i, s in enumerate(LENGTHS)]


@pytest.fixture(scope="module")
def alone(tiny_model_dir, clips):
    eng = engine.load(tiny_model_dir, dtype="float32")
    return [eng.generate([c], max_new_tokens=20)[0] for c in clips]


def run_staggered(eng, clips, every: int = 2):
    """Submit one clip every ``every`` steps; record what kinds of rows each step mixed."""
    requests, step_kinds = [], []
    pending = list(clips)
    while pending or any(not r.finished for r in requests):
        if pending and eng.scheduler.step_count % every == 0:
            requests.append(eng.submit(pending.pop(0), max_new_tokens=20))
        rows_before = eng.scheduler.step_count
        eng.step()
        if eng.scheduler.step_count > rows_before:
            step_kinds.append(eng.core.last_step_kinds)
    return requests, step_kinds


def test_mixed_steps_are_token_exact(tiny_model_dir, clips, alone):
    # Small caps: decode rows share steps with prefill rows, long prompts are chunked.
    eng = engine.load(tiny_model_dir, max_batch_size=5, max_prefill_rows=2, max_step_tokens=48, dtype="float32")
    requests, kinds = run_staggered(eng, clips)
    assert [r.token_ids for r in requests] == alone
    assert any("decode" in k and {"prefill", "chunk"} & k for k in kinds), "no step mixed prefill and decode rows"
    assert any("chunk" in k for k in kinds), "no long prompt was chunked"


def test_preemption_recomputes_exactly(tiny_model_dir, clips, alone):
    # A cache of 3 blocks of 128 slots cannot hold all running requests: some are preempted
    # (blocks freed) and recomputed later from their prompt and tokens so far.
    eng = engine.load(tiny_model_dir, max_batch_size=8, max_step_tokens=256, block_size=128,
                      kv_cache_bytes=3 * 2 * 2 * 128 * 2 * 16 * 4, dtype="float32")
    assert eng.cache.allocator.num_blocks == 3
    requests, _ = run_staggered(eng, clips, every=1)
    assert [r.token_ids for r in requests] == alone
    assert eng.scheduler.preemptions > 0
    assert eng.cache.allocator.num_free == eng.cache.allocator.num_blocks


def test_cancel_frees_blocks_and_others_finish(tiny_model_dir, clips, alone):
    eng = engine.load(tiny_model_dir, max_batch_size=4, dtype="float32")
    requests = [eng.submit(c, max_new_tokens=20) for c in clips[:5]]
    for _ in range(3):
        eng.step()
    requests[1].cancel()
    while eng.has_work():
        eng.step()
    assert requests[1].finish_reason == "cancelled"
    assert [r.token_ids for i, r in enumerate(requests) if i != 1] == [alone[i] for i in (0, 2, 3, 4)]
    assert eng.cache.allocator.num_free == eng.cache.allocator.num_blocks


def test_padded_bucket_gives_same_logits(tiny_model_dir, clips):
    eng = engine.load(tiny_model_dir, dtype="float32")
    reqs = [eng.add_request(eng.make_request(c)) for c in clips[:3]]
    rows = eng.scheduler.schedule()
    eng.runner.encode_pending(rows)
    plain = build_step_inputs(rows, eng.cache.block_size, eng.torch_device)
    padded = build_step_inputs(rows, eng.cache.block_size, eng.torch_device,
                               pad_to=bucket_for(plain.num_tokens, MIXED_BUCKETS))
    assert padded.input_ids.numel() > plain.input_ids.numel()
    h_plain = eng.runner.hidden_states(plain)
    h_padded = eng.runner.hidden_states(padded)
    torch.testing.assert_close(h_padded[:plain.num_tokens], h_plain, rtol=1e-5, atol=1e-5)
    for r in reqs:
        eng.scheduler.release(r)


def test_bucket_choice():
    assert bucket_for(1, DECODE_BUCKETS) == 1
    assert bucket_for(5, DECODE_BUCKETS) == 8
    assert bucket_for(65, MIXED_BUCKETS) == 128
    assert bucket_for(10**6, MIXED_BUCKETS) == 10**6


def test_padded_engine_is_token_exact(tiny_model_dir, clips, alone):
    eng = engine.load(tiny_model_dir, pad_buckets=True, max_batch_size=6, dtype="float32")
    assert eng.generate(clips[:6], max_new_tokens=20) == alone[:6]
