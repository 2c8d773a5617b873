"""The runner's encoder cache gives exactly what a fresh encode gives (tiny checkpoint).

A live stream's open utterance grows by an update interval at a time; the cache keeps the conv
outputs of full chunks and the outputs of complete windows by their audio content. Every call must
return exactly what encode_audio returns for the same features, for one clip or a batch.
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
from engine.network.encoder_reuse import rows_round_alike
from engine.network.features import log_mel
from engine.serving.encoder_cache import EncoderCache

SR = 16000


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    """float32 where this CPU rounds encoder rows alike whatever call they are in (encoder GEMMs
    take at least MIN_GEMM_ROWS rows and convolutions MIN_CONV_CHUNKS chunks for that); else
    bfloat16 where it is native. Where a CPU still rounds a row by its call, reuse switches itself
    off; that fallback is tested below and in test_stream_reuse."""
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
    reuse = EncoderCache(eng.net)
    # first call; a growing partial window; a window completes; updates after it; a second window
    for seconds in (0.5, 4.0, 7.9, 8.6, 9.35, 16.1, 16.85, 17.6):
        end = int(seconds * SR)
        features = log_mel(long_speech[:end])
        fresh = encode_audio(eng.net, [features])[0]
        assert torch.equal(reuse.encode([features], "cpu")[0], fresh), f"differs at {end / SR:.2f} s"
        assert reuse.has_first_window(features) == (seconds > 8.0)
    assert reuse.chunks_reused > 0
    assert reuse.windows_reused > 0


def test_changed_audio_is_recomputed(eng, long_speech):
    """A louder sound changes the clip's feature clamp: nothing stale is reused."""
    reuse = EncoderCache(eng.net)
    clip = long_speech[:17 * SR].copy()
    reuse.encode([log_mel(clip)], "cpu")
    clip[-SR:] *= 0.0
    clip[-SR // 2:] = 0.99                      # louder than anything before
    features = log_mel(clip)
    assert not reuse.has_first_window(features)
    assert torch.equal(reuse.encode([features], "cpu")[0], encode_audio(eng.net, [features])[0])
    shorter = log_mel(long_speech[:3 * SR])     # a new utterance starting over
    assert torch.equal(reuse.encode([shorter], "cpu")[0], encode_audio(eng.net, [shorter])[0])


def test_a_batch_of_clips_matches_a_fresh_batch_encode(eng, long_speech):
    """Files: several clips in one call, one of them seen before (all hits), one new, one short."""
    assert rows_round_alike(eng.net)
    reuse = EncoderCache(eng.net)
    seen = log_mel(long_speech[:int(17.3 * SR)])
    reuse.encode([seen], "cpu")
    clips = [log_mel(long_speech[int(2.1 * SR):int(19.9 * SR)]), seen, log_mel(long_speech[:int(0.7 * SR)])]
    before = reuse.windows_reused
    for got, fresh in zip(reuse.encode(clips, "cpu"), encode_audio(eng.net, clips)):
        assert torch.equal(got, fresh)
    assert reuse.windows_reused == before + 2   # the clip seen before: both of its complete windows


def test_the_cache_stays_within_its_budget(eng, long_speech):
    reuse = EncoderCache(eng.net, max_bytes=1 << 20)
    for start in range(0, 3):
        features = log_mel(long_speech[start * SR:(start + 9) * SR])
        assert torch.equal(reuse.encode([features], "cpu")[0], encode_audio(eng.net, [features])[0])
    assert 0 < reuse._bytes <= 1 << 20


def test_where_rows_round_apart_every_pass_encodes_fresh(eng, long_speech, monkeypatch):
    """A machine whose BLAS rounds a row by its call's row count: nothing is reused, nothing differs."""
    monkeypatch.setattr(eng.net, "_rows_round_alike", False)
    reuse = EncoderCache(eng.net)
    for seconds in (8.6, 9.35):
        features = log_mel(long_speech[:int(seconds * SR)])
        assert torch.equal(reuse.encode([features], "cpu")[0], encode_audio(eng.net, [features])[0])
        assert not reuse.has_first_window(features)
    assert reuse.chunks_reused == reuse.windows_reused == 0


def test_one_chunk_is_convolved_as_in_a_batch(tiny_model_dir, monkeypatch):
    """A live pass often convolves a single new chunk; oneDNN takes another path for a batch of
    one, which rounds float32 differently on AMD EPYC and Intel Xeon. Calls get MIN_CONV_CHUNKS
    chunks, so that chunk comes out as it does inside a clip."""
    from engine.network import encoder, ops
    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    tower, cfg = eng.net.audio_tower, eng.net.config.encoder
    chunks = torch.randn(3, 1, cfg.num_mel_bins, cfg.chunk_frames, generator=torch.Generator().manual_seed(1))
    batches = []
    conv2d = ops.conv2d
    monkeypatch.setattr(ops, "conv2d", lambda conv, x: batches.append(x.shape[0]) or conv2d(conv, x))
    alone = encoder._conv_stack(tower, chunks[1:2])
    assert batches == [encoder.MIN_CONV_CHUNKS] * 3 and alone.shape[0] == 1
    assert torch.equal(alone, encoder._conv_stack(tower, chunks[1:3])[:1])
