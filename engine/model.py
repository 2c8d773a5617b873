"""Loading a checkpoint folder: config, network weights and the checkpoint's own tokenizer."""
from __future__ import annotations

from pathlib import Path

import torch

from .config import ModelConfig, load_config
from .errors import CheckpointError
from .modules import LanguageModel, Qwen3ASRNetwork, sinusoid_positions
from .weights import load_weights


def resolve_device(device) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for, but this torch build or machine has no CUDA GPU")
    return device


def resolve_dtype(dtype, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, str):
        names = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
                 "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
        if dtype.lower() not in names:
            raise ValueError(f"unknown dtype {dtype!r}; use float32, bfloat16 or float16")
        dtype = names[dtype.lower()]
    return dtype


def load_network(model_dir, device: torch.device, dtype: torch.dtype) -> tuple[Qwen3ASRNetwork, ModelConfig]:
    """Build the network on the meta device, then fill it from the checkpoint's tensors."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise CheckpointError(f"{model_dir}: model folder not found")
    config = load_config(model_dir)
    with torch.device("meta"):
        net = Qwen3ASRNetwork(config)
    load_weights(net, model_dir, config.layout, dtype=dtype, device=device)
    enc, dec = config.encoder, config.decoder
    net.audio_tower.positions = sinusoid_positions(enc.tokens_per_chunk, enc.d_model).to(device)
    net.language_model.inv_freq = (1.0 / (dec.rope_theta ** (
        torch.arange(0, dec.head_dim, 2, dtype=torch.float) / dec.head_dim))).to(device)
    net.fuse_projections()
    for conv in (net.audio_tower.conv2d1, net.audio_tower.conv2d2, net.audio_tower.conv2d3):
        conv.to(memory_format=torch.channels_last)
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


__all__ = ["load_network", "load_tokenizer", "resolve_device", "resolve_dtype", "LanguageModel"]
