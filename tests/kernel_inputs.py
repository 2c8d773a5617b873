"""Inputs for the paged-attention kernel tests, shared by the CPU tests and the GPU checks."""
from __future__ import annotations

import torch


def paged_inputs(rows, heads, kv_heads, head_dim, dtype, *, block_size=4, pad_rows=0, seed=0):
    """q, caches and flash-style metadata for rows given as (query_len, context_len)."""
    g = torch.Generator().manual_seed(seed)
    need = [-(-ctx // block_size) for _, ctx in rows]
    num_blocks = sum(need) + 3
    order = torch.randperm(num_blocks, generator=g).tolist()   # scattered blocks, as after churn
    table = torch.zeros(len(rows) + pad_rows, max(need) + 1, dtype=torch.int32)
    used = 0
    for r, n in enumerate(need):
        table[r, :n] = torch.tensor(order[used:used + n], dtype=torch.int32)
        used += n
    q_lens = [ql for ql, _ in rows] + [0] * pad_rows
    ctxs = [c for _, c in rows] + [0] * pad_rows
    cu_q = torch.tensor([0] + q_lens).cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + ctxs).cumsum(0).to(torch.int32)
    tokens = int(cu_q[-1]) + 5   # a bucket's padding tokens after the last row
    q = torch.randn(tokens, heads, head_dim, generator=g).to(dtype)
    shape = (num_blocks, block_size, kv_heads, head_dim)
    k_cache = torch.randn(shape, generator=g).to(dtype)
    v_cache = torch.randn(shape, generator=g).to(dtype)
    return q, k_cache, v_cache, cu_q, cu_k, table


# Decode rows at many context lengths (one block, several, a partial last block), a whole
# prompt, a chunk of a longer prompt, a prompt longer than one query tile, padding rows.
PAGED_ROWS = [(1, 1), (1, 5), (1, 33), (20, 20), (7, 30), (1, 64), (37, 50)]
