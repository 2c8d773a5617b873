"""The int8 cache trusts nothing it has not checked (issue 37): damaged entries are found by their
checksum and quantized again, same-size weights copied in with the old mtime change the key,
partial files of killed writers are removed, and the CLI shows cache warnings on one line."""
from __future__ import annotations

import os

import pytest
import torch
from test_int8_cache import cache, count_quantized, model, transcribe  # noqa: F401 (fixtures)

from engine.network import int8_cache

def test_zeroed_entries_are_found_by_their_checksum_and_quantized_again(model, cache, monkeypatch):
    first = transcribe(model)
    path = int8_cache.cache_file(model, torch.float32)
    raw = bytearray(path.read_bytes())
    header = 8 + int.from_bytes(raw[:8], "little")
    raw[header:] = bytes(len(raw) - header)          # header intact, every tensor byte zeroed
    path.write_bytes(bytes(raw))
    calls = count_quantized(monkeypatch)
    with pytest.warns(int8_cache.Int8CacheWarning, match="entries damaged .checksum mismatch"):
        assert transcribe(model) == first
    assert calls, "damaged entries were used"
    calls.clear()
    assert transcribe(model) == first and calls == []   # rewritten whole: the next start reads it


def test_same_size_weights_copied_in_with_the_old_mtime_are_not_served_the_old_cache(model, cache, monkeypatch):
    from safetensors.torch import load_file, save_file

    transcribe(model)
    weights = next(model.glob("*.safetensors"))
    before = weights.stat()
    other = {k: (t + 0.01 if t.is_floating_point() else t) for k, t in load_file(str(weights)).items()}
    save_file(other, str(model / "other.bin"), metadata={"format": "pt"})
    data = (model / "other.bin").read_bytes()
    (model / "other.bin").unlink()
    assert len(data) == before.st_size
    with open(weights, "r+b") as f:                  # in place, same size: what cp -p does
        f.write(data)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert weights.stat().st_mtime_ns == before.st_mtime_ns and weights.stat().st_size == before.st_size
    calls = count_quantized(monkeypatch)
    transcribe(model)
    assert calls, "the new weights ran with the old int8 decoder"


def test_partial_files_of_killed_writers_are_removed_at_the_next_start(model, cache):
    folder = cache / "int8"
    folder.mkdir(parents=True)
    dead = folder / ".asr-x.safetensors.4194305.partial"      # above any pid_max: no such process
    mine = folder / f".asr-x.safetensors.{os.getpid()}.partial"
    dead.write_bytes(b"half a file")
    mine.write_bytes(b"being written")
    assert int8_cache.read(int8_cache.cache_file(model, torch.float32)) is None   # what every int8 start does
    assert not dead.exists() and mine.exists()


def test_cli_prints_library_warnings_on_one_line(monkeypatch):
    import warnings

    from cli.main import _one_line_warnings

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)   # restored after the test
    _one_line_warnings()
    shown = warnings.formatwarning(int8_cache.Int8CacheWarning("could not cache the int8 weights: [Errno 20]\n"
                                                               "Not a directory"), int8_cache.Int8CacheWarning,
                                   "engine/network/int8_cache.py", 41, "warnings.warn(...)")
    assert shown == "warning: could not cache the int8 weights: [Errno 20] Not a directory\n"
