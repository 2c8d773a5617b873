"""The scheduler alone, driven by a fake model: caps, fairness, priority, cancel and preemption."""
from __future__ import annotations

import pytest

from engine.serving.kv_cache import BlockAllocator
from engine.serving.request import Request, RequestState
from engine.serving.scheduler import Scheduler, SchedulerConfig

EOS = 0


def fake_request(prompt_len: int, new_tokens: int, priority: int = 0) -> Request:
    req = Request(prompt_ids=[7] * prompt_len, audio_start=0, features=None, num_audio_tokens=0,
                  max_new_tokens=new_tokens, priority=priority, eos_token_ids=(EOS,))
    return req


def fake_step(sched: Scheduler, caps: SchedulerConfig):
    """One step: check caps, then 'generate' token 1 for every sampling row."""
    rows = sched.schedule()
    assert sum(r.length for r in rows) <= caps.max_step_tokens
    decode = [r for r in rows if r.kind == "decode"]
    prefill = [r for r in rows if r.kind != "decode"]
    if prefill and decode:
        assert len(prefill) <= caps.max_prefill_rows
    assert len(rows) <= caps.max_batch_size + caps.max_prefill_rows
    assert len(decode) <= caps.max_batch_size
    assert len({r.request.id for r in rows}) == len(rows), "a request got two rows"
    for r in rows:  # every row has the blocks it writes to
        assert len(r.request.block_table) * sched.allocator.block_size >= r.start + r.length
    finished = sched.postprocess(rows, {r.request.id: 1 for r in rows if r.sample})
    return rows, finished


def drain(sched, caps, limit=10_000):
    steps = 0
    while sched.has_work():
        fake_step(sched, caps)
        steps += 1
        assert steps < limit, "scheduler made no progress"
    return steps


def test_all_finish_with_their_lengths_and_blocks_come_back():
    caps = SchedulerConfig(max_batch_size=4, max_prefill_rows=2, max_step_tokens=32)
    sched = Scheduler(caps, BlockAllocator(64, 16))
    reqs = [fake_request(5 + 7 * i, 3 + i) for i in range(10)]
    for r in reqs:
        sched.add(r)
    drain(sched, caps)
    assert all(r.finished and len(r.token_ids) == r.max_new_tokens for r in reqs)
    assert sched.allocator.num_free == 64


def test_postprocess_refuses_a_dropped_row():
    caps = SchedulerConfig()
    sched = Scheduler(caps, BlockAllocator(8, 16))
    sched.add(fake_request(4, 2))
    rows = sched.schedule()
    with pytest.raises(RuntimeError, match="dropped"):
        sched.postprocess(rows, {})


def test_newcomer_gets_first_token_within_a_few_steps_when_decode_set_is_full():
    caps = SchedulerConfig(max_batch_size=4, max_prefill_rows=2, max_step_tokens=64)
    sched = Scheduler(caps, BlockAllocator(256, 16))
    for _ in range(4):
        sched.add(fake_request(8, 500))
    for _ in range(5):
        fake_step(sched, caps)
    assert len([r for r in sched.running if not r.in_prefill]) == 4   # decode set at its cap
    newcomer = fake_request(40, 5)
    sched.add(newcomer)
    submitted = sched.step_count
    while newcomer.first_token_step is None:
        fake_step(sched, caps)
        assert sched.step_count - submitted <= 4, "newcomer starved behind a full decode set"


def test_decode_rows_rotate_so_nobody_starves():
    caps = SchedulerConfig(max_batch_size=3, max_prefill_rows=1, max_step_tokens=64)
    sched = Scheduler(caps, BlockAllocator(256, 16))
    reqs = [fake_request(4, 50) for _ in range(6)]
    for r in reqs:
        sched.add(r)
    for _ in range(30):
        fake_step(sched, caps)
    counts = [len(r.token_ids) for r in reqs]
    assert min(counts) >= 5 and max(counts) - min(counts) <= 8


def test_higher_priority_is_scheduled_first():
    caps = SchedulerConfig(max_batch_size=2, max_prefill_rows=1, max_step_tokens=16)
    sched = Scheduler(caps, BlockAllocator(64, 16))
    low = [fake_request(10, 20) for _ in range(3)]
    for r in low:
        sched.add(r)
    fake_step(sched, caps)
    live = fake_request(10, 3, priority=10)
    sched.add(live)
    rows, _ = fake_step(sched, caps)
    assert rows[0].request is live or live in [r.request for r in rows]
    steps = 0
    while not live.finished:
        rows, _ = fake_step(sched, caps)
        assert live in [r.request for r in rows], "the high-priority request skipped a step"
        steps += 1
    assert steps <= 4


def test_preemption_frees_blocks_and_the_victim_resumes_with_its_tokens():
    caps = SchedulerConfig(max_batch_size=4, max_prefill_rows=4, max_step_tokens=64)
    sched = Scheduler(caps, BlockAllocator(4, 8))     # 32 slots in all
    reqs = [fake_request(6, 14) for _ in range(3)]    # each needs 20 slots (3 blocks) at the end
    for r in reqs:
        sched.add(r)
    drain(sched, caps)
    assert sched.preemptions > 0
    assert all(r.finished and len(r.token_ids) == 14 for r in reqs)
    assert sched.allocator.num_free == 4


