"""int8 weights kept on disk, so that ``quantize="int8"`` quantizes a checkpoint once, not at every start.

Quantizing is the slow part of an int8 load: every decoder projection and the LM head go
through float32 (abs, max, divide, round) before fbgemm packs them. The cache holds what that
produces, ``q`` [out, in] int8 and ``scale`` [out] float32 per projection, in one safetensors
file per checkpoint folder. Its name carries a hash of the folder's path and of its weight
files (names, sizes, modification and change times, inodes), of the dtype the weights were
quantized from and of ``FORMAT``, so a replaced or edited checkpoint gets a fresh file and the
stale one is removed: the change time (ctime) cannot be set back, so other weights of the same
size copied in with their old mtime (``cp -p``, ``rsync -t``) still change the key. Each entry
carries a CRC-32 of its bytes, checked on every read: a damaged entry is quantized again (and
rewritten), never used. Partial files a killed writer left behind are removed at the next start.
The name is taken before the weights are read (``cache_file``) and checked again before
writing, so weights read from files that changed meanwhile are not stored under the new name. The cache only saves time: a file that cannot
be read or written is skipped with a warning and the weights are quantized as before.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import time
import warnings
import zlib
from pathlib import Path

import torch

# Bump when quantize_int8 or the stored names change: old files are then never read.
FORMAT = 2          # 2: a CRC-32 per entry
CACHE_DIR_ENV = "QWEN3_ASR_CACHE_DIR"
PARTIAL_MAX_AGE_S = 24 * 3600   # where a writer's pid cannot be checked, its partial file may be this old


class Int8CacheWarning(UserWarning):
    """The int8 cache was skipped or repaired; the load goes on (quantizing as without a cache)."""


def _warn(message: str) -> None:
    warnings.warn(message, Int8CacheWarning, stacklevel=3)


def _crc(tensor: torch.Tensor) -> str:
    return f"{zlib.crc32(memoryview(tensor.contiguous().view(torch.uint8).numpy())):08x}"


def _crcs(tensors: list[torch.Tensor]) -> list[str]:
    """CRC-32s of many tensors on all cores (zlib lets go of the GIL on large buffers)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as pool:
        return list(pool.map(_crc, tensors))


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
        digest.update(f"{file.name} {stat.st_size} {stat.st_mtime_ns} {stat.st_ctime_ns} {stat.st_ino}\n".encode())
    return cache_dir() / "int8" / f"{_folder_tag(model_dir)}-{digest.hexdigest()[:16]}.safetensors"


def read(path: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]] | None:
    """name -> (q, scale) from the cache file ``path``, or None when there is no usable file."""
    remove_partials(path.parent)
    try:
        if not path.is_file():
            return None
        from safetensors import safe_open

        # Copied out of the file's memory map: a mapped file could not be replaced or removed
        # (on Windows) while the engine lives.
        with safe_open(str(path), framework="pt") as f:
            sums = json.loads((f.metadata() or {}).get("crc32", "{}"))
            tensors = {key: f.get_tensor(key).clone() for key in f.keys()}
        damaged = sorted(key for key, crc in zip(tensors, _crcs(list(tensors.values()))) if sums.get(key) != crc)
        names = {key.rsplit(".", 1)[0] for key in tensors}
        good = {name: (tensors[f"{name}.q"], tensors[f"{name}.scale"]) for name in names
                if f"{name}.q" not in damaged and f"{name}.scale" not in damaged}
        if damaged:   # the rest is used; these are quantized again and the file rewritten
            _warn(f"int8 weight cache {path.name}: {len(names) - len(good)} of {len(names)} entries damaged "
                  f"(checksum mismatch: {', '.join(damaged[:3])}{' ...' if len(damaged) > 3 else ''}); "
                  f"quantizing them again")
        return good
    except Exception as e:  # a truncated or foreign file: quantize again (and overwrite it)
        _warn(f"int8 weight cache unreadable, quantizing again: {' '.join(str(e).split())}")
        return None


def remove_partials(folder: Path) -> list[Path]:
    """Remove the partial files of writers that are gone (killed while writing); returns them."""
    removed = []
    for partial in folder.glob(".*.partial") if folder.is_dir() else []:
        try:
            pid = int(partial.name.rsplit(".", 2)[-2])
        except ValueError:
            pid = None
        if pid == os.getpid() or not _writer_gone(pid, partial):
            continue
        try:
            partial.unlink()
            removed.append(partial)
        except OSError:
            pass
    return removed


def _writer_gone(pid: int | None, partial: Path) -> bool:
    if pid is not None and os.name == "posix":
        try:
            os.kill(pid, 0)          # signal 0: only asks whether the process exists
        except ProcessLookupError:
            return True
        except PermissionError:     # another user's process with that pid: ours is gone
            return True
        return False
    try:                            # elsewhere (os.kill would end the process on Windows): by age
        return time.time() - partial.stat().st_mtime > PARTIAL_MAX_AGE_S
    except OSError:
        return False


def write(model_dir, path: Path, weights: dict[str, tuple[torch.Tensor, torch.Tensor]],
          dtype: torch.dtype) -> Path | None:
    """Store ``weights`` at ``path`` (atomically) and drop the folder's stale files; None if it
    failed or the checkpoint changed since ``path`` was named."""
    partial = None
    try:
        from safetensors.torch import save_file

        if cache_file(model_dir, dtype) != path:
            _warn(f"{model_dir}: the checkpoint changed while it loaded; its int8 weights are not cached")
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {}
        for name, (q, scale) in weights.items():
            tensors[f"{name}.q"], tensors[f"{name}.scale"] = q.contiguous(), scale.contiguous()
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        sums = json.dumps({key: _crc(t) for key, t in tensors.items()})
        save_file(tensors, str(partial), metadata={"format": str(FORMAT), "crc32": sums,
                                                   "checkpoint": str(Path(model_dir).resolve())})
        with open(partial, "rb+") as f:       # on disk before it gets the real name
            os.fsync(f.fileno())
        os.replace(partial, path)
    except Exception as e:  # a read-only or full disk: the next start quantizes again
        _warn(f"could not cache the int8 weights: {' '.join(str(e).split())}")
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
