"""A paged KV cache: fixed-size blocks handed out to requests through block tables."""
from __future__ import annotations

from collections import deque

import torch

from engine.network.config import DecoderConfig


class BlockAllocator:
    """Hands out block ids; finished, cancelled or preempted requests give theirs back."""

    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need at least one block of one slot, got {num_blocks} x {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def blocks_needed(self, table: list[int], num_tokens: int) -> int:
        """How many more blocks ``table`` needs to hold ``num_tokens`` tokens."""
        return max(0, -(-num_tokens // self.block_size) - len(table))

    def grow(self, table: list[int], num_tokens: int) -> bool:
        """Extend ``table`` in place to cover ``num_tokens``; False (and no change) if blocks ran out."""
        need = self.blocks_needed(table, num_tokens)
        if need > len(self._free):
            return False
        table.extend(self._free.popleft() for _ in range(need))
        return True

    def release(self, table: list[int]) -> None:
        self._free.extend(table)
        table.clear()


class KVCache:
    """Per-layer key and value pools: [layers, blocks, block_size, kv_heads, head_dim]."""

    def __init__(self, cfg: DecoderConfig, num_blocks: int, block_size: int, dtype, device):
        shape = (cfg.layers, num_blocks, block_size, cfg.kv_heads, cfg.head_dim)
        # empty, not zeros: on CPU untouched pages are never resident, so a generous
        # budget costs memory only as requests fill it (every slot is written before it is read).
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.block_size = block_size
        self.allocator = BlockAllocator(num_blocks, block_size)

    @staticmethod
    def blocks_for_budget(cfg: DecoderConfig, budget_bytes: int, block_size: int, dtype) -> int:
        """How many blocks fit in ``budget_bytes`` of memory."""
        elem = torch.empty((), dtype=dtype).element_size()
        per_block = 2 * cfg.layers * block_size * cfg.kv_heads * cfg.head_dim * elem
        return max(1, budget_bytes // per_block)
