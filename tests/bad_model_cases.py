"""Damaged model folders (issue 16): each case copies a good checkpoint and breaks one thing.

Shared by tests/test_bad_models.py and tests/bench/bad_inputs_table.py. Each case is
(label, edit, words the one-line error must contain); ``edit(folder)`` breaks the copy.
"""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path


def _config(folder: Path, edit) -> None:
    path = folder / "config.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _text(data: dict) -> dict:
    return data["thinker_config"]["text_config"] if "thinker_config" in data else data["text_config"]


def _audio(data: dict) -> dict:
    return data["thinker_config"]["audio_config"] if "thinker_config" in data else data["audio_config"]


def _set(section, key, value):
    return lambda folder: _config(folder, lambda d: section(d).__setitem__(key, value))


def _header_length(value: int):
    def edit(folder: Path) -> None:
        path = folder / "model.safetensors"
        data = bytearray(path.read_bytes())
        data[:8] = struct.pack("<Q", value)
        path.write_bytes(bytes(data))
    return edit


def _header_not_json(folder: Path) -> None:
    path = folder / "model.safetensors"
    data = bytearray(path.read_bytes())
    data[8:12] = b"\x00\xff{["
    path.write_bytes(bytes(data))


def _cut_in_half(folder: Path) -> None:
    path = folder / "model.safetensors"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _offsets_past_end(folder: Path) -> None:
    """Rewrite the header so the last tensor claims bytes the file does not have."""
    path = folder / "model.safetensors"
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    name = max((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][1])
    begin, end = header[name]["data_offsets"]
    header[name]["data_offsets"] = [begin + 4096, end + 4096]
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data[8 + n:])


def _empty_weights(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(b"")


def _index(content: str):
    def edit(folder: Path) -> None:
        (folder / "model.safetensors.index.json").write_text(content)
    return edit


CASES = [
    ("num_hidden_layers = 10^6 (weights for 2)", _set(_text, "num_hidden_layers", 10 ** 6),
     ["text_config.num_hidden_layers = 1000000", "layers 0-1"]),
    ("encoder_layers = 10^6 (weights for 2)", _set(_audio, "encoder_layers", 10 ** 6),
     ["audio_config.encoder_layers = 1000000", "layers 0-1"]),
    ("num_hidden_layers = 1 (weights for 2)", _set(_text, "num_hidden_layers", 1),
     ["text_config.num_hidden_layers = 1"]),
    ("hidden_size = 128 (weights for 64)", _set(_text, "hidden_size", 128),
     ["wrong shapes", "embed_tokens.weight", "text_config.hidden_size = 128"]),
    ("hidden_size as a string", _set(_text, "hidden_size", "64"), ["text_config.hidden_size", '"64"']),
    ("hidden_size negative", _set(_text, "hidden_size", -64), ["text_config.hidden_size", "-64"]),
    ("n_window = 0", _set(_audio, "n_window", 0), ["audio_config.n_window", "found 0"]),
    ("config.json is a JSON list", lambda f: (f / "config.json").write_text("[1, 2]"),
     ["config.json must hold a JSON object, found a list"]),
    ("config.json invalid UTF-8", lambda f: (f / "config.json").write_bytes(b'{"a": "\xff\xfe"}'),
     ["config.json is not UTF-8"]),
    ("generation_config.json not JSON", lambda f: (f / "generation_config.json").write_text("{eos: 1"),
     ["generation_config.json is not valid JSON"]),
    ('eos_token_id = "end"', lambda f: (f / "generation_config.json").write_text('{"eos_token_id": "end"}'),
     ["generation_config.json", "eos_token_id", '"end"']),
    ("index.json not JSON", _index("{not json"), ["model.safetensors.index.json is not valid JSON"]),
    ("index.json weight_map a list", _index('{"weight_map": ["model.safetensors"]}'),
     ["model.safetensors.index.json", "weight_map must be"]),
    ("safetensors header length 2^63", _header_length(2 ** 63),
     ["model.safetensors is truncated or corrupt (header says its header is 9,223,372,036,854,775,808 bytes"]),
    ("safetensors header length 1 GB", _header_length(10 ** 9),
     ["model.safetensors is truncated or corrupt (header says its header is 1,000,000,000 bytes"]),
    ("safetensors header not JSON", _header_not_json, ["model.safetensors is truncated or corrupt", "not valid JSON"]),
    ("safetensors cut in half", _cut_in_half, ["model.safetensors is truncated or corrupt (header says"]),
    ("safetensors offsets past the end", _offsets_past_end,
     ["model.safetensors is truncated or corrupt (header says", "ends at byte"]),
    ("safetensors 0 bytes", _empty_weights, ["model.safetensors is truncated or corrupt (0 bytes"]),
]


def make_case(good: Path, out: Path, edit) -> Path:
    """A copy of the checkpoint ``good`` at ``out`` with ``edit`` applied."""
    shutil.copytree(good, out)
    edit(out)
    return out
