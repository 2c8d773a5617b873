"""The CPU KV cache layout: short blocks kept consecutive per request, so the attention reads
a long row in place (no copy), with exactly the numbers the gathering path gives."""
from __future__ import annotations

import torch

from engine.network.decoder import StepMetadata, attention_plan, paged_attention
from engine.serving.kv_cache import BlockAllocator


def test_rows_growing_side_by_side_keep_consecutive_blocks():
    alloc = BlockAllocator(400, 4)
    tables = [[] for _ in range(16)]
    for tokens in range(8, 60, 3):          # 16 rows decoding together, each crossing blocks
        for table in tables:
            assert alloc.grow(table, tokens)
    for table in tables:
        assert table == list(range(table[0], table[0] + len(table)))
    assert alloc.num_free == 400 - sum(map(len, tables))


def test_full_cache_still_hands_out_every_block_and_takes_them_back():
    alloc = BlockAllocator(10, 2)
    a, b, c = [], [], []
    assert alloc.grow(a, 6) and alloc.grow(b, 6) and alloc.grow(c, 6)
    alloc.release(b)
    assert alloc.grow(a, 12)                   # fragmented: any free blocks do
    assert sorted(a + c) == sorted(set(a + c)) and alloc.num_free == 1
    assert not alloc.grow(c, 10)               # two more blocks needed, one free: no change
    assert len(c) == 3
    alloc.release(a)
    alloc.release(c)
    assert alloc.num_free == 10


def test_attention_over_consecutive_blocks_equals_the_gathered_path():
    torch.manual_seed(0)
    block, kvh, heads, hd = 4, 2, 4, 8
    ctxs = [3, 9, 14]                           # one block, three blocks, four blocks
    k = torch.randn(32, block, kvh, hd)
    v = torch.randn(32, block, kvh, hd)
    q = torch.randn(len(ctxs), heads, hd)
    consecutive = [[0], [4, 5, 6], [10, 11, 12, 13]]
    scattered = [[20], [30, 22, 25], [1, 27, 16, 8]]
    k2, v2 = k.clone(), v.clone()
    for src, dst in zip(consecutive, scattered):   # the same keys, stored in scattered blocks
        k2[dst], v2[dst] = k[src], v[src]

    def meta(tables):
        return StepMetadata(positions=None, slot_mapping=None, query_lens=[1] * len(ctxs),
                            context_lens=ctxs, block_tables=tables)

    m1, m2 = meta(consecutive), meta(scattered)
    assert all(row.blocks is None for row in attention_plan(m1, block, "cpu"))      # read in place
    assert [row.blocks is None for row in attention_plan(m2, block, "cpu")] == [True, False, False]
    assert torch.equal(paged_attention(q, k, v, m1), paged_attention(q, k2, v2, m2))
