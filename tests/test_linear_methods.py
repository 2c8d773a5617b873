"""Linear methods: oneDNN-packed bfloat16 gives exactly what the plain method gives (F.linear,
through ``ops`` where the CPU emulates bfloat16), one row what bf16_gemv's twin gives; float32
through oneDNN agrees with F.linear to float32 rounding and leaves greedy tokens unchanged; and
each CPU kind gets the method its platform rule names, whatever machine runs the test."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from platforms import on_platform
from conftest import tone_clip as clip

import engine
from asr_kernels import bf16_gemv
from engine.network import linear_methods, ops, platform
from engine.network.linear_methods import (
    PackedBf16Linear, PlainLinear, SmallRowsOneDNNLinear, float_linear, onednn_linear)

HERE = platform.current()


@pytest.mark.parametrize("rows", [1, 5, 16, 300])
def test_packed_equals_plain(rows):
    if not HERE.onednn_bf16_packing:
        pytest.skip("this torch build has no oneDNN packing (the probe found none): the plain method runs")
    w = torch.randn(192, 64).to(torch.bfloat16)
    x = torch.randn(rows, 64).to(torch.bfloat16)
    method = PackedBf16Linear(w.clone())
    assert method.weight is None
    if rows == 1 and method.row is not None:     # one row reads the packed bytes through bf16_gemv
        assert torch.equal(method(x)[0], bf16_gemv.gemv_reference(x[0], w))
        return
    assert torch.equal(method(x), ops.linear(x, w))


@pytest.mark.parametrize("kind, dtype, shared, expected", [
    (dict(onednn_bf16_packing=True), torch.bfloat16, False, PackedBf16Linear),
    (dict(onednn_bf16_packing=True), torch.bfloat16, True, PlainLinear),       # a tied head is not copied
    (dict(onednn_bf16_packing=False), torch.bfloat16, False, PlainLinear),
    (dict(onednn_f32_small_rows=True), torch.float32, False, SmallRowsOneDNNLinear),
    (dict(onednn_f32_small_rows=True), torch.float32, True, SmallRowsOneDNNLinear),
    (dict(onednn_f32_small_rows=False), torch.float32, False, PlainLinear),
])
def test_each_platform_gets_the_method_its_rule_names(monkeypatch, kind, dtype, shared, expected):
    if expected is PackedBf16Linear and not HERE.onednn_bf16_packing:
        pytest.skip("packing a weight needs oneDNN in this torch build")
    on_platform(monkeypatch, **kind)
    w = torch.randn(64, 32).to(dtype)
    method = float_linear(w, shared=shared)
    assert type(method) is expected
    if expected is not PackedBf16Linear:
        assert method.weight is w          # the plain weight, never a copy


@pytest.mark.parametrize("vendor, x86, expected", [
    ("GenuineIntel", True, False), ("", True, False), ("AuthenticAMD", False, False)])
def test_float32_stays_on_mkl_where_onednn_was_not_measured(monkeypatch, vendor, x86, expected):
    """Intel CPUs, unknown vendors and non-x86 machines keep F.linear (MKL) for float32."""
    monkeypatch.setattr(platform, "_vendor", lambda: vendor)
    monkeypatch.setattr(platform._os_platform, "machine", lambda: "x86_64" if x86 else "aarch64")
    assert platform.detect().onednn_f32_small_rows is expected


@pytest.mark.parametrize("rows", [1, 2, 5, 16, 32, 33, 300])
def test_float32_small_rows_agree_with_f_linear(rows):
    w, x = torch.randn(192, 64), torch.randn(rows, 64)
    method = SmallRowsOneDNNLinear(w)
    torch.testing.assert_close(method(x), F.linear(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(method(x.t().contiguous().t()), F.linear(x, w), rtol=1e-5, atol=1e-5)


def test_onednn_pads_rows_to_a_power_of_two(monkeypatch):
    """Few row counts reach oneDNN (it keeps buffers per row count), and padding changes no row."""
    seen, real = [], linear_methods.onednn_mm
    monkeypatch.setattr(linear_methods, "onednn_mm", lambda x, w: seen.append(x.shape[0]) or real(x, w))
    w = torch.randn(48, 16)
    for rows in range(1, 33):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(onednn_linear(x, w), F.linear(x, w), rtol=1e-5, atol=1e-5)
    assert sorted(set(seen)) == [1, 2, 4, 8, 16, 32]


def test_bfloat16_engine_tokens_equal_unpacked(tiny_model_dir, monkeypatch):
    clips = [clip(s, i) for i, s in enumerate([1.0, 5.0, 9.0])]
    packed = engine.load(tiny_model_dir, dtype="bfloat16").generate(clips, max_new_tokens=16)
    on_platform(monkeypatch, onednn_bf16_packing=False)
    plain = engine.load(tiny_model_dir, dtype="bfloat16").generate(clips, max_new_tokens=16)
    assert packed == plain


def test_float32_engine_tokens_equal_the_mkl_route(tiny_model_dir, monkeypatch):
    clips = [clip(s, i) for i, s in enumerate([1.0, 5.0, 9.0])]
    on_platform(monkeypatch, onednn_f32_small_rows=True)
    routed = engine.load(tiny_model_dir, dtype="float32").generate(clips, max_new_tokens=16)
    on_platform(monkeypatch, onednn_f32_small_rows=False)
    plain = engine.load(tiny_model_dir, dtype="float32").generate(clips, max_new_tokens=16)
    assert routed == plain


def test_the_platform_line_reaches_the_cli_and_about(tiny_model_dir, qtbot):
    """The CLI's first line and Help > About name the platform the rules were chosen for."""
    from app.widgets.about_dialog import AboutDialog

    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    assert eng.hardware.startswith(platform.current().describe()) and "threads" in eng.hardware
    dialog = AboutDialog("tiny", "cpu, float32", hardware=eng.hardware)
    qtbot.addWidget(dialog)
    from PySide6.QtWidgets import QLabel

    assert any(platform.current().cpu_model in label.text() for label in dialog.findChildren(QLabel))


def test_platform_detection_does_not_depend_on_or_move_the_global_rng():
    """The probes run once per process, at whichever test (or app step) first asks, so their
    answer must not depend on the random state there, nor change it."""
    import torch

    from engine.network import platform

    found = set()
    for seed in range(40):
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        found.add(platform.detect())
        assert torch.equal(state, torch.get_rng_state())
    assert len(found) == 1


def test_torch_kept_to_avx2_takes_an_avx2_only_cpus_rules():
    """``ATEN_CPU_CAPABILITY=avx2`` (tests/bench/avx2_only.sh) keeps torch's kernels off AVX-512:
    bfloat16 is then not native to them on any CPU, so the default is float32 on compact weights,
    as on an AVX2-only laptop."""
    import os
    import subprocess
    import sys

    probe = ("from engine.network import platform; import torch; p = platform.current(); "
             "print(p.amx, p.avx512_bf16, p.default_dtype(torch.device('cpu')), "
             "p.compact_weights_pay(torch.float32) == p.fbgemm_fp16)")
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "torch.float32", "True"]
