"""Build small random-weight Qwen3-ASR checkpoints in the real Hugging Face layouts.

Used by the tests and the benchmarks. transformers' own classes write the
checkpoint, so whatever our engine reads here is what a real ``-hf`` folder
holds; ``to_original_layout`` rewrites one into the original Qwen layout
(``thinker.*`` names, ``thinker_config``).
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>",
                  "<|audio_end|>", "<|audio_pad|>", "<timestamp>"]
PLAIN_ADDED_TOKENS = ["<asr_text>"]

# Like Qwen's own template: an empty system turn when the conversation has none.
ASR_CHAT_TEMPLATE = (
    "{%- if not messages or messages[0].role != 'system' -%}"
    "<|im_start|>system{{ '\\n' }}<|im_end|>{{ '\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "<|im_start|>{{ message.role }}{{ '\\n' }}"
    "{%- if message.content is string -%}{{ message.content }}{%- else -%}"
    "{%- for item in message.content -%}"
    "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif item.type == 'text' -%}{{ item.text }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if not (loop.last and message.role == 'assistant') -%}<|im_end|>{{ '\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}{%- endif -%}"
)
# The forced aligner takes no chat wrapper: audio, then each word and two timestamps.
ALIGNER_CHAT_TEMPLATE = (
    "{%- for message in messages -%}{%- for item in message.content -%}"
    "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif item.type == 'text' -%}{{ item.text }}<timestamp><timestamp>{%- endif -%}"
    "{%- endfor -%}{%- endfor -%}"
)

TRAINING_TEXT = [
    "The quick brown fox jumps over the lazy dog.",
    "language English<asr_text>Hello world, this is a test of speech recognition.",
    "language Chinese language German language French language None",
    "Speech to text on your own computer, fast and private.",
    "One two three four five six seven eight nine ten.",
    "system user assistant",
]

TINY = dict(
    encoder=dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
                 downsample_hidden_size=32, n_window=50, n_window_infer=800),
    text=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, intermediate_size=128, rope_theta=1_000_000.0),
)
# The real Qwen3-ASR-0.6B dimensions (random weights, for benchmarks).
REAL_0_6B = dict(
    encoder=dict(d_model=896, encoder_layers=18, encoder_attention_heads=14, encoder_ffn_dim=3584,
                 downsample_hidden_size=480, n_window=50, n_window_infer=800),
    text=dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
              head_dim=128, intermediate_size=3072, rope_theta=1_000_000.0),
    vocab_size=151936,
)


def bpe_tokenizer(texts, vocab_size: int, *, aligner: bool = False):
    """A byte-level BPE trained on ``texts``, as a Qwen2 fast tokenizer with our special tokens and chat
    template (the random test checkpoints and tools/train_test_model.py both build theirs here)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None,
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"},
    )
    fast.add_tokens(PLAIN_ADDED_TOKENS)
    fast.chat_template = ALIGNER_CHAT_TEMPLATE if aligner else ASR_CHAT_TEMPLATE
    return fast


def build_tokenizer(out_dir: Path, *, aligner: bool = False):
    """Train a byte-level BPE on a few sentences and save it as a Qwen2 fast tokenizer."""
    return bpe_tokenizer(TRAINING_TEXT, 400, aligner=aligner)


