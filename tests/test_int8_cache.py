"""The int8 weight cache: a checkpoint is quantized once; later loads read the cached weights
and transcribe exactly as the first load did; an edited checkpoint, a broken cache file or an
unwritable cache folder never give wrong weights or a failed load."""
from __future__ import annotations

import os
import shutil

import pytest
import torch
from conftest import tone_clip as clip

import engine
from engine.network import choose_linear, int8_cache, int8_linear, platform


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(int8_cache.CACHE_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def model(tiny_model_dir, tmp_path):
    return shutil.copytree(tiny_model_dir, tmp_path / "model")


def count_quantized(monkeypatch) -> list:
    platform.current()          # its one-time probe quantizes a test matrix
    calls, real = [], int8_linear.quantize_int8
    monkeypatch.setattr(choose_linear, "quantize_int8", lambda w: calls.append(w.shape) or real(w))
    return calls


def transcribe(model_dir):
    clips = [clip(s, i) for i, s in enumerate([1.5, 6.0])]
    return engine.load(model_dir, dtype="float32", quantize="int8").generate(clips, max_new_tokens=12)


def test_second_load_reads_the_cache_and_gives_the_same_tokens(model, cache, monkeypatch):
    calls = count_quantized(monkeypatch)
    first = transcribe(model)
    stored = int8_cache.read(int8_cache.cache_file(model, torch.float32))
    assert len(calls) == len(stored) and "head" in stored and "layers.0.qkv" in stored
    files = list((cache / "int8").glob("*.safetensors"))
    assert len(files) == 1 and files[0] == int8_cache.cache_file(model, torch.float32)

    calls.clear()
    assert transcribe(model) == first
    assert calls == [], "a cached checkpoint was quantized again"


def test_edited_checkpoint_is_quantized_again_and_the_stale_file_removed(model, cache, monkeypatch):
    transcribe(model)
    stale = int8_cache.cache_file(model, torch.float32)
    weights = next(model.glob("*.safetensors"))
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))
    calls = count_quantized(monkeypatch)
    transcribe(model)
    assert calls, "the edited checkpoint was served from the old cache"
    assert not stale.exists() and int8_cache.cache_file(model, torch.float32).is_file()


def test_broken_cache_file_warns_and_is_rewritten(model, cache, monkeypatch):
    first = transcribe(model)
    path = int8_cache.cache_file(model, torch.float32)
    path.write_bytes(b"not a safetensors file")
    with pytest.warns(UserWarning, match="int8 weight cache unreadable"):
        assert transcribe(model) == first
    calls = count_quantized(monkeypatch)
    transcribe(model)
    assert calls == [] and path.stat().st_size > 1000


def test_unwritable_cache_folder_still_loads(model, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(int8_cache.CACHE_DIR_ENV, str(blocker / "cache"))   # a folder under a file
    with pytest.warns(UserWarning, match="could not cache the int8 weights"):
        tokens = transcribe(model)
    assert tokens and all(tokens)


def test_background_packing_leaves_the_callers_warnings_alone(model, cache, monkeypatch):
    """Packing runs on threads after the load returns. Warning filters are process-wide, so a
    packing thread that set one would hide the caller's warnings meanwhile: only the calling
    thread may touch them."""
    import threading
    import warnings

    threads, real = [], warnings.catch_warnings
    monkeypatch.setattr(warnings, "catch_warnings", lambda *a, **k: threads.append(threading.current_thread())
                        or real(*a, **k))
    eng = engine.load(model, quantize="int8")
    assert eng.generate([clip(2.0, 0)], max_new_tokens=4)[0]     # every projection waited for its packing
    assert threads and set(threads) == {threading.main_thread()}


def test_dtype_is_part_of_the_key(model, cache):
    """Weights quantized from bfloat16 are not served to a float32 load, nor the other way round."""
    assert int8_cache.cache_file(model, torch.float32) != int8_cache.cache_file(model, torch.bfloat16)
    engine.load(model, dtype="bfloat16", quantize="int8")
    engine.load(model, dtype="float32", quantize="int8")
    assert len(list((cache / "int8").glob("*.safetensors"))) == 1     # each replaced the other's stale file


def test_failed_packing_falls_back_to_the_unpacked_path(model, cache, monkeypatch):
    first = transcribe(model)

    def broken(self, quantized_tensor=None):
        raise RuntimeError("no fbgemm today")

    monkeypatch.setattr(int8_linear.Int8DynamicLinear, "pack", broken)
    with pytest.warns(UserWarning, match="packing failed"):
        again = transcribe(model)
    assert len(again) == len(first) and all(again)


def test_checkpoint_changed_during_the_load_is_not_cached(model, cache, monkeypatch):
    from engine.network import loading

    weights = next(model.glob("*.safetensors"))
    real = loading.load_weights

    def load_then_touch(*args, **kwargs):
        real(*args, **kwargs)
        os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10**9))

    monkeypatch.setattr(loading, "load_weights", load_then_touch)
    with pytest.warns(UserWarning, match="changed while it loaded"):
        assert all(transcribe(model))
    assert not (cache / "int8").exists() or not list((cache / "int8").glob("*.safetensors"))


def spy_on_reads(monkeypatch) -> list[str]:
    """Names of the checkpoint tensors the loader reads from now on."""
    from engine.network import weights

    names, real = [], weights.safe_open

    class Recording:
        def __init__(self, *args, **kwargs):
            self.file = real(*args, **kwargs)

        def __enter__(self):
            self.opened = self.file.__enter__()
            return self

        def __exit__(self, *exc):
            return self.file.__exit__(*exc)

        def get_tensor(self, name):
            names.append(name)
            return self.opened.get_tensor(name)

    monkeypatch.setattr(weights, "safe_open", Recording)
    return names


PROJECTIONS = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
               "gate_proj.weight", "up_proj.weight", "down_proj.weight")


def test_cached_start_never_reads_the_float_projection_weights(model, cache, monkeypatch):
    """What the cache holds in int8 is not read from the checkpoint at all, so a cached start
    keeps the float decoder weights out of memory; the audio tower's own projections still load."""
    first = transcribe(model)
    read = spy_on_reads(monkeypatch)
    assert transcribe(model) == first
    decoder = [n for n in read if "language_model." in n]
    assert decoder and not [n for n in decoder if n.endswith(PROJECTIONS)]
    assert "lm_head.weight" not in read and "model.language_model.embed_tokens.weight" in read
    assert [n for n in read if "audio_tower." in n and n.endswith("q_proj.weight")]


def test_a_cached_entry_of_the_wrong_shape_is_read_and_quantized_again(model, cache, monkeypatch):
    first = transcribe(model)
    path = int8_cache.cache_file(model, torch.float32)
    stored = int8_cache.read(path)
    q, scale = stored["layers.1.down"]
    stored["layers.1.down"] = (q[:-1].clone(), scale[:-1].clone())
    int8_cache.write(model, path, stored, torch.float32)
    read, calls = spy_on_reads(monkeypatch), count_quantized(monkeypatch)
    assert transcribe(model) == first
    assert calls == [tuple(q.shape)]
    assert [n for n in read if n.endswith("layers.1.mlp.down_proj.weight")]
    assert not [n for n in read if n.endswith("layers.0.mlp.down_proj.weight")]
