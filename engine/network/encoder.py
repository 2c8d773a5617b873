"""The audio encoder forward pass, batched across clips as packed variable-length windows.

Per clip: 100-frame chunks (the last one zero-padded, as the reference does) go
through three stride-2 convolutions and conv_out, get sinusoidal positions that
restart in every chunk, and are packed without padding between clips. Attention
is bidirectional inside windows of ``window_tokens`` (104 = 8 s) anchored at each
clip's start; windows of equal length run as one batched attention call.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.network.config import audio_token_count, conv_output_length
from engine.network.modules import Qwen3ASRNetwork

# Chunks per convolution call. On CPU small batches keep the [n, 480, 64, 50] activations in
# cache and out of freshly page-faulted memory: 4 chunks run the stack about twice as fast as 64.
# On CUDA larger batches mean fewer launches; 64 bounds the activations' memory.
CONV_BATCH_CHUNKS = {"cpu": 4, "cuda": 64}


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
        # channels_last: oneDNN's convolutions are 2-4x faster in it on CPU (1 input channel most of all).
        x = chunks[start:start + batch].contiguous(memory_format=torch.channels_last)
        x = F.gelu(tower.conv2d1(x))
        x = F.gelu(tower.conv2d2(x))
        x = F.gelu(tower.conv2d3(x))                         # x: [n, ch, freq, t]
        n, ch, freq, t = x.shape
        x = tower.conv_out(x.permute(0, 3, 1, 2).reshape(n, t, ch * freq))
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


def _windowed_attention(layer, x: torch.Tensor, groups, heads: int) -> torch.Tensor:
    """Bidirectional attention inside each window. x: [tokens, d] -> [tokens, d]."""
    attn = layer.self_attn
    tokens, d = x.shape
    hd = d // heads
    q = attn.q_proj(x).view(tokens, heads, hd)
    k = attn.k_proj(x).view(tokens, heads, hd)
    v = attn.v_proj(x).view(tokens, heads, hd)
    out = torch.empty_like(q)
    for length, starts in groups.items():
        idx = (torch.tensor(starts, device=x.device)[:, None] + torch.arange(length, device=x.device)).reshape(-1)
        qg, kg, vg = (t.index_select(0, idx).view(len(starts), length, heads, hd).transpose(1, 2) for t in (q, k, v))
        og = F.scaled_dot_product_attention(qg, kg, vg)     # og: [windows, heads, length, hd]
        out.index_copy_(0, idx, og.transpose(1, 2).reshape(-1, heads, hd))
    return attn.out_proj(out.view(tokens, d))


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
    groups = _window_groups(counts, cfg.window_tokens)
    for layer in tower.layers:
        x = x + _windowed_attention(layer, layer.self_attn_layer_norm(x), groups, cfg.heads)
        x = x + layer.fc2(F.gelu(layer.fc1(layer.final_layer_norm(x))))
    x = tower.ln_post(x)
    x = net.projector.linear_2(F.gelu(net.projector.linear_1(x)))
    return list(torch.split(x, counts))


class EncoderReuse:
    """Encoder outputs of one growing clip (a live stream's open utterance), kept per chunk and window.

    Conv chunks (``chunk_frames`` mel frames each) are convolved independently, and the encoder
    layers attend only inside windows of ``window_tokens``: a full chunk whose mel frames are
    unchanged since the last call keeps its conv output, and a complete window whose chunks are
    all unchanged keeps its final output. The rest is computed exactly as ``encode_audio`` does.
    (Frames are compared, not assumed: log-mel features are clamped relative to the clip's
    loudest frame, so a louder sound later changes every earlier frame, and then nothing is kept.)
    """

    def __init__(self, net: Qwen3ASRNetwork):
        self.net = net
        self._frames: list[torch.Tensor] = []    # per full chunk: its mel frames [mels, chunk_frames]
        self._conv: list[torch.Tensor] = []      # per full chunk: conv output [tokens_per_chunk, d]
        self._windows: list[torch.Tensor] = []   # per complete window: output [window_tokens, output_dim]
        self.chunks_reused = self.chunks_computed = self.windows_reused = self.windows_computed = 0

    def clear(self) -> None:
        self._frames, self._conv, self._windows = [], [], []

    @torch.no_grad()
    def encode(self, features: torch.Tensor) -> torch.Tensor:
        """Audio embeddings [audio_tokens, output_dim] of ``features`` [mels, frames], as encode_audio gives."""
        cfg, tower = self.net.config.encoder, self.net.audio_tower
        feat = features.to(tower.conv2d1.weight.dtype)
        size, frames = cfg.chunk_frames, feat.shape[1]
        n_full, tail = divmod(frames, size)
        pieces = [feat[:, i * size:(i + 1) * size] for i in range(n_full)]
        same = [i < len(self._frames) and torch.equal(self._frames[i], p) for i, p in enumerate(pieces)]
        conv = self._convolve(pieces, same, feat[:, n_full * size:] if tail else None)
        per_window = cfg.window_tokens // cfg.tokens_per_chunk
        n_windows = -(-len(conv) // per_window)
        keep = [w < len(self._windows) and (w + 1) * per_window <= n_full and all(same[w * per_window:(w + 1) * per_window])
                for w in range(n_windows)]
        todo = [w for w in range(n_windows) if not keep[w]]
        fresh = iter(self._encode_windows([torch.cat(conv[w * per_window:(w + 1) * per_window]) for w in todo]))
        outputs = [self._windows[w] if keep[w] else next(fresh) for w in range(n_windows)]
        self.windows_reused += sum(keep)
        self.windows_computed += len(todo)
        self._frames = [p.clone() for p in pieces]
        self._conv = conv[:n_full]
        self._windows = [outputs[w] for w in range(n_windows) if (w + 1) * per_window <= n_full]
        return torch.cat(outputs) if outputs else conv[0].new_zeros(0, self.net.config.encoder.output_dim)

    def _convolve(self, pieces, same, tail) -> list[torch.Tensor]:
        """Conv outputs per chunk: kept ones for unchanged full chunks, the rest computed in one batch."""
        cfg, tower = self.net.config.encoder, self.net.audio_tower
        todo = [p for p, s in zip(pieces, same) if not s]
        if tail is not None:
            todo.append(F.pad(tail, (0, cfg.chunk_frames - tail.shape[1])))
        computed = iter(_conv_stack(tower, torch.stack(todo).unsqueeze(1)) if todo else ())
        conv = [self._conv[i] if s else next(computed) for i, s in enumerate(same)]
        if tail is not None:
            conv.append(next(computed)[:conv_output_length(tail.shape[1])])
        self.chunks_reused += sum(same)
        self.chunks_computed += len(todo)
        return conv

    def _encode_windows(self, windows: list[torch.Tensor]) -> list[torch.Tensor]:
        """Encoder layers, final norm and projector over whole windows, as one packed batch."""
        if not windows:
            return []
        cfg, tower = self.net.config.encoder, self.net.audio_tower
        counts = [w.shape[0] for w in windows]
        groups = _window_groups(counts, cfg.window_tokens)
        x = torch.cat(windows)
        for layer in tower.layers:
            x = x + _windowed_attention(layer, layer.self_attn_layer_norm(x), groups, cfg.heads)
            x = x + layer.fc2(F.gelu(layer.fc1(layer.final_layer_norm(x))))
        x = tower.ln_post(x)
        x = self.net.projector.linear_2(F.gelu(self.net.projector.linear_1(x)))
        return list(torch.split(x, counts))
