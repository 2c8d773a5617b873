"""safetensors headers, read and checked without loading a tensor.

A safetensors file is an 8-byte little-endian header length, a JSON header naming
each tensor's dtype, shape and byte range, then the data. Reading only the header
is cheap, so a checkpoint is checked whole (truncated files, lying headers, which
tensors exist and their shapes) before anything is built or loaded; a damaged
file fails with one line saying what its header claims and what the file holds.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from engine.errors import CheckpointError

# safetensors itself refuses headers over 100 MB; real ones are well under 1 MB.
MAX_HEADER_BYTES = 100_000_000
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives and what it claims to be."""

    file: Path
    shape: tuple[int, ...]
    dtype: str


def _corrupt(path: Path, why: str) -> CheckpointError:
    return CheckpointError(f"{path.parent}: {path.name} is truncated or corrupt ({why})")


def read_header(path: Path) -> dict[str, TensorEntry]:
    """The tensors of one safetensors file from its header; every byte range is checked
    against the file's real size, so loading cannot read past its end."""
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise _corrupt(path, f"{size} bytes, shorter than the 8-byte header length")
            header_len = int.from_bytes(prefix, "little")
            if header_len > size - 8:
                raise _corrupt(path, f"header says its header is {header_len:,} bytes; the file has {size:,}")
            if header_len > MAX_HEADER_BYTES:
                raise _corrupt(path, f"header says its header is {header_len:,} bytes, over the "
                                     f"{MAX_HEADER_BYTES:,} safetensors allows")
            raw = f.read(header_len)
    except OSError as e:
        raise CheckpointError(f"{path.parent}: {path.name} cannot be read ({e.strerror or e})") from e
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise _corrupt(path, f"its header is not valid JSON: {e}") from e
    if not isinstance(header, dict):
        raise _corrupt(path, "its header is not a JSON object")
    data_bytes = size - 8 - header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tensors[name] = _entry(path, name, info, data_bytes)
    return tensors


def _entry(path: Path, name: str, info, data_bytes: int) -> TensorEntry:
    if not isinstance(info, dict):
        raise _corrupt(path, f"header entry for {name} is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise _corrupt(path, f"header gives {name} the unknown dtype {json.dumps(dtype)[:30]}")
    if not isinstance(shape, list) or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in shape):
        raise _corrupt(path, f"header gives {name} the shape {json.dumps(shape)[:60]}")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or any(isinstance(o, bool) or not isinstance(o, int) or o < 0 for o in offsets)):
        raise _corrupt(path, f"header gives {name} the byte range {json.dumps(offsets)[:60]}")
    begin, end = offsets
    if end > data_bytes:
        raise _corrupt(path, f"header says {name} ends at byte {end:,} of the data; the file holds {data_bytes:,}")
    if end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise _corrupt(path, f"header gives {name} {end - begin:,} bytes for shape {tuple(shape)} of {dtype}")
    return TensorEntry(path, tuple(shape), dtype)


def checkpoint_files(model_dir: Path) -> list[Path]:
    """The safetensors files of a checkpoint (one file or shards listed in an index)."""
    from engine.network.config import read_json_object

    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = read_json_object(index).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{model_dir}: {index.name}: weight_map must be a non-empty JSON object "
                                  f"mapping tensor names to shard files")
        names = set(weight_map.values())
        bad = [n for n in names if not isinstance(n, str) or not n or Path(n).name != n]
        if bad:
            raise CheckpointError(f"{model_dir}: {index.name}: weight_map names shards that are not plain "
                                  f"file names in the folder: {json.dumps(bad[:3])[:120]}")
        files = sorted(model_dir / n for n in names)
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


def read_checkpoint(model_dir: Path) -> dict[str, TensorEntry]:
    """Every tensor of the checkpoint by its stored name, from the headers of all its files."""
    tensors: dict[str, TensorEntry] = {}
    for path in checkpoint_files(model_dir):
        for name, entry in read_header(path).items():
            if name in tensors:
                raise CheckpointError(f"{model_dir}: tensor {name} is stored twice "
                                      f"({tensors[name].file.name} and {path.name})")
            tensors[name] = entry
    return tensors
