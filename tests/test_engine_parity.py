"""Our model code against transformers on the same weights, one clip at a time (float32)."""
from __future__ import annotations

import pytest
import torch
from conftest import tone_clip as clip
from reference import load_reference, reference_generate, reference_inputs

import engine
from engine.network.encoder import encode_audio
from engine.network.features import log_mel

EDGE_LENGTHS = [0.3, 1.0, 7.9, 8.1, 17.0, 31.0]


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32")


@pytest.mark.parametrize("seconds", [0.3, 1.0, 8.1, 31.0])
def test_features_equal_feature_extractor(tiny_model_dir, seconds):
    audio = clip(seconds, 1)
    inputs = reference_inputs(tiny_model_dir, audio)
    frames = int(inputs["input_features_mask"][0].sum())
    ours = log_mel(audio)
    assert ours.shape == (128, frames)
    torch.testing.assert_close(ours, inputs["input_features"][0, :, :frames], rtol=0, atol=1e-5)


@pytest.mark.parametrize("seconds", [1.0, 8.1, 17.0])
def test_encoder_equals_reference(eng, tiny_model_dir, seconds):
    audio = clip(seconds, 2)
    model, _ = load_reference(str(tiny_model_dir))
    inputs = reference_inputs(tiny_model_dir, audio)
    with torch.no_grad():
        ref = model.get_audio_features(inputs["input_features"], inputs["input_features_mask"]).pooler_output
    ours = encode_audio(eng.net, [log_mel(audio)])[0]
    assert ours.shape == ref.shape
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)


def test_encoder_batch_equals_one_by_one(eng):
    clips = [log_mel(clip(s, i)) for i, s in enumerate([0.4, 8.5, 3.0, 17.2])]
    together = encode_audio(eng.net, clips)
    for feats, batched in zip(clips, together):
        torch.testing.assert_close(batched, encode_audio(eng.net, [feats])[0], rtol=1e-5, atol=1e-5)


def test_prefill_logits_equal_reference(eng, tiny_model_dir):
    audio = clip(8.1, 3)
    model, _ = load_reference(str(tiny_model_dir))
    inputs = reference_inputs(tiny_model_dir, audio, language="en", context="names: Qwen")
    with torch.no_grad():
        ref = model(**inputs).logits[0]                                    # [tokens, vocab]
    req = eng.make_request(audio, language="en", context="names: Qwen")
    assert req.prompt_ids == inputs["input_ids"][0].tolist()
    eng.add_request(req)
    rows = eng.scheduler.schedule()
    eng.runner.encode_pending(rows)
    from engine.serving.runner import build_step_inputs

    step = build_step_inputs(rows, eng.cache.block_size, eng.torch_device)
    ours = eng.net.head(eng.runner.hidden_states(step))
    eng.abort_request(req)
    eng.step()                          # the core frees its blocks and forgets it
    assert eng.core.open_requests == 0
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seconds", EDGE_LENGTHS)
@pytest.mark.parametrize("language,context", [(None, ""), ("English", ""), ("de", "Namen: Müller, Qwen")])
def test_greedy_tokens_identical(eng, tiny_model_dir, seconds, language, context):
    audio = clip(seconds, int(seconds * 10))
    ours = eng.generate([audio], language=language, context=context, max_new_tokens=24)[0]
    ref = reference_generate(tiny_model_dir, audio, language=language, context=context, max_new_tokens=24)
    assert ours == ref


def test_different_audio_gives_different_tokens(eng):
    clips = [clip(s, seed) for s, seed in [(1.0, 0), (2.0, 1), (3.5, 2), (2.0, 5)]]
    outs = {tuple(tokens) for tokens in eng.generate(clips, max_new_tokens=12)}
    assert len(outs) >= 3, "a random model that ignores its input would make parity tests meaningless"


def test_batched_generate_equals_one_by_one(eng):
    clips = [clip(s, 40 + i) for i, s in enumerate([0.5, 9.0, 2.5, 17.0, 4.0])]
    together = eng.generate(clips, max_new_tokens=16)
    alone = [eng.generate([c], max_new_tokens=16)[0] for c in clips]
    assert together == alone


def test_default_cap_grows_with_duration(eng):
    short, long = eng.make_request(clip(1.0, 0)), eng.make_request(clip(20.0, 0))
    assert long.max_new_tokens > short.max_new_tokens >= 48
