"""The decoder for a step of decode rows only on CPU: in bfloat16 one clip at a time, one live
stream, the decode steps of a queue; in float32 a step of one row.

``decoder_forward`` with the compiled small ops (``asr_kernels.bf16_decode_row``) still wraps
each in a few torch calls per layer (buffers, views, checks). A step whose rows each have one new
token needs none of them: here the four GEMVs of a layer are the same linear methods, and the
kernels between them read and write preallocated buffers by address. The kernels and their inputs
are the same as ``decoder_forward``'s, so the results are equal bit for bit
(tests/test_bf16_decode_row.py).

A float32 step of one row (the default where bfloat16 is not native: one clip at a time, a live
stream alone) takes ``f32_decode_row``'s kernels the same way (``decode_row_forward_f32``); its
steps of more rows stay on ``decoder_forward``. Its sums run in another order than the torch ops',
as any two float32 GEMMs' do, and tests hold its greedy tokens to transformers'.

Chosen once at load (``decode_row_forward_for``): weights and cache on CPU in bfloat16 (or
float32), the kernels compiled (numba present) and not switched off (``bf16_decode_row.SWITCH``,
``f32_decode_row.SWITCH``). Figures: tests/bench/RESULTS.md.
"""
from __future__ import annotations

from typing import Callable

import torch

from asr_kernels import bf16_decode_row as kernels
from asr_kernels import f32_decode_row
from asr_kernels.bf16_decode_row import bits
from asr_kernels.f32_decode_row import address
from asr_kernels.qk_norm_rope import signed_sin
from engine.network.decoder import PagedKV, StepMetadata, attention_plan, compiled_ops_apply, decode_row_batch, \
    decoder_forward, paged_attention, qk_norm_weight, rope_cos_sin
from engine.network.modules import Qwen3ASRNetwork

DecodeRowForward = Callable[[torch.Tensor, StepMetadata], torch.Tensor]


def decode_rows_only(embeds: torch.Tensor, meta: StepMetadata) -> bool:
    """A step whose every row has one new token (and no padding)."""
    return embeds.shape[0] == len(meta.query_lens) and all(n == 1 for n in meta.query_lens)


def decode_row_forward_for(net: Qwen3ASRNetwork, cache: PagedKV, device: torch.device) -> DecodeRowForward | None:
    """The decode-row decoder for ``net`` and ``cache``, or None where it does not apply."""
    probe = torch.empty(1, net.config.decoder.hidden_size, dtype=net.language_model.norm.weight.dtype,
                        device=device)
    if not hasattr(net, "head"):
        return None
    if compiled_ops_apply(net, cache, probe, paged_attention):
        return lambda embeds, meta: decode_row_forward(net, cache, embeds, meta)
    if f32_decode_row_applies(net, cache, probe):
        return lambda embeds, meta: decode_row_forward_f32(net, cache, embeds, meta) if embeds.shape[0] == 1 \
            else decoder_forward(net, cache, embeds, meta)
    return None


def f32_decode_row_applies(net: Qwen3ASRNetwork, cache: PagedKV, probe: torch.Tensor) -> bool:
    """float32 activations, norms and cache on CPU, head counts the kernels read, the kernels compiled."""
    cfg = net.config.decoder
    return (probe.dtype == torch.float32 and probe.device.type == "cpu" and cache.k[0].dtype == torch.float32
            and cache.k[0].device.type == "cpu" and cfg.heads % cfg.kv_heads == 0 and cfg.head_dim % 2 == 0
            and f32_decode_row.enabled())