def _fan_in_init(model: torch.nn.Module, generator: torch.Generator, embed_std: float) -> None:
    """std 1/sqrt(fan_in) for every weight: random models then react to what they hear."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "ln_" in name or "layer_norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator)) if p.dim() == 1 and name.endswith("weight") \
                    else p.copy_(0.05 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(embed_std * torch.randn(p.shape, generator=generator))
            elif p.dim() >= 2:
                fan_in = math.prod(p.shape[1:])
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(fan_in))
            else:
                p.copy_(0.05 * torch.randn(p.shape, generator=generator))


def build_checkpoint(out_dir, *, seed: int = 0, dims: dict = TINY, tie: bool = False,
                     aligner: bool = False, num_labels: int = 5000, dtype=torch.float32,
                     score_bias: bool = False) -> Path:
    """Write a random Qwen3-ASR (or ForcedAligner) checkpoint in the ``-hf`` layout."""
    from transformers import (
        Qwen3ASRConfig,
        Qwen3ASRFeatureExtractor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRForTokenClassification,
        Qwen3ASRProcessor,
    )

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(out_dir, aligner=aligner)
    ids = tokenizer.convert_tokens_to_ids
    vocab = dims.get("vocab_size", len(tokenizer))
    text = dict(dims["text"])
    rope_theta = text.pop("rope_theta")
    text_config = dict(model_type="qwen3", vocab_size=vocab, max_position_embeddings=65536,
                       rms_norm_eps=1e-6, tie_word_embeddings=tie,
                       rope_parameters={"rope_type": "default", "rope_theta": rope_theta}, **text)
    audio_config = dict(model_type="qwen3_asr_encoder", num_mel_bins=128,
                        output_dim=text["hidden_size"], **dims["encoder"])
    config = Qwen3ASRConfig(
        audio_config=audio_config, text_config=text_config, audio_token_id=ids("<|audio_pad|>"),
        timestamp_token_id=ids("<timestamp>"), pad_token_id=ids("<|endoftext|>"),
        eos_token_id=[ids("<|endoftext|>"), ids("<|im_end|>")], tie_word_embeddings=tie,
        token_classification_bias=score_bias,
    )
    if aligner:
        config.num_labels = num_labels
    torch.manual_seed(seed)
    cls = Qwen3ASRForTokenClassification if aligner else Qwen3ASRForConditionalGeneration
    model = cls(config).to(dtype)
    generator = torch.Generator().manual_seed(seed)
    _fan_in_init(model, generator, embed_std=0.01 if aligner else 1.0)
    if tie and not aligner:
        model.tie_weights()
    if not aligner:
        model.generation_config.eos_token_id = config.eos_token_id
        model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(out_dir)
    processor = Qwen3ASRProcessor(feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tokenizer,
                                  chat_template=tokenizer.chat_template)
    processor.save_pretrained(out_dir)
    return out_dir


_ORIGINAL_RENAMES = [
    ("model.multi_modal_projector.linear_1.", "thinker.audio_tower.proj1."),
    ("model.multi_modal_projector.linear_2.", "thinker.audio_tower.proj2."),
    ("model.audio_tower.", "thinker.audio_tower."),
    ("model.language_model.", "thinker.model."),
    ("lm_head.", "thinker.lm_head."),
    ("score.", "thinker.lm_head."),
]


def to_original_layout(hf_dir, out_dir) -> Path:
    """Rewrite an ``-hf`` checkpoint with the original Qwen tensor names and nested config."""
    from safetensors.torch import load_file, save_file

    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for f in hf_dir.iterdir():
        if f.suffix != ".safetensors" and f.name != "config.json" and f.is_file():
            shutil.copy(f, out_dir / f.name)
    tensors = {}
    for f in sorted(hf_dir.glob("*.safetensors")):
        for name, t in load_file(f).items():
            for old, new in _ORIGINAL_RENAMES:
                if name.startswith(old):
                    name = new + name[len(old):]
                    break
            tensors[name] = t.contiguous()
    save_file(tensors, out_dir / "model.safetensors", metadata={"format": "pt"})
    hf_config = json.loads((hf_dir / "config.json").read_text())
    thinker = {k: hf_config[k] for k in ("audio_config", "text_config", "audio_token_id") if k in hf_config}
    thinker["audio_config"] = dict(thinker["audio_config"], model_type="qwen3_asr_audio_encoder",
                                   max_source_positions=1500, conv_chunksize=500)
    if "num_labels" in hf_config or "id2label" in hf_config:
        thinker["classify_num"] = len(hf_config.get("id2label", {})) or hf_config["num_labels"]
    config = {"architectures": ["Qwen3ASRForConditionalGeneration"], "model_type": "qwen3_asr",
              "thinker_config": thinker}
    if "timestamp_token_id" in hf_config:
        config["timestamp_token_id"] = hf_config["timestamp_token_id"]
        config["timestamp_segment_time"] = 80
    (out_dir / "config.json").write_text(json.dumps(config, indent=2))
    return out_dir
