"""The Qwen3 decoder forward pass over a flat batch of rows with a paged KV cache.

A step packs rows of many requests into one token axis: decode rows (one token)
and prefill rows (a prompt or a chunk of one). Per-step metadata arrives
explicitly as a ``StepMetadata``; nothing is kept in module globals.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F

from engine.network import ops
from engine.network.modules import Qwen3ASRNetwork
from asr_kernels import bf16_decode_row as row_kernels
from asr_kernels import bf16_prompt_attention as prompt_kernel
from asr_kernels import triton_available
from asr_kernels.qk_norm_rope import _check as check_qk_norm_rope
from asr_kernels.qk_norm_rope import qk_norm_rope, qk_norm_rope_cpu, signed_sin
from asr_kernels.rmsnorm import _check as check_rms_norm
from asr_kernels.rmsnorm import rms_norm_residual, rms_norm_residual_cpu


class PagedKV(Protocol):
    """What the decoder needs of a paged KV cache (engine.serving.kv_cache.KVCache):
    per layer, key and value tensors of shape [blocks, block_size, kv_heads, head_dim]."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]


@dataclass
class StepMetadata:
    """Where each row's tokens sit in the flat batch and in the cache.

    Rows with ``query_lens == 0`` are padding rows of a bucket: they have no
    tokens; padding tokens carry slot -1 and are never attended to.
    """

    positions: torch.Tensor          # [tokens] int64, position of each token in its request
    slot_mapping: torch.Tensor       # [tokens] int64, cache slot of each token, -1 for padding
    query_lens: list[int]            # tokens of each row in this step
    context_lens: list[int]          # tokens of each row in the cache after this step
    block_tables: list[list[int]]    # cache blocks of each row
    tensors: object = None           # flash.AttentionTensors for the flash and triton backends, else None
    plan: list | None = None         # the torch path's per-row attention plan, built on first use
    row_batch: object = None         # its decode rows for the compiled kernels (bf16_decode_row.RowBatch), likewise

    @property
    def query_starts(self) -> list[int]:
        starts, acc = [], 0
        for n in self.query_lens:
            starts.append(acc)
            acc += n
        return starts


