"""int8 weights kept on disk, so that ``quantize="int8"`` quantizes a checkpoint once, not at every start.

Quantizing is the slow part of an int8 load: every decoder projection and the LM head go
through float32 (abs, max, divide, round) before fbgemm packs them. The cache holds what that
produces, ``q`` [out, in] int8 and ``scale`` [out] float32 per projection, in one safetensors
file per checkpoint folder. Its name carries a hash of the folder's path and of its weight
files (names, sizes, modification times), of the dtype the weights were quantized from and of
``FORMAT``, so a replaced or edited checkpoint gets a fresh file and the stale one is removed.
The name is taken before the weights are read (``cache_file``) and checked again before
writing, so weights read from files that changed meanwhile are not stored under the new name. The cache only saves time: a file that cannot
be read or written is skipped with a warning and the weights are quantized as before.
"""
from __future__ import annotations

import glob
import hashlib
import os
import warnings
from pathlib import Path

import torch

# Bump when quantize_int8 or the stored names change: old files are then never read.
FORMAT = 1
CACHE_DIR_ENV = "QWEN3_ASR_CACHE_DIR"


def cache_dir() -> Path:
    """Where cached int8 weights live: $QWEN3_ASR_CACHE_DIR, else the user's cache folder."""
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override)
    import appdirs

    return Path(appdirs.user_cache_dir("qwen3-asr-desktop", appauthor=False))


def _folder_tag(model_dir: Path) -> str:
    return f"{model_dir.name[:60]}-{hashlib.sha256(str(model_dir).encode()).hexdigest()[:8]}"


def cache_file(model_dir, dtype: torch.dtype) -> Path:
    """The cache file for this checkpoint folder as it is on disk now, quantized from ``dtype``."""
    model_dir = Path(model_dir).resolve()
    digest = hashlib.sha256(f"int8 format {FORMAT} from {dtype}\n".encode())
    for file in sorted(model_dir.glob("*.safetensors")):
        stat = file.stat()
        digest.update(f"{file.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return cache_dir() / "int8" / f"{_folder_tag(model_dir)}-{digest.hexdigest()[:16]}.safetensors"


def read(path: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
    """name -> (q, scale) from the cache file ``path``, or None when there is no usable file."""
    try:
        if not path.is_file():
            return None
        from safetensors.torch import load_file

        # Copied out of the file's memory map: a mapped file could not be replaced or removed
        # (on Windows) while the engine lives.
        tensors = {key: t.clone() for key, t in load_file(str(path)).items()}
        names = {key.rsplit(".", 1)[0] for key in tensors}
        return {name: (tensors[f"{name}.q"], tensors[f"{name}.scale"]) for name in names}
    except Exception as e:  # a truncated or foreign file: quantize again (and overwrite it)
        warnings.warn(f"int8 weight cache unreadable, quantizing again: {e}", stacklevel=2)
        return None


def write(model_dir, path: Path, weights: dict[str, tuple[torch.Tensor, torch.Tensor]],
          dtype: torch.dtype) -> Path | None:
    """Store ``weights`` at ``path`` (atomically) and drop the folder's stale files; None if it
    failed or the checkpoint changed since ``path`` was named."""
    partial = None
    try:
        from safetensors.torch import save_file

        if cache_file(model_dir, dtype) != path:
            warnings.warn(f"{model_dir}: the checkpoint changed while it loaded; its int8 weights are not cached",
                          stacklevel=2)
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {}
        for name, (q, scale) in weights.items():
            tensors[f"{name}.q"], tensors[f"{name}.scale"] = q.contiguous(), scale.contiguous()
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        save_file(tensors, str(partial), metadata={"format": str(FORMAT), "checkpoint": str(Path(model_dir).resolve())})
        with open(partial, "rb+") as f:       # on disk before it gets the real name
            os.fsync(f.fileno())
        os.replace(partial, path)
    except Exception as e:  # a read-only or full disk: the next start quantizes again
        warnings.warn(f"could not cache the int8 weights: {e}", stacklevel=2)
        if partial is not None:
            partial.unlink(missing_ok=True)
        return None
    for stale in path.parent.glob(glob.escape(_folder_tag(Path(model_dir).resolve())) + "-*.safetensors"):
        if stale != path:
            try:
                stale.unlink()
            except OSError:   # in use by another process (Windows), or already gone
                pass
    return path
