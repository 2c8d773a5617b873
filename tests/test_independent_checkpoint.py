"""A checkpoint built without tests/checkpoints.py, the way someone else would build one.

Its own tokenizer (other training text, special tokens in another order, ``<asr_text>``
registered as special), a minimal ``Qwen3ASRConfig`` that leaves most values at
transformers' defaults (a single end token, the tie flag only where given), other
dimensions (one KV head, head_dim unequal to hidden / heads, five encoder heads, a
2 s attention window), another seed and another weight init. transformers is the
reference: greedy tokens must be identical, clip by clip.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import engine

SPECIALS = ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "<|audio_pad|>", "<|audio_start|>",
            "<|audio_end|>", "<asr_text>", "<timestamp>"]
TEMPLATE = (
    "{%- if messages[0].role != 'system' -%}<|im_start|>system{{ '\\n' }}<|im_end|>{{ '\\n' }}{%- endif -%}"
    "{%- for message in messages -%}<|im_start|>{{ message.role }}{{ '\\n' }}"
    "{%- for item in message.content -%}"
    "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif item.type == 'text' -%}{{ item.text }}{%- endif -%}{%- endfor -%}"
    "{%- if not (loop.last and message.role == 'assistant') -%}<|im_end|>{{ '\\n' }}{%- endif -%}"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}{%- endif -%}"
)


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ["Il pleut des cordes sur la ville.", "language French language English",
         "numbers 1 2 3 and more words", "system user assistant hello"],
        trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"})
    fast.chat_template = TEMPLATE
    return fast


def _build(out_dir, tie: bool | None):
    from transformers import (
        Qwen3ASRConfig,
        Qwen3ASRFeatureExtractor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )

    tok = _tokenizer()
    ids = tok.convert_tokens_to_ids
    config = Qwen3ASRConfig(
        audio_config=dict(d_model=40, encoder_layers=2, encoder_attention_heads=5, encoder_ffn_dim=72,
                          downsample_hidden_size=12, output_dim=80, n_window=50, n_window_infer=200),
        text_config=dict(vocab_size=len(tok), hidden_size=80, num_hidden_layers=2, num_attention_heads=5,
                         num_key_value_heads=1, head_dim=32, intermediate_size=120, rope_theta=5e5),
        audio_token_id=ids("<|audio_pad|>"), timestamp_token_id=ids("<timestamp>"),
        pad_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"),
        **({} if tie is None else {"tie_word_embeddings": tie}))
    torch.manual_seed(1234)
    model = Qwen3ASRForConditionalGeneration(config)
    gen = torch.Generator().manual_seed(4321)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) / math.sqrt(math.prod(p.shape[1:])))
            elif "norm" in name or "ln" in name:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
        if config.tie_word_embeddings:
            model.tie_weights()
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out_dir)
    Qwen3ASRProcessor(feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tok,
                      chat_template=TEMPLATE).save_pretrained(out_dir)
    return model.eval()


def _clip(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    sweep = np.sin(2 * np.pi * rng.uniform(80, 2000) * t * (1 + 0.3 * np.sin(t)))
    return (0.1 * sweep + 0.05 * rng.standard_normal(t.size)).astype(np.float32)


@pytest.mark.parametrize("tie", [False, None], ids=["untied", "tied-by-default"])
def test_independently_built_checkpoint_matches_transformers(tmp_path, tie):
    from transformers import AutoProcessor

    reference = _build(tmp_path, tie)
    processor = AutoProcessor.from_pretrained(tmp_path)
    eng = engine.load(tmp_path, device="cpu", dtype="float32")
    outputs = set()
    for seconds, seed in [(0.25, 1), (4.1, 3), (9.7, 4), (23.0, 5)]:
        audio = _clip(seconds, seed)
        for language, context in [(None, ""), ("fr", "Noms: Zoé")]:
            inputs = processor.apply_transcription_request(audio=[audio], language=language, prompt=context or None)
            with torch.no_grad():
                ref = reference.generate(**inputs, do_sample=False, max_new_tokens=16)
            ref = ref[0, inputs["input_ids"].shape[1]:].tolist()
            ours = eng.generate([audio], language=language, context=context, max_new_tokens=16)[0]
            assert ours == ref, (seconds, language)
            outputs.add(tuple(ours))
    assert len(outputs) >= 4, "the random model must react to its input for the comparison to mean anything"
