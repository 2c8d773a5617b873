"""Decoder weights onto 2 MB pages after load (engine/network/huge_pages.py): the page arithmetic,
the kernel's answer read honestly, contents untouched, and the engine's knob."""
from __future__ import annotations

import ctypes
import mmap
import sys

import numpy as np
import pytest
import torch

import engine
from cli.main import main
from real_speech import ASR_DIR
from engine.network import huge_pages
from engine.network.huge_pages import HUGE_PAGE, CollapseResult, collapse, tensor_range, thp_mode, whole_pages

MB = 1 << 20
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="transparent huge pages are Linux's")


def test_only_whole_huge_pages_inside_a_range_are_asked_for():
    H = HUGE_PAGE
    assert whole_pages(H // 2, 5 * H // 2) == (H, 2 * H)         # 0.5-3 pages hold the pages at 1 and 2
    assert whole_pages(H, 2 * H) == (H, 2 * H)
    assert whole_pages(3 * H // 2, H) == (2 * H, 0)              # 1.5-2.5 pages hold no whole page
    assert whole_pages(0, H // 2)[1] == 0


def test_the_kernel_setting_is_read_from_its_brackets(tmp_path):
    setting = tmp_path / "enabled"
    setting.write_text("always [madvise] never\n")
    assert thp_mode(setting) == "madvise"
    setting.write_text("[always] madvise never\n")
    assert thp_mode(setting) == "always"
    assert thp_mode(tmp_path / "missing") is None


@linux
def test_huge_pages_off_means_nothing_is_asked_of_the_kernel_and_says_why():
    result = collapse([(0, 8 * MB)], mode="never")
    assert result == CollapseResult(collapsed=0, asked=8 * MB, reason="transparent huge pages are never here")


def _huge_kb(start: int, length: int) -> int:
    """AnonHugePages (kB) of the mapping that holds [start, start + length), from /proc/self/smaps."""
    found, total, seen = False, 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            found = lo <= start and start + length <= hi
            seen = seen or found
        elif found and line.startswith("AnonHugePages:"):
            total += int(line.split()[1])
    assert seen, "no mapping holds the range"
    return total


@linux
def test_a_collapse_moves_memory_onto_huge_pages_or_says_why_not_and_never_changes_it():
    # Private anonymous memory, as the weights are (mmap's default for -1 is shared memory: tmpfs pages)
    area = mmap.mmap(-1, 6 * HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    data = np.frombuffer(area, dtype=np.uint8)
    data[:] = np.random.default_rng(0).integers(0, 256, data.size, dtype=np.uint8)
    before = data.copy()
    address = ctypes.addressof(ctypes.c_char.from_buffer(area))
    result = collapse([(address, 6 * HUGE_PAGE)])
    start, length = whole_pages(address, 6 * HUGE_PAGE)
    assert result.asked == length >= 5 * HUGE_PAGE
    if thp_mode() in (None, "never"):
        assert result.collapsed == 0 and "transparent huge pages" in result.reason
    else:
        assert result.collapsed + result.refused == result.asked
        assert result.collapsed == result.asked or result.reason      # whatever stayed is explained
        assert _huge_kb(start, length) * 1024 >= result.collapsed     # the kernel's own account agrees
    assert np.array_equal(data, before)
    del data
    area.close()


def test_tensor_ranges_cover_plain_and_onednn_packed_weights_and_nothing_off_the_cpu():
    plain = torch.zeros(256, 1024, dtype=torch.bfloat16)
    assert tensor_range(plain) == (plain.data_ptr(), 256 * 1024 * 2)
    assert tensor_range(torch.empty(4, device="meta")) is None
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(torch.randn(256, 1024).bfloat16(), 16)
    except RuntimeError:          # a torch build without oneDNN's bfloat16 packing: plain ranges only
        return
    address, size = tensor_range(packed)
    assert address == torch.ops.mkldnn.data_ptr(packed) and size >= 256 * 1024 * 2


def test_engine_moves_every_projection_weight_in_the_background_without_changing_tokens(tiny_model_dir,
                                                                                       monkeypatch):
    asked = []
    monkeypatch.setattr(huge_pages, "collapse", lambda ranges: asked.append(ranges) or CollapseResult(asked=1))
    clip = np.random.default_rng(1).standard_normal(16000 * 3).astype(np.float32) * 0.1
    plain = engine.load(tiny_model_dir, "cpu", "float32", huge_page_weights=False)
    assert plain.core.weight_pages is None
    moved = engine.load(tiny_model_dir, "cpu", "float32", huge_page_weights=True)
    assert moved.core.weight_pages.wait(timeout=60) == CollapseResult(asked=1)
    tensors = moved.net.projection_tensors()
    assert len(tensors) >= 4 * moved.config.decoder.layers     # qkv, o, gate_up, down in every layer, the head
    assert asked == [[tensor_range(t) for t in tensors]]
    assert moved.generate([clip], max_new_tokens=12) == plain.generate([clip], max_new_tokens=12)


def test_methods_that_keep_opaque_packed_weights_list_none_to_place():
    from engine.network.fp16_weights import Fp16CompactLinear
    from engine.network.int8_linear import Int8DynamicLinear

    weight = torch.randn(64, 128)
    assert Int8DynamicLinear(weight).tensors() == []
    assert Fp16CompactLinear(weight.bfloat16().float()).tensors() == []


def test_the_switch_and_the_knob(monkeypatch, tiny_model_dir):
    monkeypatch.setenv(huge_pages.SWITCH, "0")
    assert engine.load(tiny_model_dir, "cpu", "float32").core.weight_pages is None
    assert huge_pages.wanted(True) is True and huge_pages.wanted(None) is False
    monkeypatch.delenv(huge_pages.SWITCH)
    assert huge_pages.wanted(None) is True
    with pytest.raises(ValueError, match="huge_page_weights must be True, False or None"):
        engine.EngineConfig(huge_page_weights="yes")
    monkeypatch.setenv(huge_pages.SWITCH, "off")
    with pytest.raises(ValueError, match="QWEN3_ASR_HUGE_PAGES must be 0 or 1"):
        huge_pages.wanted(None)


def test_the_cli_leaves_short_inputs_on_4kb_pages(tmp_path, monkeypatch):
    """A one-shot run of under a minute of audio would not repay the move (as compact weights)."""
    from conftest import espeak_wav

    configs = []

    def load(*args, config=None, **kwargs):
        configs.append(config)
        raise ValueError("stop here")

    monkeypatch.setattr(engine, "load", load)
    wav = espeak_wav(tmp_path / "short.wav", "Hello world.")
    assert main(["transcribe", str(wav), "--model", str(ASR_DIR)]) == 2
    assert configs and configs[0].huge_page_weights is False and configs[0].compact_weights is False
