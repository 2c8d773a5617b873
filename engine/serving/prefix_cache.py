"""What the KV cache's blocks hold, by content: so a request finds the prompt prefix an earlier one computed.

A prompt slot's key is its token id, and for an audio placeholder also a digest of its audio
embedding row (the decoder's real input there). A full block is known by a hash chain: the hash of
its parent's hash and its slots' keys, so equal hashes mean equal inputs from the first token on,
hence equal keys and values. A block that is not full (a prompt's last one), and a full one a new
prompt parts from inside, is found through its parent's hash and compared slot by slot.

Blocks stay registered after their last holder releases them: free, but evictable, in least
recently used order (``BlockAllocator`` hands them out only when no other free block is left, or
to keep a table's blocks consecutive). A live stream's next pass thus finds the system turn, its
context and the audio windows of the last pass still cached; files find a shared context.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict

import torch

ROOT = b""


def chain_hash(parent: bytes, keys: list[bytes]) -> bytes:
    h = hashlib.blake2b(parent, digest_size=32)
    for key in keys:
        h.update(key)
    return h.digest()


def prompt_keys(prompt_ids: list[int], audio_start: int, num_audio_tokens: int,
                audio_embeds: torch.Tensor | None) -> list[bytes]:
    """Keys of the prompt's slots; without embeddings yet, only the slots before the audio."""
    end = audio_start + num_audio_tokens
    if audio_embeds is None and num_audio_tokens:
        return [i.to_bytes(8, "little", signed=True) for i in prompt_ids[:audio_start]]
    keys = [i.to_bytes(8, "little", signed=True) for i in prompt_ids]
    if num_audio_tokens:
        rows = audio_embeds.detach().to("cpu").contiguous()
        raw = rows.view(torch.uint8).numpy() if rows.dtype != torch.float32 else rows.numpy().view("uint8")
        for j in range(num_audio_tokens):
            keys[audio_start + j] = b"a" + hashlib.blake2b(raw[j].tobytes(), digest_size=16).digest()
    assert len(keys) == len(prompt_ids) and end <= len(keys)
    return keys


class PrefixIndex:
    """Registered blocks: full ones by chain hash, every one under its parent's hash with its slot keys."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.by_hash: dict[bytes, int] = {}
        self.children: dict[bytes, dict[int, list[bytes]]] = {}   # parent hash -> {block: its slot keys}
        self.entry: dict[int, tuple[bytes, bytes | None]] = {}    # block -> (parent hash, own hash if full)
        self.evictable: OrderedDict[int, None] = OrderedDict()    # registered blocks nobody holds, oldest first

    def match(self, keys: list[bytes]) -> tuple[list[int], int | None, int]:
        """(full blocks whose chain matches ``keys`` from the start, then a block whose first slots
        match the next keys or None, and how many of its slots match)."""
        bs, full, parent = self.block_size, [], ROOT
        while (len(full) + 1) * bs <= len(keys):
            h = chain_hash(parent, keys[len(full) * bs:(len(full) + 1) * bs])
            block = self.by_hash.get(h)
            if block is None:
                break
            full.append(block)
            parent = h
        rest = keys[len(full) * bs:(len(full) + 1) * bs]
        best, best_n = None, 0
        for block, slots in self.children.get(parent, {}).items():
            n = 0
            for a, b in zip(slots, rest):
                if a != b:
                    break
                n += 1
            if n > best_n:
                best, best_n = block, n
        return full, best, best_n

    def register(self, table: list[int], keys: list[bytes]) -> None:
        """Record that ``table`` holds the keys and values of ``keys`` (its first slots)."""
        bs, parent = self.block_size, ROOT
        for i, block in enumerate(table):
            slots = keys[i * bs:(i + 1) * bs]
            if not slots:
                return
            own = chain_hash(parent, slots) if len(slots) == bs else None
            known = self.entry.get(block)
            grows = known is not None and known[1] is None and known[0] == parent and \
                len(slots) > len(self.children[parent][block])    # a partial block now holds more
            if known is None or grows:
                self.forget(block)
                if own is None or own not in self.by_hash:   # else another block holds the same already
                    self.entry[block] = (parent, own)
                    self.children.setdefault(parent, {})[block] = slots
                    if own is not None:
                        self.by_hash[own] = block
            if own is None:
                return
            parent = own

    def forget(self, block: int) -> None:
        """Unregister ``block`` (evicted, or about to be written past what it holds)."""
        known = self.entry.pop(block, None)
        if known is None:
            return
        parent, own = known
        siblings = self.children.get(parent)
        if siblings is not None:
            siblings.pop(block, None)
            if not siblings:
                del self.children[parent]
        if own is not None and self.by_hash.get(own) == block:
            del self.by_hash[own]
        self.evictable.pop(block, None)
