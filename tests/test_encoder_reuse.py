"""Encoder reuse for a growing clip is bit-identical with a fresh encode (float32, tiny checkpoint).

A live stream's open utterance grows by an update interval at a time; EncoderReuse keeps the
conv outputs of unchanged chunks and the outputs of unchanged complete windows. Every call must
return exactly what encode_audio returns for the same features.
"""
from __future__ import annotations

import wave

import numpy as np
import pytest
import torch
from conftest import espeak_wav

import engine
from engine.network import platform
from engine.network.encoder import encode_audio
from engine.network.encoder_reuse import EncoderReuse, rows_round_alike
from engine.network.features import log_mel

SR = 16000


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    """float32 where this CPU rounds encoder rows alike whatever call they are in; else
    bfloat16 where it is native (an AVX512-BF16 EPYC rounds a float32 convolution of one chunk
    unlike the same chunk in a batch, so reuse switches itself off there in float32; the
    float32 fallback is tested in test_stream_reuse)."""
    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    if not rows_round_alike(eng.net) and platform.current().native_bf16:
        eng = engine.load(tiny_model_dir, device="cpu", dtype="bfloat16")
    return eng


@pytest.fixture(scope="module")
def long_speech(tmp_path_factory) -> np.ndarray:
    """About 26 s: espeak sentences back to back, twice, so that three 8 s windows complete."""
    text = ("Speech recognition runs locally on this computer, and every sentence is followed by a "
            "short pause. The weather today is sunny and warm, please remember to save your work often. "
            "We will meet again at half past seven tomorrow morning.")
    path = espeak_wav(tmp_path_factory.mktemp("enc") / "long.wav", text)
    with wave.open(str(path)) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    audio = np.concatenate([audio, audio])
    assert len(audio) > 17 * SR
    return audio


def test_growing_clip_matches_fresh_encode(eng, long_speech):
    assert rows_round_alike(eng.net), "this CPU rounds a row by its call's row count: reuse would be off"
    reuse = EncoderReuse(eng.net)
    # first call; a growing partial window; a window completes; updates after it; a second window
    for seconds in (0.5, 4.0, 7.9, 8.6, 9.35, 16.1, 16.85, 17.6):
        end = int(seconds * SR)
        features = log_mel(long_speech[:end])
        fresh = encode_audio(eng.net, [features])[0]
        assert torch.equal(reuse.encode(features), fresh), f"differs at {end / SR:.2f} s"
    assert reuse.chunks_reused > 0
    assert reuse.windows_reused > 0


def test_changed_audio_is_recomputed(eng, long_speech):
    """A louder sound changes the clip's feature clamp: nothing stale is reused."""
    reuse = EncoderReuse(eng.net)
    clip = long_speech[:17 * SR].copy()
    reuse.encode(log_mel(clip))
    clip[-SR:] *= 0.0
    clip[-SR // 2:] = 0.99                      # louder than anything before
    features = log_mel(clip)
    assert torch.equal(reuse.encode(features), encode_audio(eng.net, [features])[0])
    shorter = log_mel(long_speech[:3 * SR])     # a new utterance starting over
    assert torch.equal(reuse.encode(shorter), encode_audio(eng.net, [shorter])[0])


def test_where_rows_round_apart_every_pass_encodes_fresh(eng, long_speech, monkeypatch):
    """A machine whose BLAS rounds a row by its call's row count: nothing is reused, nothing differs."""
    monkeypatch.setattr(eng.net, "_rows_round_alike", False)
    reuse = EncoderReuse(eng.net)
    for seconds in (8.6, 9.35):
        features = log_mel(long_speech[:int(seconds * SR)])
        assert torch.equal(reuse.encode(features), encode_audio(eng.net, [features])[0])
    assert reuse.chunks_reused == reuse.windows_reused == 0
