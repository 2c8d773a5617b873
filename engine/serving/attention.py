"""Which attention a step runs through, and adapters that give each one the same call.

    flash   flash-attn varlen over the block table (CUDA, 16-bit, when installed)
    triton  our Triton paged kernel (asr_kernels/paged_attention.py): CUDA without flash-attn
    torch   one SDPA call per row (decoder.paged_attention): CPU, and CUDA float32,
            the exact path the parity tests hold against transformers

flash and triton read their metadata from device tensors (``StepMetadata.tensors``),
so their steps can be captured in CUDA graphs; torch reads host lists and runs eagerly.
"""
from __future__ import annotations

import torch

from engine.network.decoder import StepMetadata, paged_attention
from engine.serving.flash import flash_attn_installed, flash_paged_attention
from asr_kernels import triton_available
from asr_kernels.paged_attention import paged_attention as paged_attention_kernel


def attention_backend(device: torch.device, dtype: torch.dtype) -> str:
    """The fastest backend that runs here; float32 keeps the exact torch path."""
    device = torch.device(device)
    if dtype == torch.float32:
        return "torch"
    if device.type == "cuda" and flash_attn_installed():
        return "flash"
    if triton_available(device):
        return "triton"
    return "torch"


def triton_paged_attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                           meta: StepMetadata) -> torch.Tensor:
    """q: [tokens, heads, hd]; cache_k/v: [blocks, block_size, kv_heads, hd] -> [tokens, heads * hd]."""
    t = meta.tensors
    out = paged_attention_kernel(q, cache_k, cache_v, t.cu_seqlens_q, t.cu_seqlens_k, t.block_table)
    return out.view(q.shape[0], -1)


_FUNCTIONS = {"flash": flash_paged_attention, "triton": triton_paged_attention, "torch": paged_attention}

def attention_function(backend: str):
    if backend not in _FUNCTIONS:
        raise ValueError(f"unknown attention backend {backend!r}; expected one of {tuple(_FUNCTIONS)}")
    return _FUNCTIONS[backend]
