"""Loading a checkpoint folder: config, network weights and the checkpoint's own tokenizer."""
from __future__ import annotations

from pathlib import Path

import torch

from engine.errors import CheckpointError
from engine.network import fp16_weights, int8_cache
from engine.network.config import ModelConfig, load_config
from engine.network import platform
from engine.network.int8_linear import check_quantize
from engine.network.modules import LanguageModel, Qwen3ASRNetwork, sinusoid_positions
from engine.network.headers import read_checkpoint
from engine.network.weights import check_layers, load_weights


def resolve_device(device) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but this torch build or machine has no CUDA GPU")
    return device


def cpu_description() -> str:
    """The CPU model and its bfloat16 hardware, for status lines and benchmark headers."""
    return platform.current().describe()


def resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    """``None`` picks the fastest exact-enough dtype: bfloat16 on CUDA and on CPUs with native
    bfloat16, float32 on other CPUs."""
    if dtype is None:
        return platform.current().default_dtype(device)
    if isinstance(dtype, str):
        names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                 "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
        if dtype.lower() not in names:
            raise ValueError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        dtype = names[dtype.lower()]
    return dtype


def load_network(model_dir, device: torch.device, dtype: torch.dtype,
                 quantize: str | None = None, compact_weights: bool = False) -> tuple[Qwen3ASRNetwork, ModelConfig]:
    """Build the network on the meta device, then fill it from the checkpoint's tensors.

    ``quantize="int8"``: decoder projections and the LM head as int8 weights (CPU only), read
    from the on-disk cache when this checkpoint was quantized before. ``compact_weights``:
    decoder projections whose values are bfloat16 kept in 2 bytes where that is faster
    (``fp16_weights``; exact values, a few seconds more to load), and a bfloat16 LM head's int8
    copy for one row's greedy token (``int8_argmax``; the same tokens, under a second more)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise CheckpointError(f"{model_dir}: model folder not found")
    config = load_config(model_dir)
    # Headers only: a config that disagrees with the weights fails here, before anything is built.
    tensors = read_checkpoint(model_dir)
    check_layers(config, tensors, model_dir)
    try:
        with torch.device("meta"):
            net = Qwen3ASRNetwork(config)
    except (RuntimeError, ValueError, OverflowError) as e:  # absurd sizes torch refuses even on meta
        raise CheckpointError(f"{model_dir}: config.json sizes cannot build a network "
                              f"({' '.join(str(e).split())[:200]})") from e
    # int8: quantized once per checkpoint and kept on disk (int8_cache), since quantizing is most
    # of an int8 load. The cache file is named from the weight files as they are before reading.
    # Weights the cache holds in int8 are not read at all: on a cached start the float decoder
    # weights (1.8 GB in float32 for the 0.6B) never pass through memory.
    int8_file = int8_cache.cache_file(model_dir, dtype) if quantize == "int8" else None
    cached = int8_cache.read(int8_file) if int8_file is not None else None
    # Compact weights are packed from the checkpoint's bfloat16 (fp16_weights): not widened first.
    keep_bf16 = net.compact_sources() if (compact_weights and quantize != "int8" and dtype == torch.float32
                                          and fp16_weights.compacts(dtype, device)) else set()
    load_weights(net, model_dir, config.layout, dtype=dtype, device=device, tensors=tensors,
                 skip=net.covered_by_int8(cached), keep_bf16=keep_bf16)
    enc, dec = config.encoder, config.decoder
    net.audio_tower.positions = sinusoid_positions(enc.tokens_per_chunk, enc.d_model).to(device)
    net.language_model.inv_freq = (1.0 / (dec.rope_theta ** (
        torch.arange(0, dec.head_dim, 2, dtype=torch.float) / dec.head_dim))).to(device)
    fresh = net.fuse_projections(quantize, cached, compact=compact_weights)
    if fresh:
        int8_cache.write(model_dir, int8_file, {**(cached or {}), **fresh}, dtype)
    for conv in (net.audio_tower.conv2d1, net.audio_tower.conv2d2, net.audio_tower.conv2d3):
        conv.to(memory_format=torch.channels_last)
    unread = [name for name, t in [*net.named_parameters(), *net.named_buffers()] if t.is_meta]
    if unread:   # a skipped weight that fuse_projections did not replace: a bug, not a bad file
        raise RuntimeError(f"weights left unloaded: {', '.join(unread[:5])}")
    return net.eval(), config


def load_tokenizer(model_dir):
    """The checkpoint's own tokenizer, from the local folder only."""
    model_dir = Path(model_dir)
    if not any((model_dir / f).is_file() for f in ("tokenizer.json", "vocab.json", "tokenizer_config.json")):
        raise CheckpointError(f"{model_dir}: no tokenizer files (tokenizer.json or vocab.json + merges.txt)")
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except Exception as e:  # transformers raises many kinds here; all mean the same to a user
        raise CheckpointError(f"{model_dir}: cannot load the tokenizer ({e})") from e


__all__ = ["load_network", "load_tokenizer", "resolve_device", "resolve_dtype", "check_quantize", "LanguageModel"]