def decode_row_forward(net: Qwen3ASRNetwork, cache: PagedKV, embeds: torch.Tensor,
                       meta: StepMetadata) -> torch.Tensor:
    """``decoder_forward`` for decode rows only. embeds: [rows, hidden] -> final-normed hidden [rows, hidden]."""
    cfg, lm = net.config.decoder, net.language_model
    heads, kvh, hd, eps = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.rms_norm_eps
    (rows, hidden), inter = embeds.shape, cfg.intermediate_size
    cos, sin = rope_cos_sin(lm.inv_freq, meta.positions, embeds.dtype)       # [rows, hd]
    cos, sin = cos.contiguous(), signed_sin(sin).contiguous()
    block_size = cache.k[0].shape[1]
    plan = attention_plan(meta, block_size, embeds.device)                  # each row's blocks up to its context
    batch = decode_row_batch(meta, plan) if rows > 1 else None
    slot = meta.slot_mapping.to(torch.int64).numpy()
    new = lambda n: torch.empty(rows, n, dtype=torch.bfloat16)  # noqa: E731
    h, residual, q, attn, act, out = new(hidden), new(hidden), new(heads * hd), new(heads * hd), new(inter), new(hidden)
    h_at, res_at, q_at, attn_at, act_at = h.data_ptr(), residual.data_ptr(), q.data_ptr(), attn.data_ptr(), act.data_ptr()
    q_heads = q.view(rows, heads, hd)
    x = embeds.contiguous()          # each GEMV output is held in a name while a kernel reads its address
    for i, layer in enumerate(lm.layers):
        k_at, v_at = bits(cache.k[i]), bits(cache.v[i])
        kernels.residual_norm(bits(x), res_at, bits(layer.input_layernorm.weight), h_at, res_at, rows, hidden, eps,
                              i > 0)
        qkv = layer.qkv(h).contiguous()                                    # [rows, (heads + 2 kvh) hd]
        kernels.prologue(bits(qkv), bits(qk_norm_weight(layer.self_attn, heads, kvh)), bits(cos), bits(sin),
                         k_at, v_at, slot, rows, q_at, heads, kvh, hd, eps)
        if batch is None:                                                  # one row: its one query
            kernels.attend(q_at, k_at, v_at, plan[0].table, block_size, plan[0].ctx, attn_at, heads, kvh, hd)
        else:                                                              # rows shared over torch's team
            kernels.attend_rows(q_heads, cache.k[i], cache.v[i], batch, attn, heads, kvh)
        x = layer.o(attn).contiguous()                                     # [rows, hidden]
        kernels.residual_norm(bits(x), res_at, bits(layer.post_attention_layernorm.weight), h_at, res_at,
                              rows, hidden, eps, True)
        gate_up = layer.gate_up(h).contiguous()                            # [rows, 2 inter]
        kernels.silu_mul(bits(gate_up), act_at, rows, inter)               # -> act: [rows, inter]
        x = layer.down(act).contiguous()
    kernels.residual_norm(bits(x), res_at, bits(lm.norm.weight), out.data_ptr(), res_at, rows, hidden, eps, True)
    return out


def decode_row_forward_f32(net: Qwen3ASRNetwork, cache: PagedKV, embeds: torch.Tensor,
                           meta: StepMetadata) -> torch.Tensor:
    """``decoder_forward`` for one float32 decode row. embeds: [1, hidden] -> final-normed hidden [1, hidden]."""
    cfg, lm, ops = net.config.decoder, net.language_model, f32_decode_row
    heads, kvh, hd, eps = cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.rms_norm_eps
    hidden, inter = embeds.shape[1], cfg.intermediate_size
    cos, sin = rope_cos_sin(lm.inv_freq, meta.positions, torch.float32)       # [1, hd]
    cos, sin = cos.contiguous(), signed_sin(sin).contiguous()
    block_size = cache.k[0].shape[1]
    row = attention_plan(meta, block_size, embeds.device)[0]                 # its blocks up to its context
    slot = int(meta.slot_mapping[0])
    new = lambda n: torch.empty(1, n)  # noqa: E731
    h, residual, q, attn, act, out = new(hidden), new(hidden), new(heads * hd), new(heads * hd), new(inter), new(hidden)
    h_at, res_at, q_at, attn_at, act_at = h.data_ptr(), residual.data_ptr(), q.data_ptr(), attn.data_ptr(), act.data_ptr()
    x = embeds.contiguous()          # each GEMV output is held in a name while a kernel reads its address
    for i, layer in enumerate(lm.layers):
        k_at, v_at = address(cache.k[i]), address(cache.v[i])
        ops.residual_norm(address(x), res_at, address(layer.input_layernorm.weight), h_at, res_at, hidden, eps, i > 0)
        qkv = layer.qkv(h).contiguous()                                    # [1, (heads + 2 kvh) hd]
        ops.prologue(address(qkv), address(qk_norm_weight(layer.self_attn, heads, kvh)), cos.data_ptr(),
                     sin.data_ptr(), k_at, v_at, slot, q_at, heads, kvh, hd, eps)
        ops.attend(q_at, k_at, v_at, row.table, block_size, row.ctx, attn_at, heads, kvh, hd)
        x = layer.o(attn).contiguous()                                     # [1, hidden]
        ops.residual_norm(address(x), res_at, address(layer.post_attention_layernorm.weight), h_at, res_at,
                          hidden, eps, True)
        gate_up = layer.gate_up(h).contiguous()                            # [1, 2 inter]
        ops.silu_mul(address(gate_up), act_at, inter)                      # -> act: [1, inter]
        x = layer.down(act).contiguous()
    ops.residual_norm(address(x), res_at, address(lm.norm.weight), out.data_ptr(), res_at, hidden, eps, True)
    return out
