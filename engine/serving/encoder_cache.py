"""Encoder outputs kept by their audio content: conv chunks and complete attention windows.

A full conv chunk (``chunk_frames`` mel frames) is convolved alone and its positions restart in
every chunk, so its conv output is a function of its frames only; the encoder layers attend only
inside windows of ``window_tokens`` anchored at the clip's start, so a complete window's output is
a function of its chunks' frames only. The cache keys both by that content (a BLAKE2b-256 digest of
the frames; a window by its chunks' digests), for every request the runner encodes: a live pass,
which re-transcribes its utterance grown by an update interval, finds every unchanged chunk and
every complete window of the last pass here; a file chunk encoded again finds all of it. Only the
rest is computed, with the functions ``encode_audio`` uses, in one batch across the clips.

Exact only where a row's result does not depend on the other rows of its GEMM or convolution
call: ``rows_round_alike`` checks that once per network on this machine. Where it fails (and on
CUDA, where cuBLAS picks kernels by shape) the cache is off and every encode is ``encode_audio``'s.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict

import torch
import torch.nn.functional as F

from engine.network.config import conv_output_length
from engine.network.encoder import encode_audio, encoder_layers
from engine.network.encoder_reuse import conv_chunks, rows_round_alike

DEFAULT_MAX_BYTES = 64 << 20    # a few minutes of audio of the 0.6B model: every stream's open utterance


def _digest(frames: torch.Tensor) -> bytes:
    data = frames.detach().to("cpu", torch.float32).contiguous().numpy()
    return hashlib.blake2b(data.tobytes(), digest_size=32).digest()


class EncoderCache:
    """``encode_audio`` for a batch of clips, reusing cached chunks and windows (least recently used go first)."""

    def __init__(self, net, max_bytes: int = DEFAULT_MAX_BYTES):
        self.net = net
        self.max_bytes = max_bytes
        self._entries: OrderedDict[object, torch.Tensor] = OrderedDict()   # chunk digest or window key
        self._bytes = 0
        self._enabled: bool | None = None
        self.chunks_reused = self.chunks_computed = self.windows_reused = self.windows_computed = 0

    @property
    def enabled(self) -> bool:
        if self._enabled is None:   # checked at the first encode, not at load
            self._enabled = self.max_bytes > 0 and rows_round_alike(self.net)
        return self._enabled

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def has_first_window(self, features: torch.Tensor) -> bool:
        """Whether the first complete window of ``features`` [mels, frames] is cached (no compute)."""
        cfg = self.net.config.encoder
        per_window = cfg.window_tokens // cfg.tokens_per_chunk
        size = cfg.chunk_frames
        if not self.enabled or features.shape[1] < per_window * size:
            return False
        key = tuple(_digest(features[:, i * size:(i + 1) * size]) for i in range(per_window))
        return key in self._entries

    @torch.no_grad()
    def encode(self, features: list[torch.Tensor], device) -> list[torch.Tensor]:
        """Audio embeddings [audio_tokens, output_dim] per clip of ``features`` ([mels, frames] each)."""
        cfg, tower = self.net.config.encoder, self.net.audio_tower
        if not self.enabled:
            self.chunks_computed += sum(-(-f.shape[1] // cfg.chunk_frames) for f in features)
            return encode_audio(self.net, [f.to(device) for f in features])
        dtype, size = tower.conv2d1.weight.dtype, cfg.chunk_frames
        per_window = cfg.window_tokens // cfg.tokens_per_chunk
        clips, todo = [], []          # per clip: (chunk keys, conv per chunk or index into todo, tail frames)
        for feat in features:
            feat = feat.to(device)
            n_full, tail = divmod(feat.shape[1], size)
            keys, conv = [], []
            for i in range(n_full):
                piece = feat[:, i * size:(i + 1) * size]
                keys.append(_digest(piece))
                hit = self._get(keys[-1])
                if hit is None:
                    todo.append(piece.to(dtype))
                    hit = len(todo) - 1
                conv.append(hit)
            if tail:
                todo.append(F.pad(feat[:, n_full * size:].to(dtype), (0, size - tail)))
                conv.append(len(todo) - 1)
            clips.append((keys, conv, tail))
        computed = conv_chunks(tower, torch.stack(todo).unsqueeze(1)) if todo else None
        self.chunks_computed += len(todo)
        windows, plans = [], []      # windows to compute; per clip: per window a cached tensor or an index
        for keys, conv, tail in clips:
            chunks = []
            for i, c in enumerate(conv):
                if isinstance(c, int):
                    out = computed[c]
                    if i < len(keys):
                        self._put(keys[i], out.clone())   # a copy: a view would keep the whole batch
                    else:
                        out = out[:conv_output_length(tail)]
                    c = out
                else:
                    self.chunks_reused += 1
                chunks.append(c)
            plan = []
            for w in range(0, len(chunks), per_window):
                complete = w + per_window <= len(keys)
                key = tuple(keys[w:w + per_window]) if complete else None
                hit = self._get(key) if complete else None
                if hit is None:
                    windows.append((key, torch.cat(chunks[w:w + per_window])))
                    hit = len(windows) - 1
                else:
                    self.windows_reused += 1
                plan.append(hit)
            plans.append(plan)
        fresh = []
        if windows:
            counts = [x.shape[0] for _, x in windows]
            fresh = list(torch.split(encoder_layers(self.net, torch.cat([x for _, x in windows]), counts), counts))
            self.windows_computed += len(windows)
            for (key, _), out in zip(windows, fresh):
                if key is not None:
                    self._put(key, out.clone())
        outputs = []
        for plan in plans:
            parts = [fresh[p] if isinstance(p, int) else p for p in plan]
            outputs.append(torch.cat(parts) if parts else torch.zeros(0, cfg.output_dim, dtype=dtype, device=device))
        return outputs

    def _get(self, key):
        hit = self._entries.get(key)
        if hit is not None:
            self._entries.move_to_end(key)
        return hit

    def _put(self, key, value: torch.Tensor) -> None:
        if key in self._entries:
            return
        self._entries[key] = value
        self._bytes += value.numel() * value.element_size()
        while self._bytes > self.max_bytes and self._entries:
            _, old = self._entries.popitem(last=False)
            self._bytes -= old.numel() * old.element_size()