def test_preempted_request_keeps_generated_tokens_for_recompute():
    caps = SchedulerConfig(max_batch_size=4, max_prefill_rows=4, max_step_tokens=64)
    sched = Scheduler(caps, BlockAllocator(3, 8))
    a, b = fake_request(6, 12), fake_request(6, 12)
    sched.add(a)
    sched.add(b)
    while sched.preemptions == 0:
        fake_step(sched, caps)
    victim = next(r for r in (a, b) if r.state is RequestState.WAITING)
    assert victim.num_cached == 0 and victim.block_table == [] and victim.token_ids
    tokens_before = list(victim.token_ids)
    drain(sched, caps)
    assert victim.token_ids[:len(tokens_before)] == tokens_before


def test_release_on_cancel_returns_blocks():
    caps = SchedulerConfig()
    sched = Scheduler(caps, BlockAllocator(8, 16))
    r = fake_request(30, 5)
    sched.add(r)
    fake_step(sched, caps)
    assert sched.allocator.num_free < 8
    sched.release(r)
    assert sched.allocator.num_free == 8 and not sched.has_work()


def test_a_prompt_larger_than_the_cache_fails_alone():
    caps = SchedulerConfig()
    sched = Scheduler(caps, BlockAllocator(2, 8))
    big, small = fake_request(40, 2), fake_request(4, 2)
    sched.add(big)
    sched.add(small)
    drain(sched, caps)
    assert big.finished and "more than the whole cache" in big.error
    assert sched.take_rejected() == [big]
    assert small.finished and small.error is None and len(small.token_ids) == 2


def test_bad_caps_raise_value_error():
    with pytest.raises(ValueError):
        SchedulerConfig(max_step_tokens=0)


def test_file_prefill_yields_to_a_live_update_and_still_finishes():
    """While a live update (higher priority) is in the engine, queued files only decode; in the gaps
    between updates they prefill one row of at most ``background_prefill_tokens`` a step; a stream
    that never leaves a gap does not stop them for good."""
    caps = SchedulerConfig(max_batch_size=8, max_prefill_rows=4, max_step_tokens=512,
                           background_prefill_tokens=64, background_window_steps=4)
    sched = Scheduler(caps, BlockAllocator(512, 16))
    decoding = fake_request(10, 200)
    sched.add(decoding)
    fake_step(sched, caps)                                  # a file already decoding
    files = [fake_request(1000, 3) for _ in range(2)]
    update = fake_request(40, 6, priority=10)
    for r in files + [update]:
        sched.add(r)
    rows, _ = fake_step(sched, caps)
    assert {r.request.id for r in rows} == {decoding.id, update.id}   # the file decodes beside the update
    while not update.finished:
        rows, _ = fake_step(sched, caps)
        assert not any(r.request in files for r in rows), "a file prefilled beside a live update"
    gap = []                                               # the update is done: files prefill, in small pieces
    for _ in range(3):
        rows, _ = fake_step(sched, caps)
        gap.append([r for r in rows if r.request in files])
    assert all(len(g) == 1 and g[0].length <= 64 for g in gap)
    # A stream whose next update is always there: the files still get a piece now and then.
    before = sum(f.num_cached for f in files)
    for _ in range(40):
        if not any(r.priority == 10 and not r.finished for r in sched.running + sched.waiting):
            sched.add(fake_request(40, 6, priority=10))
        rows, _ = fake_step(sched, caps)
        assert all(r.length <= 64 for r in rows if r.request in files)
    assert before < sum(f.num_cached for f in files) < 2000
    # Long after the last update, the files are foreground again: full prefill budget.
    drain(sched, caps)
    assert all(f.finished for f in files)


def test_requests_of_one_priority_get_the_whole_budget_whatever_the_priority():
    """Background throttling needs a higher priority in the engine: a queue of negative-priority
    files alone prefills as fast as a queue of priority-0 ones."""
    caps = SchedulerConfig(max_step_tokens=2048)
    sched = Scheduler(caps, BlockAllocator(4096, 16))
    for _ in range(3):
        sched.add(fake_request(1000, 3, priority=-1))
    rows, _ = fake_step(sched, caps)
    assert sum(r.length for r in rows) == 2048


def test_files_added_after_an_idle_while_are_not_held_back_by_an_old_update():
    """The engine does not step while idle, so the window is also counted in seconds: files queued
    a while after the last live update prefill at full speed at once."""
    now = [100.0]
    caps = SchedulerConfig(max_step_tokens=2048, background_window_s=0.05)
    sched = Scheduler(caps, BlockAllocator(4096, 16), clock=lambda: now[0])
    sched.add(fake_request(40, 2, priority=10))
    drain(sched, caps)
    now[0] += 0.1          # an idle while: the engine did not step
    for _ in range(3):
        sched.add(fake_request(1000, 3))
    rows, _ = fake_step(sched, caps)
    assert sum(r.length for r in rows) == 2048


def test_the_window_in_seconds_reads_the_injected_clock():
    """The same queue without the idle while (the clock stands still): files still yield to the update."""
    caps = SchedulerConfig(max_step_tokens=2048, background_window_s=0.05)
    sched = Scheduler(caps, BlockAllocator(4096, 16), clock=lambda: 100.0)
    sched.add(fake_request(40, 2, priority=10))
    drain(sched, caps)
    for _ in range(3):
        sched.add(fake_request(1000, 3))
    rows, _ = fake_step(sched, caps)
    assert sum(r.length for r in rows) == caps.background_prefill_tokens
