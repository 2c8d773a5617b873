"""The audio encoder forward pass, batched across clips as packed variable-length windows.

Per clip: 100-frame chunks (the last one zero-padded, as the reference does) go
through three stride-2 convolutions and conv_out, get sinusoidal positions that
restart in every chunk, and are packed without padding between clips. Attention
is bidirectional inside windows of ``window_tokens`` (104 = 8 s) anchored at each
clip's start; windows of equal length run as one batched SDPA call, or window by window on
bf16_prompt_attention's tiles (bfloat16 on AVX512-BF16 CPUs without AMX).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from asr_kernels import bf16_prompt_attention as prompt_kernel
from engine.network import ops
from engine.network.config import audio_token_count, conv_output_length
from engine.network.modules import Qwen3ASRNetwork

# Chunks per convolution call. On CPU small batches keep the [n, 480, 64, 50] activations in
# cache and out of freshly page-faulted memory: 4 chunks run the stack about twice as fast as 64.
# On CUDA larger batches mean fewer launches; 64 bounds the activations' memory.
CONV_BATCH_CHUNKS = {"cpu": 4, "cuda": 64}

# Every encoder GEMM gets at least this many rows (zero rows appended). BLAS libraries take other
# kernels for a few rows, which round differently: padded, a row comes out the same whether its
# window is encoded alone (a live stream's open window, from serving's encoder cache) or among many (a whole
# clip). rows_round_alike() checks, on the machine at hand, that this holds.
MIN_GEMM_ROWS = 32

# Every convolution call gets at least this many chunks (zero chunks appended), for the same reason:
# oneDNN convolves a batch of one chunk by another path, which rounds float32 differently (AMD EPYC
# and Intel Xeon alike), so a live pass's one new chunk would not match the same chunk in a clip.
MIN_CONV_CHUNKS = 2


def padded_linear(linear, x: torch.Tensor) -> torch.Tensor:
    """linear(x) for x: [rows, in], computed over at least MIN_GEMM_ROWS rows (through ``ops``,
    so emulated bfloat16 runs in float32)."""
    rows = x.shape[0]
    if rows >= MIN_GEMM_ROWS:
        return ops.linear(x, linear.weight, linear.bias)
    return ops.linear(F.pad(x, (0, 0, 0, MIN_GEMM_ROWS - rows)), linear.weight, linear.bias)[:rows]


def _chunk_features(features: list[torch.Tensor], chunk: int):
    """Stack all clips' chunks: [chunks, 1, mels, chunk] and the valid frames of each chunk."""
    pieces, valid = [], []
    for feat in features:                                    # feat: [mels, frames]
        frames = feat.shape[1]
        n_chunks = -(-frames // chunk)
        padded = F.pad(feat, (0, n_chunks * chunk - frames))
        pieces.append(padded.view(feat.shape[0], n_chunks, chunk).permute(1, 0, 2))
        valid += [chunk] * (n_chunks - 1) + [frames - (n_chunks - 1) * chunk]
    return torch.cat(pieces).unsqueeze(1), valid


def _conv_stack(tower, chunks: torch.Tensor) -> torch.Tensor:
    """[chunks, 1, mels, chunk] -> [chunks, tokens_per_chunk, d_model], with positions added."""
    if chunks.is_cuda and chunks.dtype == torch.float32:
        # cuDNN convolves float32 in TF32 by default (about 1e-3 relative error); float32 is
        # the mode held token-exact to transformers, so it gets true float32 convolutions.
        with torch.backends.cudnn.flags(enabled=True, allow_tf32=False):
            return _conv_batches(tower, chunks)
    return _conv_batches(tower, chunks)


def _conv_batches(tower, chunks: torch.Tensor) -> torch.Tensor:
    outs = []
    batch = CONV_BATCH_CHUNKS.get(chunks.device.type, 64)
    for start in range(0, chunks.shape[0], batch):
        x = chunks[start:start + batch]
        n = x.shape[0]
        if n < MIN_CONV_CHUNKS:
            x = torch.cat([x, x.new_zeros(MIN_CONV_CHUNKS - n, *x.shape[1:])])
        # channels_last: oneDNN's convolutions are 2-4x faster in it on CPU (1 input channel most of all).
        x = x.contiguous(memory_format=torch.channels_last)
        x = F.gelu(ops.conv2d(tower.conv2d1, x))
        x = F.gelu(ops.conv2d(tower.conv2d2, x))
        x = F.gelu(ops.conv2d(tower.conv2d3, x))
        x = x[:n]                                       # x: [n, ch, freq, t], the padding chunks dropped
        _, ch, freq, t = x.shape
        x = padded_linear(tower.conv_out, x.permute(0, 3, 1, 2).reshape(n * t, ch * freq)).view(n, t, -1)
        outs.append(x + tower.positions[:t].to(x.dtype))
    return torch.cat(outs)


def _window_groups(token_counts: list[int], window: int) -> dict[int, list[int]]:
    """Start offsets of every attention window in the packed sequence, grouped by window length."""
    groups: dict[int, list[int]] = {}
    offset = 0
    for count in token_counts:
        for start in range(0, count, window):
            length = min(window, count - start)
            groups.setdefault(length, []).append(offset + start)
        offset += count
    return groups


_ONE_BLOCK = np.zeros(1, np.int64)   # a window's block table for bf16_prompt_attention


def _windowed_attention(layer, x: torch.Tensor, groups, heads: int) -> torch.Tensor:
    """Bidirectional attention inside each window (the prompt kernel's bfloat16 tiles where it runs,
    else SDPA over the windows of each length at once). x: [tokens, d] -> [tokens, d]."""
    attn = layer.self_attn
    tokens, d = x.shape
    hd = d // heads
    q = padded_linear(attn.q_proj, x).view(tokens, heads, hd)
    k = padded_linear(attn.k_proj, x).view(tokens, heads, hd)
    v = padded_linear(attn.v_proj, x).view(tokens, heads, hd)
    out = torch.empty_like(q)
    if (q.dtype == torch.bfloat16 and q.device.type == "cpu" and prompt_kernel.supports(hd)
            and prompt_kernel.enabled()):
        # each window as a prompt whose keys are one cache block of its own length, every query seeing all
        flat = out.view(tokens, d)
        for length, starts in groups.items():
            for start in starts:
                window = slice(start, start + length)
                prompt_kernel.attend_prompt(q[window], k[window].view(1, length, heads, hd),
                                            v[window].view(1, length, heads, hd), _ONE_BLOCK, length, flat[window],
                                            causal=False)
        return padded_linear(attn.out_proj, flat)
    for length, starts in groups.items():
        idx = (torch.tensor(starts, device=x.device)[:, None] + torch.arange(length, device=x.device)).reshape(-1)
        qg, kg, vg = (t.index_select(0, idx).view(len(starts), length, heads, hd).transpose(1, 2) for t in (q, k, v))
        og = ops.attention(qg, kg, vg)     # og: [windows, heads, length, hd]
        out.index_copy_(0, idx, og.transpose(1, 2).reshape(-1, heads, hd))
    return padded_linear(attn.out_proj, out.view(tokens, d))


@torch.no_grad()
def encode_audio(net: Qwen3ASRNetwork, features: list[torch.Tensor]) -> list[torch.Tensor]:
    """Audio embeddings for the decoder, one [audio_tokens, output_dim] tensor per clip."""
    cfg = net.config.encoder
    tower = net.audio_tower
    dtype = tower.conv2d1.weight.dtype
    chunks, valid = _chunk_features([f.to(dtype) for f in features], cfg.chunk_frames)
    conv = _conv_stack(tower, chunks)                        # conv: [chunks, t, d]
    keep = torch.arange(conv.shape[1], device=conv.device)[None, :] < torch.tensor(
        [conv_output_length(v) for v in valid], device=conv.device)[:, None]
    x = conv[keep]                                           # x: [tokens, d], packed clip after clip
    counts = [audio_token_count(f.shape[1], cfg) for f in features]
    return list(torch.split(encoder_layers(net, x, counts), counts))


def encoder_layers(net: Qwen3ASRNetwork, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """Encoder layers, final norm and projector over packed clips (or windows) of ``counts`` tokens.
    x: [tokens, d_model] -> [tokens, output_dim]; windows restart at each count's start."""
    cfg, tower = net.config.encoder, net.audio_tower
    groups = _window_groups(counts, cfg.window_tokens)
    for layer in tower.layers:
        x = x + _windowed_attention(layer, layer.self_attn_layer_norm(x), groups, cfg.heads)
        h = padded_linear(layer.fc1, layer.final_layer_norm(x))
        x = x + padded_linear(layer.fc2, F.gelu(h))
    x = tower.ln_post(x)
    return padded_linear(net.projector.linear_2, F.gelu(padded_linear(net.projector.linear_1, x)))
