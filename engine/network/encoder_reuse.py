"""Whether encoder rows may be computed apart from the clip they belong to, on this machine.

Reusing encoder outputs (a conv chunk's, a complete attention window's) across clips is exact
only if a row's result does not depend on which other rows share its GEMM or convolution call.
``rows_round_alike`` checks that for this model's layers on this machine, once per network; where
it fails (or on CUDA, where cuBLAS picks kernels by shape) every clip is encoded fresh
(``engine.serving.encoder_cache``).
"""
from __future__ import annotations

import torch

from engine.network.encoder import MIN_GEMM_ROWS, _conv_stack, padded_linear
from engine.network.modules import Qwen3ASRNetwork


def conv_chunks(tower, chunks: torch.Tensor) -> torch.Tensor:
    """The conv stack over ``chunks`` [n, 1, mels, chunk_frames] as ``encode_audio`` runs it:
    [n, tokens_per_chunk, d_model] with positions added."""
    return _conv_stack(tower, chunks)


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
