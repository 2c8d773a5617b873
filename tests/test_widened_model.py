"""The trained tiny model widened to larger dimensions (tests/widened_model.py) hears the same words.

The benchmarks run live captions on it at the real 0.6B dimensions, to measure the cost of a
model whose text stays put from one update to the next; that is only worth something if the
widened checkpoint computes what the tiny model computes.
"""
from __future__ import annotations

import pytest
import torch

import engine
from engine.network.encoder import encode_audio
from engine.network.features import log_mel
from real_speech import ASR_DIR, heldout_sentences, speak
from widened_model import use_widened_positions, widen

# Wider everywhere: dims that stay zero (encoder 448 > 2 x 192), more q heads per KV group than the
# tiny model's 2 (9 over 3 KV heads: tiny heads 2, 3 move to slots 3, 4), added layers and vocabulary rows.
DIMS = dict(
    encoder=dict(d_model=448, encoder_layers=4, encoder_attention_heads=7, encoder_ffn_dim=1024,
                 downsample_hidden_size=48),
    text=dict(hidden_size=256, num_hidden_layers=3, num_attention_heads=9, num_key_value_heads=3,
              head_dim=64, intermediate_size=640),
    vocab_size=1000,
)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tiny = engine.load(str(ASR_DIR), device="cpu", dtype="float32")
    wide = engine.load(str(widen(ASR_DIR, tmp_path_factory.mktemp("widened"), DIMS)), device="cpu", dtype="float32")
    use_widened_positions(wide)
    return tiny, wide


def test_widened_checkpoint_has_the_wider_dimensions(pair):
    _, wide = pair
    enc, dec = wide.config.encoder, wide.config.decoder
    assert (enc.d_model, enc.layers, dec.hidden_size, dec.layers, dec.vocab_size) == (448, 4, 256, 3, 1000)


def test_widened_encoder_gives_the_tiny_audio_embeddings(pair):
    tiny, wide = pair
    audio = torch.from_numpy(speak(heldout_sentences()[3]))
    feats = log_mel(audio)
    small = encode_audio(tiny.net, [feats])[0]                 # [tokens, 192]
    big = encode_audio(wide.net, [feats])[0]                   # [tokens, 256]: the tiny's x sqrt(256/192)
    scale = (256 / 192) ** 0.5
    assert big.shape == (small.shape[0], 256)
    torch.testing.assert_close(big[:, :192] / scale, small, atol=2e-5, rtol=1e-4)
    assert big[:, 192:].abs().max() == 0


@pytest.mark.parametrize("index", [0, 6, 8])
def test_widened_model_says_the_tiny_models_tokens(pair, index):
    tiny, wide = pair
    audio = speak(heldout_sentences()[index])
    expected = tiny.generate([audio])[0]
    assert wide.generate([audio])[0] == expected
    text = tiny.tokenizer.decode(expected)
    assert "<asr_text>" in text and len(text.split("<asr_text>")[1].split()) >= 2   # it says words


def test_widening_that_would_change_the_function_is_refused(tmp_path):
    narrow = {**DIMS, "encoder": {**DIMS["encoder"], "d_model": 320, "encoder_attention_heads": 5}}
    with pytest.raises(ValueError, match="twice"):
        widen(ASR_DIR, tmp_path, narrow)
    fewer = {**DIMS, "text": {**DIMS["text"], "num_hidden_layers": 1}}
    with pytest.raises(ValueError, match="num_hidden_layers"):
        widen(ASR_DIR, tmp_path, fewer)
    other_window = {**DIMS, "encoder": {**DIMS["encoder"], "n_window": 25}}
    with pytest.raises(ValueError, match="n_window"):
        widen(ASR_DIR, tmp_path, other_window)
