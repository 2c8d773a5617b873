"""A random 0.6B-dimension checkpoint that peer engines can read: Qwen's real token ids.

    python tests/bench/peer_checkpoint.py [OUT_DIR]      # default: the bench cache

Some peers hard-code Qwen's token ids (<|im_start|> 151644, <|audio_pad|> 151676,
<asr_text> 151704, "system" 8948, "user" 872, "assistant" 77091, "\\n" 198) and the
151936-row vocabulary, so the tiny trained tokenizer of ``tests/checkpoints.py`` will not
do. This builds OUR checkpoint (no peer code): a byte-level BPE vocabulary laid out so that
those strings sit at Qwen's ids (the 256 byte symbols in GPT-2 order, so "\\n" is 198; the
prompt words merged to single tokens at their real ids; every other id a filler word
" w<6-digit id>abcdefghijklmn"; the added special tokens at 151643..151705), written in the original Qwen
layout (``thinker.*``, bfloat16, vocab.json + merges.txt + tokenizer.json, a
WhisperFeatureExtractor preprocessor_config.json, explicit rope_theta, old dict form of
``extra_special_tokens``) so the official package on transformers 4.57 loads it too.

Embedding rows (the LM head is the same matrix, tied, and also stored as
``thinker.lm_head.weight``): the two end tokens' rows are zero and every row that is not a
filler word is scaled down 1000x, so greedy decoding never ends and only ever emits filler
words; the final norm's weights get random signs, so the tied head does not favour the
token just read (without that, greedy output repeats one token). Random weights still fall
into loops of a few tokens, which our engine's repetition guard stops unless a request has
``ignore_eos``; ``bench_real_path.py`` says when that happened. Every generated token then decodes to exactly one " w<6 digits>abcdefghijklmn", and
counting those words in a transcript counts the generated tokens on any side. Each word is
longer than 20 characters, so the official package's (and our) repetition cleanup, which
collapses patterns of up to 20 characters, never shortens a transcript of repeated tokens.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from checkpoints import ASR_CHAT_TEMPLATE, REAL_0_6B, _fan_in_init, to_original_layout

VOCAB_SIZE = 151936
N_REGULAR = 151643                      # ids 0..151642 are BPE tokens, as in Qwen's vocab.json
# Qwen's added tokens from 151643 on; names we do not need are placeholders at their ids.
_KNOWN_ADDED = {
    151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>",
    151646: "<|object_ref_start|>", 151647: "<|object_ref_end|>", 151648: "<|box_start|>",
    151649: "<|box_end|>", 151650: "<|quad_start|>", 151651: "<|quad_end|>", 151652: "<|vision_start|>",
    151653: "<|vision_end|>", 151654: "<|vision_pad|>", 151655: "<|image_pad|>", 151656: "<|video_pad|>",
    151669: "<|audio_start|>", 151670: "<|audio_end|>", 151676: "<|audio_pad|>",
    151704: "<asr_text>", 151705: "<timestamp>",
}
ADDED = [(i, _KNOWN_ADDED.get(i, f"<|extra_{i - N_REGULAR}|>")) for i in range(N_REGULAR, 151706)]
NON_SPECIAL_ADDED = {"<asr_text>"}
END_TOKENS = (151643, 151645)
# Words of the prompt at Qwen's real ids (the peers hard-code these three) or at free ids.
WORDS = {"system": 8948, "user": 872, "assistant": 77091, "language": 11528, "\u0120English": 6364}
FILLER_PREFIX = "\u0120w"               # " w000123abcdefghijklmn" once decoded
FILLER_SUFFIX = "abcdefghijklmn"        # > 20 characters a word: no text cleanup sees a loop in repeats


def bytes_to_unicode() -> list[str]:
    """GPT-2's byte -> printable character table, in vocabulary order (byte 10 -> id 198)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def vocabulary() -> tuple[dict[str, int], list[tuple[str, str]], set[int]]:
    """(vocab for ids 0..151642, merges, ids of filler words)."""
    vocab: dict[str, int] = {}
    for i, ch in enumerate(bytes_to_unicode()):
        vocab[ch] = i
    merges: list[tuple[str, str]] = []
    next_free = 256
    taken = set(WORDS.values())
    for word, word_id in WORDS.items():
        prefix = word[0]
        for ch in word[1:]:
            merged = prefix + ch
            merges.append((prefix, ch))
            if merged == word:
                vocab[merged] = word_id
            else:
                while next_free in taken:
                    next_free += 1
                vocab[merged] = next_free
                taken.add(next_free)
            prefix = merged
    used = set(vocab.values())
    fillers = set()
    for i in range(N_REGULAR):
        if i not in used:
            vocab[f"{FILLER_PREFIX}{i:06d}{FILLER_SUFFIX}"] = i
            fillers.add(i)
    assert len(vocab) == N_REGULAR and sorted(vocab.values()) == list(range(N_REGULAR))
    return vocab, merges, fillers


# Qwen2's pre-tokenizer split pattern.
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def build_tokenizer(vocab, merges):
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
    )
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    for i, content in ADDED:                   # one at a time: each takes the next id
        if content in NON_SPECIAL_ADDED:
            tok.add_tokens([AddedToken(content, special=False, normalized=False)])
        else:
            tok.add_special_tokens([AddedToken(content, special=True, normalized=False)])
        assert tok.token_to_id(content) == i, (content, tok.token_to_id(content), i)
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token=None,
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"},
    )
    fast.chat_template = ASR_CHAT_TEMPLATE
    return fast


