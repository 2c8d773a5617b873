"""Weights from a bfloat16 checkpoint kept as float16 times a power of two per row: exactly the
same values, float32 math (fp16_weights). Checked here: the values survive exactly or the
float path is kept; outputs agree with F.linear to float32 rounding over shapes, row counts
and dtypes; a bfloat16 checkpoint run in float32 gives transformers' greedy tokens."""
from __future__ import annotations

import platform
import shutil

import pytest
import torch
import torch.nn.functional as F
from checkpoints import build_checkpoint
from reference import reference_generate
from platforms import on_platform
from conftest import tone_clip as clip

import engine
from asr_kernels.fp16_scale import scale_rows
from engine.network import fp16_weights
from engine.network.fp16_weights import Fp16CompactLinear, fp16_gemm_works, stores_as_fp16

X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.fixture
def fp16_on(monkeypatch):
    """The rule says yes on any x86 CPU, so a CI machine with native bfloat16 runs these paths too."""
    on_platform(monkeypatch, native_bf16=False)


def bf16_valued(*shape, seed=0, scale=0.02) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * scale).bfloat16().float()


def packed(weight: torch.Tensor) -> Fp16CompactLinear:
    proj = Fp16CompactLinear(weight)
    proj.pack()
    return proj


def test_fbgemm_fp16_is_there_on_x86():
    assert fp16_gemm_works() == X86


def test_bfloat16_values_scale_exactly_into_float16():
    w = bf16_valued(64, 96)
    w[3] *= 2.0 ** -20       # rows of any magnitude: each gets its own power of two
    w[5, :4] = torch.tensor([0.0, 2.0 ** -20, -(2.0 ** -25), 3.0])    # within 2^-32 of the row's largest
    w[7] = 0.0
    scaled, inverse = scale_rows(w)
    assert torch.equal(scaled.half().float() * inverse[:, None], w)


@pytest.mark.parametrize("spoiler", ["full float32 mantissa", "range beyond float16", "nan"])
def test_values_float16_cannot_hold_keep_the_float_path(spoiler, fp16_on):
    w = bf16_valued(64, 96)
    if spoiler == "full float32 mantissa":
        w = torch.randn(64, 96)
    elif spoiler == "range beyond float16":
        w[9, :2] = torch.tensor([1.0, 2.0 ** -40])
    else:
        w[9, 0] = float("nan")
    assert scale_rows(w) is None
    proj = packed(w.clone())
    assert proj.packed is None and proj.fallback is not None
    x = torch.randn(3, 96)
    torch.testing.assert_close(proj(x), proj.fallback(x), rtol=0, atol=0, equal_nan=True)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
