"""A paged KV cache: fixed-size blocks handed out to requests through block tables."""
from __future__ import annotations

import torch

from engine.network.config import DecoderConfig
from engine.serving.prefix_cache import PrefixIndex


class BlockAllocator:
    """Hands out block ids; finished, cancelled or preempted requests give theirs back.

    Blocks are placed so that a request's table stays a run of consecutive ids as it
    grows: the CPU attention then reads a row's keys in place, one view over many
    blocks, instead of gathering them. A table grows into the blocks right after its
    last one; a new run goes to the middle of the largest free hole, leaving the first
    half for the request before it to grow into. When the free blocks are fragmented,
    any free blocks do (the attention then gathers that row).

    With ``prefix_caching``, blocks also keep what they hold (``engine.serving.prefix_cache``):
    ``match`` gives a new request the blocks of its prompt's cached prefix, reference-counted
    (several requests read one block; it is free again when every holder has released it).
    Released blocks that hold a registered prefix stay cached and count as free, but are handed
    out only when no vacant block is left (least recently used first), or where a table grows
    into them; then they are forgotten.
    """

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = False):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"need at least one block of one slot, got {num_blocks} x {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._free = bytearray(b"\x01") * num_blocks    # 1 where the block is vacant: free, holding no cached prefix
        self._num_free = num_blocks                     # vacant blocks
        self._refs = [0] * num_blocks                   # holders of each allocated block
        self.prefix = PrefixIndex(block_size) if prefix_caching else None
        self._avail = bytearray(b"\x01") * num_blocks   # 1 where vacant or cached and held by nobody

    @property
    def num_free(self) -> int:
        """Blocks a request may get: vacant ones and cached ones nobody holds."""
        return self._num_free + (len(self.prefix.evictable) if self.prefix else 0)

    @property
    def num_cached_free(self) -> int:
        """Free blocks that still hold a cached prefix."""
        return len(self.prefix.evictable) if self.prefix else 0

    def match(self, keys: list[bytes]) -> tuple[list[int], int]:
        """(a block table holding the longest cached prefix of ``keys``, how many tokens it holds).

        The table's blocks are referenced for the caller. Full blocks are shared; a block the
        prompt parts from inside is taken over (forgotten: the caller writes past the match in it)
        when nobody holds it, and left out when somebody does (the match ends at its start)."""
        if self.prefix is None or not keys:
            return [], 0
        full, partial, n = self.prefix.match(keys)
        table = list(full)
        if partial is not None and self._refs[partial] == 0:
            self.prefix.forget(partial)
            table.append(partial)
        else:
            n = 0
        for b in table:
            self._take(b)
        return table, len(full) * self.block_size + n

    def register(self, table: list[int], keys: list[bytes]) -> None:
        """``table`` (held by the caller) holds the keys and values of ``keys``: cache them."""
        if self.prefix is not None:
            self.prefix.register(table, keys)

    def _take(self, b: int) -> None:
        """One more holder for cached block ``b``."""
        if self._refs[b] == 0:
            self.prefix.evictable.pop(b, None)
            self._avail[b] = 0
        self._refs[b] += 1

    def _evict(self, b: int) -> None:
        self.prefix.forget(b)
        self._free[b] = 1
        self._num_free += 1

    def blocks_needed(self, table: list[int], num_tokens: int) -> int:
        """How many more blocks ``table`` needs to hold ``num_tokens`` tokens."""
        return max(0, -(-num_tokens // self.block_size) - len(table))

    def grow(self, table: list[int], num_tokens: int) -> bool:
        """Extend ``table`` in place to cover ``num_tokens``; False (and no change) if blocks ran out."""
        need = self.blocks_needed(table, num_tokens)
        if need > self.num_free:
            return False
        if need:
            after = table[-1] + 1 if table else None
            if self.prefix is not None:
                self._make_room(after, need)
            blocks = self._place(after, need)
            for b in blocks:
                self._free[b] = self._avail[b] = 0
                self._refs[b] = 1
            self._num_free -= need
            table.extend(blocks)
        return True

    def holders(self, block: int) -> int:
        """How many tables hold ``block`` (0 when it is free)."""
        return self._refs[block]

    def release(self, table: list[int]) -> None:
        """Drop one reference to each block of ``table`` (emptied); unreferenced blocks are free again."""
        for b in table:
            self._refs[b] -= 1
            if self._refs[b] == 0:
                self._avail[b] = 1
                if self.prefix is not None and b in self.prefix.entry:
                    self.prefix.evictable[b] = None      # kept as cache until its room is wanted
                else:
                    self._free[b] = 1
                    self._num_free += 1
            elif self._refs[b] < 0:
                raise RuntimeError(f"block {b} released more often than it was handed out")
        table.clear()

    def _make_room(self, after: int | None, need: int) -> None:
        """Evict cached free blocks so that ``need`` vacant ones exist where ``_place`` will look:
        the blocks right after the table (it stays consecutive), else a run where the vacant blocks
        and the cached free ones together leave room (so tables stay runs as without the cache),
        else the least recently used ones."""
        run = b"\x01" * need
        if after is not None and self._avail.startswith(run, after):
            self._evict_range(after, need)
            return
        if self._largest_hole(self._free)[1] >= need:
            return
        start, length = self._largest_hole(self._avail)
        if length >= need:
            self._evict_range(start + ((length - need) // 2 if start > 0 else 0), need)
            return
        while self._num_free < need:
            self._evict(next(iter(self.prefix.evictable)))

    def _evict_range(self, start: int, count: int) -> None:
        for b in range(start, start + count):
            if not self._free[b]:
                self._evict(b)

    def _place(self, after: int | None, need: int) -> list[int]:
        """``need`` free block ids, consecutive with ``after`` (the table's next id) where possible."""
        free = self._free
        if after is not None and free.startswith(b"\x01" * need, after):
            return list(range(after, after + need))
        start, length = self._largest_hole(free)
        if length >= need:
            if start > 0:   # a table ends right before this hole: leave it room to grow
                start += (length - need) // 2
            return list(range(start, start + need))
        blocks, b = [], 0
        while len(blocks) < need:    # fragmented: any free blocks
            b = free.index(1, b)
            blocks.append(b)
            b += 1
        return blocks

    def _largest_hole(self, free: bytearray) -> tuple[int, int]:
        best, i = (0, 0), 0
        while True:
            i = free.find(1, i)
            if i < 0:
                return best
            end = free.find(0, i)
            end = len(free) if end < 0 else end
            if end - i > best[1]:
                best = (i, end - i)
            i = end


class KVCache:
    """Per-layer key and value pools: [layers, blocks, block_size, kv_heads, head_dim]."""

    def __init__(self, cfg: DecoderConfig, num_blocks: int, block_size: int, dtype, device,
                 prefix_caching: bool = False):
        shape = (cfg.layers, num_blocks, block_size, cfg.kv_heads, cfg.head_dim)
        # empty, not zeros: on CPU untouched pages are never resident, so a generous
        # budget costs memory only as requests fill it (every slot is written before it is read).
        self.k = torch.empty(shape, dtype=dtype, device=device)
        self.v = torch.empty(shape, dtype=dtype, device=device)
        self.block_size = block_size
        self.allocator = BlockAllocator(num_blocks, block_size, prefix_caching)

    @staticmethod
    def blocks_for_budget(cfg: DecoderConfig, budget_bytes: int, block_size: int, dtype) -> int:
        """How many blocks fit in ``budget_bytes`` of memory."""
        elem = torch.empty((), dtype=dtype).element_size()
        per_block = 2 * cfg.layers * block_size * cfg.kv_heads * cfg.head_dim * elem
        return max(1, budget_bytes // per_block)
