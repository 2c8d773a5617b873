"""Encoder outputs of one growing clip (a live stream's open utterance), kept per chunk and window.

Every live update re-transcribes the open utterance, which has grown by an update interval (0.75 s)
since the last pass. Conv chunks (``chunk_frames`` mel frames) are convolved independently and the
encoder layers attend only inside windows of ``window_tokens``, so most of the encoder's work on
the new pass is the same as on the last one: a full chunk whose mel frames are unchanged keeps its
conv output, and a complete window whose chunks are all unchanged keeps its final output. Only the
rest is computed, with the same functions ``encode_audio`` uses.

Reuse is exact only if a row's result does not depend on which other rows share its GEMM or
convolution call. ``rows_round_alike`` checks that for this model's layers on this machine, once per
network; where it fails (or on CUDA, where cuBLAS picks kernels by shape) every pass encodes fresh.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.network.config import conv_output_length
from engine.network.encoder import MIN_GEMM_ROWS, _conv_stack, encode_audio, encoder_layers, padded_linear
from engine.network.modules import Qwen3ASRNetwork


@torch.no_grad()
def rows_round_alike(net: Qwen3ASRNetwork) -> bool:
    """Whether this machine gives every encoder row the same bits whatever call it is computed in.

    The shapes a stream meets: a window alone (``window_tokens`` rows or a partial one, padded to
    MIN_GEMM_ROWS) against the same rows inside a packed clip of several windows, at the offsets
    windows sit at; conv chunks alone against the same chunks in a batch. Cached on ``net``."""
    cached = getattr(net, "_rows_round_alike", None)
    if cached is not None:
        return cached
    cfg, tower = net.config.encoder, net.audio_tower
    weight = tower.conv2d1.weight
    if weight.device.type != "cpu":
        ok = False
    else:
        gen = torch.Generator().manual_seed(0)
        w = cfg.window_tokens
        linears = [tower.conv_out, tower.layers[0].self_attn.q_proj, tower.layers[0].fc1,
                   tower.layers[0].fc2, net.projector.linear_1, net.projector.linear_2]
        ok = all(_linear_rows_alike(lin, w, gen) for lin in linears)
        chunks = torch.randn(4, 1, cfg.num_mel_bins, cfg.chunk_frames, generator=gen).to(weight.dtype)
        together = _conv_stack(tower, chunks)
        ok = ok and all(torch.equal(_conv_stack(tower, chunks[i:j]), together[i:j]) for i, j in ((0, 1), (3, 4), (1, 3)))
    net._rows_round_alike = ok
    return ok


def _linear_rows_alike(linear, window: int, gen: torch.Generator) -> bool:
    rows = 3 * window + 7                        # a packed clip: three windows and a partial one
    x = torch.randn(rows, linear.in_features, generator=gen).to(linear.weight.dtype)
    packed = padded_linear(linear, x)
    for start, count in ((0, window), (window, window), (2 * window, window + 7), (3 * window, 7),
                         (window, 2 * window), (0, MIN_GEMM_ROWS + 1)):
        if not torch.equal(padded_linear(linear, x[start:start + count]), packed[start:start + count]):
            return False
    return True


class EncoderReuse:
    """What ``encode_audio`` gives for a growing clip, recomputing only changed chunks and windows.

    (Frames are compared, not assumed: log-mel features are clamped relative to the clip's loudest
    frame, so a louder sound later changes every earlier frame, and then nothing is kept.)
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
        if not rows_round_alike(self.net):
            self.chunks_computed += -(-features.shape[1] // cfg.chunk_frames)
            return encode_audio(self.net, [features.to(tower.conv2d1.weight.device)])[0]
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
        return torch.cat(outputs) if outputs else conv[0].new_zeros(0, cfg.output_dim)

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
        counts = [w.shape[0] for w in windows]
        return list(torch.split(encoder_layers(self.net, torch.cat(windows), counts), counts))
