"""The block allocator's prefix cache: hits, misses, eviction, shared blocks and their reference counts.

No model: prompts are key lists as ``prefix_cache.prompt_keys`` makes them; the engine-level
behaviour (a live pass that finds its prefix, exact logits, no leaked blocks) is in test_stream_reuse.
"""
from __future__ import annotations

import torch

from engine.serving.kv_cache import BlockAllocator
from engine.serving.prefix_cache import prompt_keys
from engine.serving.request import Request
from engine.serving.scheduler import Scheduler, SchedulerConfig

BS = 4


def _keys(ids):
    return prompt_keys(list(ids), len(ids), 0, None)


def _filled(alloc: BlockAllocator, ids) -> list[int]:
    """A table holding ``ids``'s keys and values, registered, still held."""
    table: list[int] = []
    assert alloc.grow(table, len(ids))
    alloc.register(table, _keys(ids))
    return table


def test_a_released_prompt_is_found_again_and_a_different_one_is_not():
    alloc = BlockAllocator(16, BS, prefix_caching=True)
    first = _filled(alloc, range(10))          # two full blocks and two slots of a third
    blocks = list(first)
    alloc.release(first)
    assert alloc.num_free == 16 and alloc.num_cached_free == 3
    table, n = alloc.match(_keys(range(10)))
    assert table == blocks and n == 10           # the partial third block too: nobody held it
    alloc.release(table)
    table, n = alloc.match(_keys([0, 1, 2, 3, 4, 5, 99, 7]))
    assert table == blocks[:2] and n == 6        # parts inside the second block: its first two slots
    alloc.release(table)
    assert alloc.match(_keys([7, 1, 2, 3])) == ([], 0)   # a miss


def test_audio_embeddings_are_part_of_the_key():
    ids = [5, 6, 9, 9, 9, 9, 9, 9, 7]            # audio placeholders (9) at 2..7
    emb = torch.arange(6 * 3, dtype=torch.float32).view(6, 3)
    other = emb.clone()
    other[3, 1] += 1e-6                          # one value of one row differs
    a, b = prompt_keys(ids, 2, 6, emb), prompt_keys(ids, 2, 6, other)
    assert a[:5] == b[:5] and a[5] != b[5] and a[6:] == b[6:]
    assert prompt_keys(ids, 2, 6, None) == a[:2]     # not encoded yet: only the text before the audio
    alloc = BlockAllocator(8, BS, prefix_caching=True)
    table: list[int] = []
    alloc.grow(table, len(ids))
    alloc.register(table, a)
    alloc.release(table)
    got, n = alloc.match(b)
    assert n == 4 + 1                            # the first block, then the second up to the changed row
    alloc.release(got)


def test_two_requests_share_a_prefix_and_each_holds_a_reference():
    alloc = BlockAllocator(16, BS, prefix_caching=True)
    owner = _filled(alloc, range(9))
    a, na = alloc.match(_keys(list(range(8)) + [50, 51]))
    b, nb = alloc.match(_keys(list(range(8)) + [60]))
    assert a == b == owner[:2] and na == nb == 8
    assert all(alloc.holders(x) == 3 for x in owner[:2])
    assert alloc.holders(owner[2]) == 1          # a held partial block is never taken over: the match ends before it
    alloc.release(owner)
    alloc.release(a)
    assert all(alloc.holders(x) == 1 for x in b) and alloc.num_cached_free == 1
    alloc.release(b)
    assert alloc.num_free == 16 and alloc.num_cached_free == 3


def test_cached_blocks_are_evicted_only_under_pressure_oldest_first():
    alloc = BlockAllocator(6, BS, prefix_caching=True)
    old, new = _filled(alloc, range(8)), _filled(alloc, range(100, 108))
    newer = list(new)
    alloc.release(old)
    alloc.release(new)
    assert alloc.num_free == 6 and alloc.num_cached_free == 4
    one: list[int] = []
    assert alloc.grow(one, BS)                   # a vacant block: nothing cached is touched
    for ids in (range(8), range(100, 108)):
        hit, n = alloc.match(_keys(ids))
        assert n == 8
        alloc.release(hit)
    more: list[int] = []
    assert alloc.grow(more, 4 * BS)              # 1 vacant block left: the 3 least recently used cached ones go
    assert alloc.num_cached_free == 1 and set(alloc.prefix.entry) == {newer[1]}
    assert alloc.match(_keys(range(8))) == ([], 0)
    assert not alloc.grow(more, 7 * BS)          # more than all blocks: nothing changes
    assert alloc.grow(more, 5 * BS) and alloc.num_free == 0
    alloc.release(more)
    alloc.release(one)
    assert alloc.num_free == 6 and alloc.num_cached_free == 0


def test_a_table_grows_into_the_stale_cached_block_after_it():
    """A new pass that parts from the last one keeps its table consecutive: the last pass's next
    blocks are cached but stale for it, and are evicted for it rather than splitting the table."""
    alloc = BlockAllocator(12, BS, prefix_caching=True)
    last = _filled(alloc, range(16))
    blocks = list(last)
    alloc.release(last)
    table, n = alloc.match(_keys(list(range(8)) + [70] * 8))
    assert n == 8
    assert alloc.grow(table, 16) and table == blocks


def _request(ids, max_new_tokens=4):
    return Request(prompt_ids=list(ids), audio_start=len(ids), features=None, num_audio_tokens=0,
                   max_new_tokens=max_new_tokens)


def test_the_scheduler_starts_from_the_cache_and_a_cancelled_request_returns_its_blocks():
    alloc = BlockAllocator(32, BS, prefix_caching=True)
    sched = Scheduler(SchedulerConfig(max_step_tokens=64), alloc)
    first = _request(range(20))
    sched.add(first)
    rows = sched.schedule()
    sched.postprocess(rows, {first.id: 1000})
    assert first.prefix_cached == 0 and alloc.num_cached_free == 0   # registered, but still held
    second = _request(list(range(18)) + [77, 78])
    sched.add(second)
    rows = sched.schedule()
    row = next(r for r in rows if r.request is second)
    assert second.prefix_cached == 16 and row.start == 16   # four full blocks shared with the running first
    assert all(alloc.holders(b) == 2 for b in second.block_table[:4])
    second.cancel()
    sched.release(second)                        # what the engine does with a cancelled request
    assert all(alloc.holders(b) == 1 for b in first.block_table[:4])
    sched.release(first)
    assert alloc.num_free == 32
    assert sched.prefix_tokens_cached == 16 and sched.prompt_tokens == 40
