"""Word timestamps never lose a transcript, the aligner's cache fits its longest request, and a
checkpoint's chat template is rendered once per prompt shape under a time limit."""
from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

import engine
from engine.errors import CheckpointError
from engine.network.config import DecoderConfig, EncoderConfig, audio_token_count
from engine.network.features import num_frames
from engine.pipelines.aligner import Aligner
from engine.serving.kv_cache import KVCache
from engine.text.chat_template import asr_messages, render_around_audio
from engine.text.prompt import ASR_TEXT, prompt_text_parts

# A loop of 10^10 turns in front of the checkpoint's own (working) template.
HANGING_LOOP = "{% for i in range(99999) %}{% for j in range(99999) %}{{ '' }}{% endfor %}{% endfor %}"
SR = 16000


def with_hanging_template(source, tmp_path):
    folder = tmp_path / f"{source.name}-template"
    shutil.copytree(source, folder)
    template = folder / "chat_template.jinja"
    template.write_text(HANGING_LOOP + template.read_text())
    return folder


@pytest.mark.parametrize("which", ["asr", "aligner"])
def test_a_chat_template_that_never_finishes_fails_the_load(which, tiny_model_dir, tiny_aligner_dir, tmp_path):
    folder = with_hanging_template(tiny_model_dir if which == "asr" else tiny_aligner_dir, tmp_path)
    load = (lambda: engine.load(folder, device="cpu", dtype="float32", use_vad=False)) if which == "asr" \
        else (lambda: engine.load_aligner(folder, device="cpu", dtype="float32"))
    started = time.monotonic()
    with pytest.raises(CheckpointError, match="chat_template.jinja"):
        load()
    print(f"{which}: refused after {time.monotonic() - started:.1f} s")


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32", use_vad=False)


@pytest.mark.parametrize("language", [None, "en", "German"])
@pytest.mark.parametrize("context", ["", "Names: Qwen, Alibaba", "a {{ b }} {% c %} & <d> \\n"])
def test_prompt_from_the_rendered_shape_equals_rendering_each_time(eng, language, context):
    from engine.text.prompt import language_name

    direct = render_around_audio(eng.tokenizer, asr_messages(context, language_name(language), ASR_TEXT),
                                 continue_final_message=True)
    assert prompt_text_parts(context, language, eng.tokenizer) == direct


def test_template_is_rendered_once_per_shape(eng, monkeypatch):
    calls = []
    real = type(eng.tokenizer).apply_chat_template
    monkeypatch.setattr(type(eng.tokenizer), "apply_chat_template",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    tone = (0.1 * np.sin(np.arange(SR) / 7)).astype(np.float32)
    for i in range(8):
        eng.submit(tone, context=f"request {i}", max_new_tokens=1)
        eng.submit(tone, max_new_tokens=1)
    while eng.has_work():
        eng.step()
    assert calls == []     # context and no-context shapes were rendered when the engine loaded


@pytest.fixture(scope="module")
def eng_words(tiny_model_dir, tiny_aligner_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32", aligner=tiny_aligner_dir, use_vad=False)


def test_a_failing_alignment_keeps_the_transcript(eng_words, speech_wav, monkeypatch):
    def broken(rows):
        raise RuntimeError("the aligner ran out of memory")

    monkeypatch.setattr(eng_words.aligner.runner, "run", broken)
    t = eng_words.transcribe(str(speech_wav), language="en", word_timestamps=True)
    assert t.segments and t.text.strip()
    assert all(seg.end > seg.start for seg in t.segments)
    assert all(not seg.words for seg in t.segments)
    assert "ran out of memory" in t.words_note and "segment times" in t.words_note


def test_alignment_times_that_do_not_match_the_words_keep_the_transcript(eng_words, speech_wav, monkeypatch):
    monkeypatch.setattr(eng_words.aligner, "times", lambda request: [])
    t = eng_words.transcribe(str(speech_wav), language="en", word_timestamps=True)
    assert t.text.strip() and all(not seg.words for seg in t.segments)
    assert "timestamps for" in t.words_note


REAL_ALIGNER_KV = DecoderConfig(vocab_size=152064, hidden_size=1024, layers=28, heads=16, kv_heads=8,
                                head_dim=128, intermediate_size=3072, rope_theta=1e6, rms_norm_eps=1e-6,
                                tie_word_embeddings=False)


def test_real_aligner_geometry_needs_more_than_one_cpu_block_for_180_s():
    """Why the cache must grow: with Qwen3-ForcedAligner-0.6B's KV geometry on CPU (float32,
    2048-token blocks) the 512 MiB budget is one block, but 180 s of audio alone is 2340 tokens."""
    blocks = KVCache.blocks_for_budget(REAL_ALIGNER_KV, 512 << 20, 2048, __import__("torch").float32)
    encoder = EncoderConfig(num_mel_bins=128, d_model=896, layers=18, heads=14, ffn_dim=3584, conv_channels=480,
                            n_window=50, n_window_infer=800, output_dim=1024)
    audio_tokens = audio_token_count(num_frames(180 * SR), encoder)
    assert blocks * 2048 == 2048 and audio_tokens >= 2340


def test_aligner_cache_grows_for_a_180_s_chunk_of_dense_speech(tiny_aligner_dir):
    """The same shortage at tiny scale: a cache of one 2048-token block, and a 180 s chunk
    with 4 words a second (its audio tokens plus each word and two timestamps)."""
    probe = Aligner(tiny_aligner_dir, device="cpu", dtype="float32")
    per_token = 2 * probe.config.decoder.layers * probe.config.decoder.kv_heads * probe.config.decoder.head_dim * 4
    aligner = Aligner(tiny_aligner_dir, device="cpu", dtype="float32", kv_cache_bytes=2048 * per_token)
    assert aligner.cache_tokens == 2048
    rng = np.random.default_rng(0)
    audio = (0.1 * rng.standard_normal(180 * SR)).astype(np.float32)
    words = ["hello", "world", "speech", "to", "text"] * 144
    short = aligner.submit(audio[:SR * 5], words[:10])            # an ordinary request in flight
    result = aligner.align(audio, " ".join(words), language="English")
    assert short.finished and not short.error
    assert len(result) == len(words)
    assert all(0.0 <= w.start <= w.end for w in result)   # random weights: times, not good ones
    assert aligner.cache_tokens > 2048
    assert len(aligner.align(audio[:SR * 3], "one two three", language="English")) == 3   # and serves on

