"""Load safetensors checkpoints of either published layout into our modules.

A small mapping from checkpoint name prefixes to our module names; every
missing, unexpected or mis-shaped tensor is named in one clear error.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from engine.errors import CheckpointError

# (checkpoint prefix, our prefix), first match wins.
PREFIX_MAP = {
    "hf": [
        ("model.audio_tower.", "audio_tower."),
        ("model.multi_modal_projector.", "projector."),
        ("model.language_model.", "language_model."),
        ("lm_head.", "lm_head."),
        ("score.", "score."),
    ],
    "original": [
        ("thinker.audio_tower.proj1.", "projector.linear_1."),
        ("thinker.audio_tower.proj2.", "projector.linear_2."),
        ("thinker.audio_tower.", "audio_tower."),
        ("thinker.model.", "language_model."),
        ("thinker.lm_head.", "{head}."),
    ],
}
# Buffers some exports save that we compute ourselves.
IGNORED_SUFFIXES = ("positional_embedding", "rotary_emb.inv_freq")


def checkpoint_files(model_dir: Path) -> list[Path]:
    """The safetensors files of a checkpoint (one file or shards listed in an index)."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({model_dir / f for f in weight_map.values()})
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"{model_dir}: shards listed in the index are missing: {', '.join(missing)}")
        return files
    files = sorted(model_dir.glob("*.safetensors"))
    if files:
        return files
    if list(model_dir.glob("*.bin")) or list(model_dir.glob("*.pt")) or list(model_dir.glob("*.pth")):
        raise CheckpointError(
            f"{model_dir}: only pickle weights (.bin/.pt) found; they can run arbitrary code when loaded, "
            "so we refuse them. Use the model's safetensors release.")
    raise CheckpointError(f"{model_dir}: no .safetensors weights found")


def _our_name(name: str, layout: str, head: str) -> str | None:
    for src, dst in PREFIX_MAP[layout]:
        if name.startswith(src):
            return dst.format(head=head) + name[len(src):]
    return None


def load_weights(module: torch.nn.Module, model_dir, layout: str, *, dtype, device) -> None:
    """Fill ``module`` (built on the meta device) from the checkpoint; raise CheckpointError listing all problems."""
    model_dir = Path(model_dir)
    head = "score" if hasattr(module, "score") else "lm_head"
    shapes = {n: tuple(p.shape) for n, p in module.named_parameters()}
    state, unexpected, mismatched = {}, [], []
    for path in checkpoint_files(model_dir):
        try:
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for name in f.keys():
                    ours = _our_name(name, layout, head)
                    if ours is None or ours not in shapes:
                        if not name.endswith(IGNORED_SUFFIXES):
                            unexpected.append(name)
                        continue
                    tensor = f.get_tensor(name)
                    if tuple(tensor.shape) != shapes[ours]:
                        mismatched.append(f"{name}: checkpoint {tuple(tensor.shape)}, config expects {shapes[ours]}")
                        continue
                    state[ours] = tensor.to(device=device, dtype=dtype)
        except (OSError, RuntimeError) as e:
            raise CheckpointError(f"{path}: cannot read safetensors file ({e})") from e
    if "lm_head.weight" in shapes and "lm_head.weight" not in state and "language_model.embed_tokens.weight" in state:
        # A tied head is the embedding. As in transformers, a head stored on disk wins over the
        # flag; the original layout's configs may leave the flag out, so a missing head means tied.
        if module.config.decoder.tie_word_embeddings or layout == "original":
            state["lm_head.weight"] = state["language_model.embed_tokens.weight"]
    missing = [n for n in shapes if n not in state]
    problems = []
    for label, items, sep in (("missing tensors", missing, ", "), ("unexpected tensors", unexpected, ", "),
                              ("wrong shapes", mismatched, "; ")):
        if items:
            problems.append(f"{label}: " + sep.join(items[:20]) + (" ..." if len(items) > 20 else ""))
    if problems:
        raise CheckpointError(f"{model_dir} does not match its config.json ({layout} layout): " + " | ".join(problems))
    module.load_state_dict(state, strict=False, assign=True)
