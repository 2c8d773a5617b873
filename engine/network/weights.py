"""Load safetensors checkpoints of either published layout into our modules.

A small mapping from checkpoint name prefixes to our module names; every
missing, unexpected or mis-shaped tensor is named in one clear error.
"""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors import safe_open

from engine.errors import CheckpointError
from engine.network.config import config_dimensions
from engine.network.headers import TensorEntry, checkpoint_files, read_checkpoint  # noqa: F401 (re-exported)

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


def _our_name(name: str, layout: str, head: str) -> str | None:
    for src, dst in PREFIX_MAP[layout]:
        if name.startswith(src):
            return dst.format(head=head) + name[len(src):]
    return None


def check_layers(config, tensors: dict[str, TensorEntry], model_dir: Path) -> None:
    """Every layer config.json names must be stored, and no more: checked from the headers
    before the network is built, so a config claiming a million layers fails at once."""
    outer = "thinker_config." if config.layout == "original" else ""
    stored: dict[str, set[int]] = {"audio_tower.layers.": set(), "language_model.layers.": set()}
    for name in tensors:
        ours = _our_name(name, config.layout, "lm_head") or ""
        for prefix, found in stored.items():
            if ours.startswith(prefix):
                index = ours[len(prefix):].split(".", 1)[0]
                if index.isdigit():
                    found.add(int(index))
    for prefix, key, count in (("audio_tower.layers.", "audio_config.encoder_layers", config.encoder.layers),
                               ("language_model.layers.", "text_config.num_hidden_layers", config.decoder.layers)):
        found = stored[prefix]
        if found == set(range(count)):
            continue
        have = f"layers 0-{max(found)} ({len(found)} layers)" if found == set(range(len(found))) and found \
            else (f"layer indices {_ranges(found)}" if found else "no such layers")
        raise CheckpointError(f"{model_dir}: config.json says {outer}{key} = {count}, but the weights hold "
                              f"{have} under {_stored_prefix(config.layout, prefix)}")


def _ranges(indices: set[int]) -> str:
    out, run = [], []
    for i in sorted(indices):
        if run and i != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
        run.append(i)
    out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out[:8]) + (" ..." if len(out) > 8 else "")


def _stored_prefix(layout: str, ours: str) -> str:
    for src, dst in PREFIX_MAP[layout]:
        if ours.startswith(dst):
            return src + ours[len(dst):]
    return ours


def load_weights(module: torch.nn.Module, model_dir, layout: str, *, dtype, device,
                 tensors: dict[str, TensorEntry] | None = None, skip: set[str] = frozenset(),
                 keep_bf16: set[str] = frozenset()) -> None:
    """Fill ``module`` (built on the meta device) from the checkpoint; raise CheckpointError listing all problems.

    Names and shapes are checked against the headers first (``tensors``, read when not
    given), so a mismatched checkpoint fails before any tensor data is read. Parameters named
    in ``skip`` are checked but not read: they stay on the meta device for the caller to fill
    or drop (int8 weights from the cache). Parameters named in ``keep_bf16`` that the checkpoint
    stores in bfloat16 stay so, whatever ``dtype``: compact weights pack them from there, and
    widening them to float32 first cost a float32 load seconds."""
    model_dir = Path(model_dir)
    if tensors is None:
        tensors = read_checkpoint(model_dir)
    head = "score" if hasattr(module, "score") else "lm_head"
    shapes = {n: tuple(p.shape) for n, p in module.named_parameters()}
    wanted: dict[Path, list[tuple[str, str]]] = {}
    found, misshapen, unexpected, mismatched = set(), set(), [], []
    for name, entry in tensors.items():
        ours = _our_name(name, layout, head)
        if ours is None or ours not in shapes:
            if not name.endswith(IGNORED_SUFFIXES):
                unexpected.append(name)
            continue
        if entry.shape != shapes[ours]:
            mismatched.append(f"{name}: checkpoint {entry.shape}, config expects {shapes[ours]}"
                              + _config_hint(module.config, ours, entry.shape, shapes[ours]))
            misshapen.add(ours)
            continue
        found.add(ours)
        if ours not in skip:
            wanted.setdefault(entry.file, []).append((name, ours))
    tied = "lm_head.weight" in shapes and "lm_head.weight" not in found \
        and "language_model.embed_tokens.weight" in found \
        and (module.config.decoder.tie_word_embeddings or layout == "original")
    # A tied head is the embedding. As in transformers, a head stored on disk wins over the
    # flag; the original layout's configs may leave the flag out, so a missing head means tied.
    missing = [n for n in shapes if n not in found and n not in misshapen and not (tied and n == "lm_head.weight")]
    problems = []
    for label, items, sep, most in (("wrong shapes", mismatched, "; ", 4), ("missing tensors", missing, ", ", 20),
                                    ("unexpected tensors", unexpected, ", ", 20)):
        if items:
            more = f" ... ({len(items)} in all)" if len(items) > most else ""
            problems.append(f"{label}: " + sep.join(items[:most]) + more)
    if problems:
        raise CheckpointError(f"{model_dir} does not match its config.json ({layout} layout): " + " | ".join(problems))
    state = {}
    for path, names in wanted.items():
        try:
            with safe_open(str(path), framework="pt", device="cpu") as f:
                for name, ours in names:
                    tensor = f.get_tensor(name)
                    keep = ours in keep_bf16 and tensor.dtype == torch.bfloat16
                    state[ours] = tensor.to(device=device, dtype=tensor.dtype if keep else dtype)
        except (OSError, RuntimeError, ValueError) as e:
            raise CheckpointError(f"{path.parent}: {path.name} cannot be read as safetensors "
                                  f"({' '.join(str(e).split())[:200]})") from e
    if tied:
        state["lm_head.weight"] = state["language_model.embed_tokens.weight"]
    module.load_state_dict(state, strict=False, assign=True)


def _config_hint(config, ours: str, stored: tuple[int, ...], expected: tuple[int, ...]) -> str:
    """The config keys behind the dimensions that disagree, e.g. " (text_config.hidden_size = 1024)":
    keys of the tensor's own part (audio or text) whose value is the expected size."""
    section = "audio_config." if ours.startswith(("audio_tower.", "projector.")) else "text_config."
    dims = {k: v for k, v in config_dimensions(config).items() if section in k or k == "classify_num"}
    keys = []
    for have, want in zip(stored, expected) if len(stored) == len(expected) else ():
        if have != want:
            keys += [f"{k} = {v}" for k, v in dims.items() if v == want and f"{k} = {v}" not in keys]
    return f" ({', '.join(keys[:3])})" if keys else ""
