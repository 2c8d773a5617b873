"""int8 weight quantization (``quantize="int8"``): the int8 GEMM computes what plain torch
computes from the same int8 numbers, the engine, the CLI and the app accept the option,
and bad values fail with a clear message. Not token-exact by design, so no token parity."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import engine
from cli.main import main
from engine.network import int8_linear
from engine.network.int8_linear import Int8DynamicLinear, check_quantize, quantize_int8


def dynamic_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Plain torch in float64: the activations quantized per tensor to 7 bits as the dynamic
    int8 linear does, times the dequantized int8 weights."""
    scale, zero = torch._choose_qparams_per_tensor(x, True)
    x_q = ((x / scale).round() + zero).clamp(0, 127)
    x_deq = (x_q - zero) * scale
    q, w_scale = quantize_int8(weight)
    return x_deq.double() @ (q.double() * w_scale.double()[:, None]).T


def test_int8_weights_round_trip_within_half_a_step():
    w = torch.randn(48, 40) * 0.1
    q, scale = quantize_int8(w)
    assert q.dtype == torch.int8 and q.abs().max() <= 127
    assert ((q.float() * scale[:, None] - w).abs() <= scale[:, None] / 2 + 1e-7).all()


@pytest.mark.parametrize("rows", [1, 5, 300])
def test_int8_projection_matches_plain_torch_reference(rows):
    torch.manual_seed(rows)
    w, x = torch.randn(96, 64) * 0.05, torch.randn(rows, 64)
    proj = Int8DynamicLinear(w)
    y = proj(x)
    ref = dynamic_reference(x, w) if proj.packed is not None else \
        x.double() @ (proj.q.double() * proj.scale.double()[:, None]).T
    assert y.dtype == torch.float32 and y.shape == (rows, 96)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-5)
    # and it is close to the float32 weights it came from (not exact: a quantized mode)
    assert (y - F.linear(x, w)).abs().max() < 0.05 * F.linear(x, w).abs().max()


def test_int8_projection_without_the_dynamic_op_dequantizes_exactly(monkeypatch):
    monkeypatch.setattr(int8_linear, "_dynamic_int8_works", lambda: False)
    w, x = torch.randn(32, 16), torch.randn(3, 16)
    proj = Int8DynamicLinear(w)
    assert proj.packed is None
    torch.testing.assert_close(proj(x), F.linear(x, proj.q.float() * proj.scale[:, None]))


def test_bfloat16_activations_come_back_in_bfloat16():
    proj = Int8DynamicLinear(torch.randn(32, 16))
    assert proj(torch.randn(2, 16).bfloat16()).dtype == torch.bfloat16


@pytest.mark.parametrize("bad", ["int4", "INT8", "fp8", 8, True])
def test_unknown_quantize_values_are_refused(bad, tiny_model_dir):
    with pytest.raises(ValueError, match="quantize"):
        engine.load(tiny_model_dir, device="cpu", quantize=bad)


def test_int8_on_cuda_is_refused_clearly():
    with pytest.raises(ValueError, match="CPU"):
        check_quantize("int8", torch.device("cuda"))
    assert check_quantize(None, torch.device("cuda")) is None


def test_engine_loads_int8_and_transcribes(tiny_model_dir):
    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32", quantize="int8", kv_cache_bytes=64 << 20)
    assert eng.quantize == "int8"
    layer = eng.net.language_model.layers[0]
    assert all(isinstance(p, Int8DynamicLinear) for p in (layer.qkv, layer.o, layer.gate_up, layer.down, eng.net.head))
    # each layer's int8 projection computes what plain torch computes from its int8 weights
    x = torch.randn(4, eng.config.decoder.hidden_size)
    y = layer.qkv(x)
    if layer.qkv.packed is not None:
        w = layer.qkv.packed.unpack()[0].dequantize()
        scale, zero = torch._choose_qparams_per_tensor(x, True)
        x_deq = (((x / scale).round() + zero).clamp(0, 127) - zero) * scale
        torch.testing.assert_close(y.double(), x_deq.double() @ w.double().T, rtol=1e-5, atol=1e-5)
    audio = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.1
    [tokens] = eng.generate([audio], max_new_tokens=5)
    assert 1 <= len(tokens) <= 5 and all(0 <= t < eng.config.decoder.vocab_size for t in tokens)
    exact = engine.load(tiny_model_dir, device="cpu", dtype="float32", kv_cache_bytes=64 << 20)
    assert exact.quantize is None and not isinstance(exact.net.language_model.layers[0].qkv, Int8DynamicLinear)


def test_cli_accepts_quantize_int8(tiny_model_dir, speech_wav, tmp_path, capsys):
    code = main(["transcribe", str(speech_wav), "--model", str(tiny_model_dir), "--quantize", "int8",
                 "--output-dir", str(tmp_path), "--format", "txt", "--quiet"])
    assert code == 0 and (tmp_path / f"{speech_wav.stem}.txt").is_file()
    with pytest.raises(SystemExit):
        main(["transcribe", str(speech_wav), "--model", str(tiny_model_dir), "--quantize", "int4"])
    assert "invalid choice" in capsys.readouterr().err


def test_app_quantization_setting_loads_int8(tiny_model_dir, monkeypatch, tmp_path, qapp):
    """int8 is a quantization setting beside the precision, not a precision; an old settings
    file's "int8 (CPU)" precision reads as automatic precision with int8 weights."""
    pytest.importorskip("PySide6")
    from PySide6.QtCore import QSettings

    from app import settings as S
    from app.backend.worker import EngineWorker

    calls = {}
    worker = EngineWorker(loader=lambda *a, **k: calls.update(args=a, kwargs=k) or object())
    assert "int8 (CPU)" not in S.DTYPES
    settings = S.Settings(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    settings.set(S.QUANTIZE, "int8")
    dtype, quantize = S.model_precision(settings)
    worker.load_model(str(tiny_model_dir), "cpu", dtype, "", 0, quantize)
    assert calls["kwargs"]["quantize"] == "int8" and calls["args"][2] is None
    settings.set(S.QUANTIZE, "none")
    settings.set(S.DTYPE, S.LEGACY_INT8_DTYPE)
    assert S.model_precision(settings) == ("", "int8")
    settings.set(S.DTYPE, "float32")
    assert S.model_precision(settings) == ("float32", "")