def rope_cos_sin(inv_freq: torch.Tensor, positions: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin [tokens, head_dim] as transformers computes them (float32, then cast)."""
    freqs = positions[:, None].float() * inv_freq[None, :].float()
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@dataclass
class _RowAttention:
    """One row's attention plan, built once per step and reused by every layer."""

    start: int                       # first query token in the flat batch
    n: int                           # query tokens
    ctx: int                         # cached tokens it attends over
    block: int                       # its first cache block, when its blocks are consecutive ids
    blocks: torch.Tensor | None      # [n_blocks] block ids to gather otherwise
    mask: torch.Tensor | None        # [n, ctx] for a chunk of a longer prompt
    causal: bool
    table: np.ndarray                # [used blocks] int64: its cache blocks up to ctx (the compiled kernels read it)


def attention_plan(meta: StepMetadata, block_size: int, device) -> list[_RowAttention]:
    """Per-row views and masks of a step; cached on ``meta`` (the same for all layers)."""
    if meta.plan is not None:
        return meta.plan
    plan = []
    for start, n, ctx, table in zip(meta.query_starts, meta.query_lens, meta.context_lens, meta.block_tables):
        if n == 0:
            continue
        used = table[:-(-ctx // block_size)]
        # Consecutive blocks are one stretch of memory (the allocator keeps tables so): read in place.
        blocks = None if used[-1] - used[0] == len(used) - 1 and used == list(range(used[0], used[-1] + 1)) \
            else torch.tensor(used, device=device)
        mask = None
        if 1 < n < ctx:  # a chunk of a longer prompt: query i sits at position ctx - n + i
            qpos = torch.arange(ctx - n, ctx, device=device)[:, None]
            mask = torch.arange(ctx, device=device)[None, :] <= qpos
        plan.append(_RowAttention(start, n, ctx, table[0], blocks, mask, causal=n > 1 and n == ctx,
                                  table=np.asarray(used, dtype=np.int64)))
    meta.plan = plan
    return plan


def _row_kv(cache: torch.Tensor, heads_view: torch.Tensor, row: _RowAttention) -> torch.Tensor:
    """A row's keys or values [1, kv_heads, ctx, hd]: a view when its blocks are consecutive.

    cache: [blocks, block_size, kv_heads, hd]; heads_view: its [blocks, kv_heads, block_size, hd] view."""
    if row.blocks is None:   # one as_strided instead of two slices: this runs for every row of every layer
        stride = heads_view.stride()
        _, kv_heads, _, hd = heads_view.shape
        return heads_view.as_strided((1, kv_heads, row.ctx, hd), stride,
                                     heads_view.storage_offset() + row.block * stride[0])
    return cache.index_select(0, row.blocks).flatten(0, 1)[:row.ctx].transpose(0, 1)[None]


def paged_attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                    meta: StepMetadata) -> torch.Tensor:
    """Causal attention of each row's queries over its cached context (exact torch path).

    q: [tokens, heads, hd]; cache_k/v: [blocks, block_size, kv_heads, hd] -> [tokens, heads * hd].
    One SDPA call per row; the views are built with as few ops as possible, since a decode
    step runs this for every row of every layer.
    """
    tokens, heads, hd = q.shape
    plan = attention_plan(meta, cache_k.shape[1], q.device)
    keys, values = cache_k.transpose(1, 2), cache_v.transpose(1, 2)   # [blocks, kv_heads, block_size, hd]
    q_heads = q.transpose(0, 1)[None]                                  # [1, heads, tokens, hd]
    if len(plan) == 1 and plan[0].n == tokens == 1:     # one decode row: no list, no cat
        row = plan[0]
        return ops.attention(q_heads, _row_kv(cache_k, keys, row), _row_kv(cache_v, values, row),
                             enable_gqa=True).view(1, heads * hd)
    outs, filled = [], 0
    for row in plan:
        o = ops.attention(q_heads.narrow(2, row.start, row.n), _row_kv(cache_k, keys, row),
                               _row_kv(cache_v, values, row), attn_mask=row.mask,
                               is_causal=row.causal, enable_gqa=True)
        outs.append(o.view(1, heads, hd) if row.n == 1 else o[0].transpose(0, 1))   # [n, heads, hd]
        filled = row.start + row.n
    if filled < tokens or not outs:   # padding tokens of a bucket: attended by nobody, output zero
        outs.append(q.new_zeros(tokens - filled, heads, hd))
    return torch.cat(outs).view(tokens, heads * hd)


def compiled_paged_attention(q: torch.Tensor, cache_k: torch.Tensor, cache_v: torch.Tensor,
                             meta: StepMetadata) -> torch.Tensor:
    """paged_attention for bfloat16 on CPU with the compiled kernels: the rows of one query (decode
    rows) through ``bf16_decode_row.attend_rows``, a prompt's rows through ``bf16_prompt_attention``
    where the CPU has AVX512-BF16 without AMX, else SDPA as there.
    q: [tokens, heads, hd]; cache_k/v: [blocks, block_size, kv_heads, hd] -> [tokens, heads * hd]."""
    tokens, heads, hd = q.shape
    block_size, kv_heads = cache_k.shape[1], cache_k.shape[2]
    plan = attention_plan(meta, block_size, q.device)
    batch = decode_row_batch(meta, plan)
    q = q.contiguous()
    covered = sum(row.n for row in plan)
    out = (torch.empty if covered == tokens else torch.zeros)(tokens, heads * hd, dtype=q.dtype)  # padding: zero
    if len(batch.ctxs):
        row_kernels.attend_rows(q, cache_k, cache_v, batch, out, heads, kv_heads)
    prompts = [row for row in plan if row.n > 1]
    if prompts and prompt_kernel.supports(hd) and prompt_kernel.enabled():
        for row in prompts:
            prompt_kernel.attend_prompt(q.narrow(0, row.start, row.n), cache_k, cache_v, row.table, row.ctx,
                                        out.narrow(0, row.start, row.n))
        return out
    keys, values = cache_k.transpose(1, 2), cache_v.transpose(1, 2)   # [blocks, kv_heads, block_size, hd]
    for row in prompts:
        q_heads = q.narrow(0, row.start, row.n).transpose(0, 1)[None]   # [1, heads, n, hd]
        o = ops.attention(q_heads, _row_kv(cache_k, keys, row), _row_kv(cache_v, values, row),
                          attn_mask=row.mask, is_causal=row.causal, enable_gqa=True)
        out[row.start:row.start + row.n] = o[0].transpose(0, 1).reshape(row.n, heads * hd)
    return out


def decode_row_batch(meta: StepMetadata, plan: list[_RowAttention]):
    """The step's rows of one query (decode rows) for ``bf16_decode_row.attend_rows``, built once."""
    if meta.row_batch is None:
        decode = [row for row in plan if row.n == 1]
        meta.row_batch = row_kernels.row_batch([row.table for row in decode], [row.ctx for row in decode],
                                               [row.start for row in decode])
    return meta.row_batch


def compiled_ops_apply(net: Qwen3ASRNetwork, cache: PagedKV, embeds: torch.Tensor, attention) -> bool:
    """Whether a step takes the compiled small ops (``asr_kernels.bf16_decode_row``): bfloat16 on CPU,
    with the torch attention path, its kernels compiled and not switched off."""
    lm = net.language_model
    return (attention is paged_attention and embeds.dtype == torch.bfloat16 and embeds.device.type == "cpu"
            and lm.norm.weight.dtype == torch.bfloat16 and cache.k[0].dtype == torch.bfloat16
            and net.config.decoder.heads % net.config.decoder.kv_heads == 0 and row_kernels.enabled())


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """[tokens, 2 inter] (gate, then up) -> [tokens, inter]: the MLP's activation."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def decoder_forward(net: Qwen3ASRNetwork, cache: PagedKV, embeds: torch.Tensor, meta: StepMetadata,
                    attention=paged_attention) -> torch.Tensor:
    """Run all decoder layers. embeds: [tokens, hidden] -> final-normed hidden [tokens, hidden]."""
    cfg = net.config.decoder
    lm = net.language_model
    eps = cfg.rms_norm_eps
    cos, sin = rope_cos_sin(lm.inv_freq, meta.positions, embeds.dtype)
    act = silu_mul
    if triton_available(embeds.device):
        norm, prologue = rms_norm_residual, _kernel_prologue(cfg, cos, sin, meta.slot_mapping)
    else:
        check_rms_norm(embeds, None, lm.layers[0].input_layernorm.weight)   # once, not per call
        if compiled_ops_apply(net, cache, embeds, attention):
            norm, prologue, attention, act = _compiled_ops(cfg, cos, sin, meta)
        else:
            norm, prologue = rms_norm_residual_cpu, _torch_prologue(cfg, cos, sin, meta.slot_mapping)
    x, residual = embeds, None
    for i, layer in enumerate(lm.layers):
        h, residual = norm(x, residual, layer.input_layernorm.weight, eps)
        q = prologue(layer, layer.qkv(h), cache.k[i], cache.v[i])
        x = layer.o(attention(q, cache.k[i], cache.v[i], meta))
        h, residual = norm(x, residual, layer.post_attention_layernorm.weight, eps)
        x = layer.down(act(layer.gate_up(h)))
    h, _ = norm(x, residual, lm.norm.weight, eps)
    return h


def _kernel_prologue(cfg, cos, sin, slot_mapping):
    """Attention prologue through the dispatching kernel (Triton on CUDA): qkv [tokens, (heads +
    2 kvh) hd] -> q [tokens, heads, hd], with k and v written into the layer's cache."""
    heads, kvh, hd = cfg.heads, cfg.kv_heads, cfg.head_dim

    def prologue(layer, qkv, k_cache, v_cache):
        q, k, v = qkv.split([heads * hd, kvh * hd, kvh * hd], dim=-1)
        return qk_norm_rope(q.view(-1, heads, hd), k.view(-1, kvh, hd), v.view(-1, kvh, hd),
                            layer.self_attn.q_norm.weight, layer.self_attn.k_norm.weight, cfg.rms_norm_eps,
                            cos, sin, k_cache, v_cache, slot_mapping)
    return prologue


def _compiled_ops(cfg, cos, sin, meta: StepMetadata):
    """(norm, prologue, attention, act) for a CPU bfloat16 step with the compiled small ops.

    Every token takes them, each token alone (a prompt's many tokens shared out over torch's
    threads), so a request gets the same bits alone (the decode-row decoder, decode_row.py) or beside
    other rows; only the attention of a prompt's rows stays on SDPA."""
    heads, kvh = cfg.heads, cfg.kv_heads
    slots = meta.slot_mapping.to(torch.int64).numpy()
    cos, sin_signed = cos.contiguous(), signed_sin(sin).contiguous()           # [tokens, hd]

    def prologue(layer, qkv, k_cache, v_cache):
        return row_kernels.prologue_rows(qkv, qk_norm_weight(layer.self_attn, heads, kvh), cos, sin_signed,
                                         k_cache, v_cache, slots, heads, kvh, cfg.rms_norm_eps)

    return row_kernels.norm_rows, prologue, compiled_paged_attention, row_kernels.silu_mul_rows


def _torch_prologue(cfg, cos, sin, slot_mapping):
    """The same prologue without Triton (CPU): the kernel's torch reference, bit for bit, with its
    layout check and padding filter done once per step instead of per layer, and q and k normed
    and rotated together. A CPU decode step is short enough that per-op overhead counts."""
    heads, kvh, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
    slots = slot_mapping.long()
    valid = None if not bool((slots < 0).any()) else slots >= 0   # padding tokens write no cache
    if valid is not None:
        slots = slots[valid]
    sin_signed = signed_sin(sin)[:, None, :]              # [tokens, 1, hd]: broadcast over the heads
    cos_heads = cos[:, None, :]
    checked = False

    def prologue(layer, qkv, k_cache, v_cache):
        nonlocal checked
        attn = layer.self_attn
        if not checked:                                      # the first layer's inputs stand for all
            q, k, v = qkv.split([heads * hd, kvh * hd, kvh * hd], dim=-1)
            check_qk_norm_rope(q.view(-1, heads, hd), k.view(-1, kvh, hd), v.view(-1, kvh, hd),
                               attn.q_norm.weight, attn.k_norm.weight, cos, sin, k_cache, v_cache, slot_mapping)
            checked = True
        qk = qkv[:, :(heads + kvh) * hd].view(-1, heads + kvh, hd)   # q's heads, then k's: adjacent
        v = qkv[:, (heads + kvh) * hd:].view(-1, kvh, hd)
        return qk_norm_rope_cpu(qk, qk_norm_weight(attn, heads, kvh), cfg.rms_norm_eps, cos_heads, sin_signed,
                                heads, v, k_cache, v_cache, slots, valid)
    return prologue


def qk_norm_weight(attn, heads: int, kvh: int) -> torch.Tensor:
    """[heads + kvh, hd]: q_norm's weight on each q head, k_norm's on each k head. Built at a layer's
    first step and kept on the module, since a CPU decode step is short enough that one more op per
    layer counts; built again if either weight is replaced or changed in place."""
    qw, kw = attn.q_norm.weight, attn.k_norm.weight
    key = (qw.data_ptr(), qw._version, kw.data_ptr(), kw._version, heads, kvh)
    cached = attn.__dict__.get("_qk_norm_weight")
    if cached is None or cached[0] != key:
        cached = attn.__dict__["_qk_norm_weight"] = (key, torch.cat((qw.expand(heads, -1), kw.expand(kvh, -1))))
    return cached[1]