@pytest.mark.parametrize("rows", [1, 2, 3, 8, 33, 300])
@pytest.mark.parametrize("shape", [(192, 64), (64, 320)])
def test_float32_outputs_agree_with_f_linear(rows, shape, fp16_on):
    w = bf16_valued(*shape, seed=rows)
    proj = packed(w.clone())
    assert proj.packed is not None and proj.fallback is None, "the float weight is dropped once packed"
    x = torch.randn(rows, shape[1] * 2)[:, ::2]         # a strided view, as sliced activations come
    y = proj(x)
    assert y.dtype == torch.float32 and y.shape == (rows, shape[0])
    torch.testing.assert_close(y, F.linear(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
@pytest.mark.parametrize("rows", [1, 5, 40])
def test_a_weight_packed_in_row_slices_gives_the_same_outputs(rows, monkeypatch, fp16_on):
    """A weight taller than PACK_ROWS (the LM head) is packed and run as several fbgemm matrices."""
    monkeypatch.setattr(fp16_weights, "PACK_ROWS", 64)
    w = bf16_valued(200, 96, seed=5)
    proj = packed(w)
    assert len(proj.packed) == 4                       # 64 + 64 + 64 + 8 rows
    x = torch.randn(rows, 96, generator=torch.Generator().manual_seed(rows))
    assert torch.allclose(proj(x), F.linear(x, w), rtol=1e-5, atol=1e-6)
    monkeypatch.setattr(fp16_weights, "PACK_ROWS", 8192)
    whole = packed(w)
    assert len(whole.packed) == 1 and torch.equal(proj(x), whole(x))   # same sums, per output column


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_bfloat16_activations_come_back_bfloat16(fp16_on):
    w = bf16_valued(128, 64).bfloat16()
    x = torch.randn(5, 64).bfloat16()
    y = packed(w.clone())(x)
    assert y.dtype == torch.bfloat16
    torch.testing.assert_close(y, F.linear(x.float(), w.float()).bfloat16(), rtol=1e-2, atol=1e-2)


def test_where_it_applies(monkeypatch):
    monkeypatch.setattr(fp16_weights, "fp16_gemm_works", lambda: True)
    on_platform(monkeypatch, native_bf16=False)
    assert stores_as_fp16(torch.zeros(4, 4)) and stores_as_fp16(torch.zeros(4, 4, dtype=torch.bfloat16))
    assert not stores_as_fp16(torch.zeros(4, 4, dtype=torch.float16))
    on_platform(monkeypatch, native_bf16=True)    # bfloat16 hardware: its own GEMMs
    assert not stores_as_fp16(torch.zeros(4, 4))
    on_platform(monkeypatch, native_bf16=False)
    monkeypatch.setattr(fp16_weights, "fp16_gemm_works", lambda: False)  # not x86, or no fbgemm
    assert not stores_as_fp16(torch.zeros(4, 4))


@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory):
    """A tiny checkpoint stored in bfloat16, as real Qwen3-ASR checkpoints are."""
    return build_checkpoint(tmp_path_factory.mktemp("tiny-asr-bf16"), seed=3, dtype=torch.bfloat16)


def fp16_projections(eng) -> list:
    layers = eng.net.language_model.layers
    return [p for layer in layers for p in (layer.qkv, layer.gate_up, layer.o, layer.down)
            if isinstance(p, Fp16CompactLinear)]


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
@pytest.mark.parametrize("seconds", [1.0, 8.1, 17.0])
def test_bfloat16_checkpoint_in_float32_gives_transformers_tokens(bf16_checkpoint, seconds, fp16_on):
    eng = engine.load(bf16_checkpoint, device="cpu", dtype="float32")
    audio = clip(seconds, int(seconds * 7))
    ours = eng.generate([audio], max_new_tokens=24)[0]
    projections = fp16_projections(eng)
    assert len(projections) == 4 * len(eng.net.language_model.layers)
    assert all(p.packed is not None for p in projections), "every bfloat16-valued weight packs exactly"
    assert ours == reference_generate(bf16_checkpoint, audio, max_new_tokens=24)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_float32_checkpoint_keeps_float32_weights(tiny_model_dir, fp16_on):
    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    eng.generate([clip(1.0, 0)], max_new_tokens=2)
    assert all(p.packed is None and p.fallback.weight.dtype == torch.float32 for p in fp16_projections(eng))


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_failed_packing_warns_and_keeps_the_float_path(bf16_checkpoint, tmp_path, monkeypatch, fp16_on):
    clips = [clip(2.0, 1), clip(6.0, 2)]
    first = engine.load(bf16_checkpoint, dtype="float32").generate(clips, max_new_tokens=12)

    def broken(rows):
        raise RuntimeError("no fbgemm today")

    monkeypatch.setattr(fp16_weights, "pack_rows", broken)
    with pytest.warns(UserWarning, match="fp16 weight packing failed"):
        eng = engine.load(shutil.copytree(bf16_checkpoint, tmp_path / "m"), dtype="float32")
    again = eng.generate(clips, max_new_tokens=12)
    assert again == first
    # packed from the checkpoint's bfloat16, the float methods left are float32 ones
    assert all(p.packed is None and p.weight.dtype == torch.float32 for p in fp16_projections(eng))
    assert eng.net.head.weight.dtype == eng.net.language_model.embed_tokens.weight.dtype == torch.float32


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_a_tied_head_that_does_not_pack_shares_one_float32_matrix(tied_bf16_checkpoint, monkeypatch, fp16_on):
    audio = clip(2.0, 5)
    monkeypatch.setattr(fp16_weights, "scale_rows", lambda weight, out=None: None)     # no weight is exact in float16
    eng = engine.load(tied_bf16_checkpoint, device="cpu", dtype="float32")
    lm, head = eng.net.language_model, eng.net.head
    assert head.packed is None and lm.embed_tokens.weight.dtype == torch.float32
    assert head.weight.data_ptr() == lm.embed_tokens.weight.data_ptr()          # one copy, as without packing
    assert all(p.weight.dtype == torch.float32 for p in fp16_projections(eng))
    assert eng.generate([audio], max_new_tokens=16)[0] == reference_generate(tied_bf16_checkpoint, audio,
                                                                             max_new_tokens=16)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_compact_weights_are_packed_from_the_checkpoints_bfloat16(tied_bf16_checkpoint, monkeypatch, fp16_on):
    """A float32 load does not widen what it packs: 4 bytes a value of it would only be dropped."""
    seen = []
    real = fp16_weights.scale_rows
    monkeypatch.setattr(fp16_weights, "scale_rows",
                        lambda weight, out=None: seen.append(weight.dtype) or real(weight, out=out))
    eng = engine.load(tied_bf16_checkpoint, device="cpu", dtype="float32")
    assert len(seen) == 4 * len(eng.net.language_model.layers) + 1 and set(seen) == {torch.bfloat16}
    assert eng.net.language_model.norm.weight.dtype == torch.float32
    assert all(p.dtype == torch.float32 for n, p in eng.net.named_parameters() if "audio_tower" in n)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_bfloat16_load_where_onednn_takes_the_plain_weight(bf16_checkpoint, monkeypatch):
    """On AVX-512 CPUs without native bfloat16 (Skylake-SP, Cascade Lake) a bfloat16 weight's float
    method is oneDNN's packed copy, which drops the plain weight; the fp16 check still needs it."""
    on_platform(monkeypatch, native_bf16=False, onednn_bf16_packing=True)
    eng = engine.load(bf16_checkpoint, device="cpu", dtype="bfloat16")
    assert fp16_projections(eng) and all(p.packed is not None for p in fp16_projections(eng))
    assert len(eng.generate([clip(2.0, 1)], max_new_tokens=4)[0]) > 0


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_compact_weights_false_keeps_float_weights(bf16_checkpoint, fp16_on):
    eng = engine.load(bf16_checkpoint, device="cpu", dtype="float32", compact_weights=False)
    assert fp16_projections(eng) == [] and eng.net.compact_projections == 0
    assert engine.load(bf16_checkpoint, device="cpu", dtype="float32").net.compact_projections > 0


def test_cli_compacts_only_for_enough_audio(tmp_path):
    """Packing costs seconds at load; the CLI pays them only for inputs that repay them."""
    import numpy as np
    import soundfile as sf

    from cli.main import _worth_compacting
    from engine.network.platform import COMPACT_MIN_AUDIO_SECONDS

    short, long_ = tmp_path / "short.wav", tmp_path / "long.wav"
    sf.write(short, np.zeros(int(16000 * COMPACT_MIN_AUDIO_SECONDS * 0.6), np.float32), 16000)
    sf.write(long_, np.zeros(int(16000 * (COMPACT_MIN_AUDIO_SECONDS + 1)), np.float32), 16000)
    broken = tmp_path / "broken.wav"
    broken.write_bytes(b"not audio")
    assert not _worth_compacting([short, broken])
    assert _worth_compacting([long_]) and _worth_compacting([short] * 2)


@pytest.fixture(scope="module")
def tied_bf16_checkpoint(tmp_path_factory):
    """Stored in bfloat16, the LM head tied to the token embedding (no lm_head.weight in the file)."""
    return build_checkpoint(tmp_path_factory.mktemp("tiny-asr-bf16-tied"), seed=4, tie=True, dtype=torch.bfloat16)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_tied_head_in_float16_keeps_transformers_tokens_and_one_copy(tied_bf16_checkpoint, fp16_on):
    eng = engine.load(tied_bf16_checkpoint, device="cpu", dtype="float32")
    lm, head = eng.net.language_model, eng.net.head
    assert isinstance(lm.embed_tokens, fp16_weights.CompactEmbedding) and head.packed is not None
    assert lm.embed_tokens.values.dtype == torch.float16
    # the float32 matrix is gone: no parameter or buffer holds vocabulary x hidden float32 values
    shape = lm.embed_tokens.values.shape
    assert not [n for n, t in [*eng.net.named_parameters(), *eng.net.named_buffers()]
                if t.shape == shape and t.dtype == torch.float32]
    for seconds in (1.0, 8.1):
        audio = clip(seconds, int(seconds * 7))
        assert eng.generate([audio], max_new_tokens=24)[0] == \
            reference_generate(tied_bf16_checkpoint, audio, max_new_tokens=24)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compact_embedding_looks_up_the_checkpoint_values_exactly(tied_bf16_checkpoint, dtype, fp16_on):
    compact = engine.load(tied_bf16_checkpoint, device="cpu", dtype=dtype).net.language_model.embed_tokens
    plain = engine.load(tied_bf16_checkpoint, device="cpu", dtype=dtype, compact_weights=False).net.language_model
    ids = torch.arange(plain.embed_tokens.weight.shape[0])
    looked_up = compact(ids)
    assert looked_up.dtype == plain.embed_tokens.weight.dtype
    assert torch.equal(looked_up, plain.embed_tokens(ids))


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_one_row_reads_its_copy_and_more_rows_read_fbgemm(fp16_on):
    """One row (a decode step alone) through the one-row copy: the kernel's float32 sums of the same
    values, no scale; several rows through fbgemm. Both within float32 rounding of F.linear."""
    from asr_kernels import bf16_gemv

    w = bf16_valued(256, 512, seed=3)
    proj = packed(w)
    assert proj.row is not None and proj.tensors() == [proj.row.owner]
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(4))
    one = proj(x[:1])
    assert torch.equal(one[0], bf16_gemv.gemv_reference(x[0], w.bfloat16()))
    torch.testing.assert_close(proj(x), F.linear(x, w), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(one, F.linear(x[:1], w), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not X86, reason="fbgemm is x86 only")
def test_no_one_row_copies_where_memory_is_short(bf16_checkpoint, monkeypatch, fp16_on):
    from engine.network import platform as platform_rules

    eng = engine.load(bf16_checkpoint, device="cpu", dtype="float32")
    assert fp16_projections(eng) and all(p.row is not None for p in fp16_projections(eng))
    monkeypatch.setattr(platform_rules, "available_memory_bytes", lambda: platform_rules.ROW_COPY_HEADROOM)
    short = engine.load(bf16_checkpoint, device="cpu", dtype="float32")
    assert fp16_projections(short) and all(p.packed is not None and p.row is None for p in fp16_projections(short))
    audio = clip(3.0, 5)
    assert short.generate([audio], max_new_tokens=12) == eng.generate([audio], max_new_tokens=12)