WHISPER_PREPROCESSOR = {
    "chunk_length": 30, "dither": 0.0, "feature_extractor_type": "WhisperFeatureExtractor",
    "feature_size": 128, "hop_length": 160, "n_fft": 400, "n_samples": 480000, "nb_max_frames": 3000,
    "padding_side": "right", "padding_value": 0.0, "processor_class": "Qwen3ASRProcessor",
    "return_attention_mask": True, "sampling_rate": 16000,
}


def build_peer_checkpoint(out_dir, *, seed: int = 0, dims: dict = REAL_0_6B, embed_std: float = 1.0) -> Path:
    """Write the checkpoint (original layout, bfloat16) into ``out_dir``."""
    import tempfile

    from safetensors import safe_open
    from transformers import (
        Qwen3ASRConfig,
        Qwen3ASRFeatureExtractor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRProcessor,
    )

    out_dir = Path(out_dir)
    vocab, merges, fillers = vocabulary()
    tokenizer = build_tokenizer(vocab, merges)
    ids = tokenizer.convert_tokens_to_ids
    for name, want in [("<|im_start|>", 151644), ("<|im_end|>", 151645), ("<|endoftext|>", 151643),
                       ("<|audio_start|>", 151669), ("<|audio_end|>", 151670), ("<|audio_pad|>", 151676),
                       ("<asr_text>", 151704)]:
        assert ids(name) == want, (name, ids(name), want)
    text = dict(dims["text"])
    rope_theta = text.pop("rope_theta")
    text_config = dict(model_type="qwen3", vocab_size=VOCAB_SIZE, max_position_embeddings=65536,
                       rms_norm_eps=1e-6, tie_word_embeddings=False,
                       rope_parameters={"rope_type": "default", "rope_theta": rope_theta}, **text)
    audio_config = dict(model_type="qwen3_asr_encoder", num_mel_bins=128, output_dim=text["hidden_size"],
                        **dims["encoder"])
    config = Qwen3ASRConfig(
        audio_config=audio_config, text_config=text_config, audio_token_id=151676, timestamp_token_id=151705,
        pad_token_id=151643, eos_token_id=list(END_TOKENS), tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = Qwen3ASRForConditionalGeneration(config)
    _fan_in_init(model, torch.Generator().manual_seed(seed), embed_std=embed_std)
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        keep = torch.zeros(VOCAB_SIZE, dtype=torch.bool)
        keep[sorted(fillers)] = True
        emb[~keep] *= 1e-3
        emb[list(END_TOKENS)] = 0
        model.lm_head.weight.copy_(emb)
        # Random signs on the final norm: a tied head then has no pull towards the token just
        # read (its logit is no longer |e|^2), so greedy output wanders instead of repeating one
        # token, and our repetition guard (on in the CLI) does not cut the real-path benchmark.
        norm = model.model.language_model.norm.weight
        signs = torch.randint(0, 2, norm.shape, generator=torch.Generator().manual_seed(seed + 1)) * 2 - 1
        norm.mul_(signs.to(norm.dtype))
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = list(END_TOKENS)
    model.generation_config.pad_token_id = 151643
    with tempfile.TemporaryDirectory(dir=out_dir.parent if out_dir.parent.exists() else None) as tmp:
        model.save_pretrained(tmp)
        del model
        processor = Qwen3ASRProcessor(feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tokenizer,
                                      chat_template=ASR_CHAT_TEMPLATE)
        processor.save_pretrained(tmp)
        to_original_layout(tmp, out_dir)
    # Both heads stored, equal (peers that always tie read the embedding, the rest may read either).
    with safe_open(out_dir / "model.safetensors", framework="pt") as f:
        names = set(f.keys())
    assert {"thinker.lm_head.weight", "thinker.model.embed_tokens.weight"} <= names
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    (out_dir / "preprocessor_config.json").write_text(json.dumps(WHISPER_PREPROCESSOR, indent=2))
    cfg_path = out_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["extra_special_tokens"] = {"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                                   "audio_eos_token": "<|audio_end|>"}
    cfg["audio_token"], cfg["audio_bos_token"], cfg["audio_eos_token"] = "<|audio_pad|>", "<|audio_start|>", "<|audio_end|>"
    cfg.setdefault("chat_template", ASR_CHAT_TEMPLATE)
    cfg["model_max_length"] = 131072
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False))
    config_path = out_dir / "config.json"
    full = json.loads(config_path.read_text())
    thinker = full["thinker_config"]
    thinker["text_config"]["rope_theta"] = rope_theta
    # The official model code reads mrope sections (equal positions for text and audio: plain RoPE).
    thinker["text_config"]["rope_scaling"] = {"rope_type": "default", "mrope_section": [24, 20, 20],
                                              "interleaved": True, "mrope_interleaved": True}
    thinker["text_config"]["tie_word_embeddings"] = True
    thinker["tie_word_embeddings"] = True
    thinker.update(audio_start_token_id=151669, audio_end_token_id=151670, user_token_id=872,
                   pad_token_id=151643)
    full["tie_word_embeddings"] = True
    full["support_languages"] = ["English"]
    config_path.write_text(json.dumps(full, indent=2))
    (out_dir / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": list(END_TOKENS), "pad_token_id": 151643, "do_sample": False}, indent=2))
    return out_dir


def peer_checkpoint() -> Path:
    """The peer checkpoint in the bench cache, built once."""
    from common import CACHE

    path = CACHE / "qwen3-asr-0.6b-random-qwen-ids"
    if not (path / "model.safetensors").is_file():
        print(f"building a 0.6B-dimension random checkpoint with Qwen's token ids in {path} (once)...", flush=True)
        build_peer_checkpoint(path)
    return path


if __name__ == "__main__":
    if len(sys.argv) > 1:
        print(build_peer_checkpoint(Path(sys.argv[1])))
    else:
        sys.path.insert(0, str(Path(__file__).parent))
        print(peer_checkpoint())
