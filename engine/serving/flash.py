"""Attention through flash-attn on CUDA: varlen prefill/decode over the paged KV cache.

Shapes stay static for CUDA graphs: rows are padded to a bucket with zero-length
rows (their cu_seqlens repeat), and per-step metadata lives in tensors passed in
explicitly through ``StepMetadata.tensors``.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch


@functools.lru_cache(maxsize=1)
def flash_attn_installed() -> bool:
    try:
        from flash_attn import flash_attn_varlen_func  # noqa: F401
    except Exception:  # not installed, or built for another torch/CUDA
        return False
    return True


@dataclass
class AttentionTensors:
    """Per-step attention metadata as device tensors, padded to ``rows`` rows."""

    cu_seqlens_q: torch.Tensor     # [rows + 1] int32
    cu_seqlens_k: torch.Tensor     # [rows + 1] int32
    block_table: torch.Tensor      # [rows, max_blocks] int32 (padding rows: block 0, never read)
    max_query_len: int             # upper bounds: fixed per bucket so a captured graph stays valid
    max_context_len: int


def attention_tensors(query_lens: list[int], context_lens: list[int], block_tables: list[list[int]],
                      rows: int, max_blocks: int, device, max_query_len: int | None = None,
                      max_context_len: int | None = None) -> AttentionTensors:
    """Build padded metadata. Padding rows have no queries and no context."""
    if len(query_lens) > rows:
        raise ValueError(f"{len(query_lens)} rows do not fit a bucket of {rows}")
    pad = rows - len(query_lens)
    q = [0] + list(query_lens) + [0] * pad
    k = [0] + list(context_lens) + [0] * pad
    table = torch.zeros(rows, max_blocks, dtype=torch.int32)
    for i, blocks in enumerate(block_tables):
        if len(blocks) > max_blocks:
            raise ValueError(f"row {i} has {len(blocks)} blocks, more than the {max_blocks} a bucket allows")
        table[i, :len(blocks)] = torch.tensor(blocks, dtype=torch.int32)
    cu_q = torch.tensor(q, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    cu_k = torch.tensor(k, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return AttentionTensors(cu_q.to(device), cu_k.to(device), table.to(device),
                            max_query_len or max(query_lens, default=1), max_context_len or max(context_lens, default=1))


def flash_paged_attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor, meta) -> torch.Tensor:
    """Causal varlen attention reading keys and values in place from the paged cache.

    q: [tokens, heads, hd]; cache_k/v: [blocks, block_size, kv_heads, hd] -> [tokens, heads * hd].
    """
    from flash_attn import flash_attn_varlen_func

    t: AttentionTensors = meta.tensors
    if cache_k.shape[1] % 256:
        raise ValueError(f"flash-attn paged KV needs a block size that is a multiple of 256, got {cache_k.shape[1]}")
    out = flash_attn_varlen_func(
        q, cache_k, cache_v, cu_seqlens_q=t.cu_seqlens_q, cu_seqlens_k=t.cu_seqlens_k,
        max_seqlen_q=t.max_query_len, max_seqlen_k=t.max_context_len, causal=True, block_table=t.block_table)
    return out.reshape(q.shape[0], -1)
