"""Model configuration read from a checkpoint folder, in either published layout.

The transformers-native layout (``Qwen3-ASR-0.6B-hf``) keeps ``audio_config`` and
``text_config`` at the top of config.json; the original layout (``Qwen3-ASR-0.6B``)
nests them under ``thinker_config``. Both become one ``ModelConfig``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.errors import CheckpointError


@dataclass(frozen=True)
class EncoderConfig:
    num_mel_bins: int
    d_model: int
    layers: int
    heads: int
    ffn_dim: int
    conv_channels: int
    n_window: int          # half the mel frames of one conv chunk (50 -> 100-frame chunks)
    n_window_infer: int    # mel frames one attention window spans (800 -> 8 chunks)
    output_dim: int
    activation: str = "gelu"

    @property
    def chunk_frames(self) -> int:
        return 2 * self.n_window

    @property
    def tokens_per_chunk(self) -> int:
        return conv_output_length(self.chunk_frames)

    @property
    def window_tokens(self) -> int:
        return self.tokens_per_chunk * (self.n_window_infer // self.chunk_frames)


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int
    hidden_size: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool


@dataclass(frozen=True)
class ModelConfig:
    encoder: EncoderConfig
    decoder: DecoderConfig
    layout: str                      # "hf" or "original"
    audio_token_id: int
    eos_token_ids: tuple[int, ...]
    num_labels: int | None = None    # forced aligner: timestamp classes of the score head
    timestamp_token_id: int | None = None
    timestamp_segment_ms: float = 80.0
    score_bias: bool = False         # forced aligner: transformers' token_classification_bias


def conv_output_length(frames: int) -> int:
    """Tokens three (k=3, s=2, p=1) convolutions leave of ``frames`` mel frames."""
    for _ in range(3):
        frames = (frames - 1) // 2 + 1 if frames > 0 else 0
    return frames


def audio_token_count(frames: int, enc: EncoderConfig) -> int:
    """Encoder tokens for a clip of ``frames`` mel frames: full chunks plus the partial tail."""
    full, tail = divmod(frames, enc.chunk_frames)
    return full * enc.tokens_per_chunk + conv_output_length(tail)


def _get(d: dict, *names, default=None):
    for n in names:
        if n in d and d[n] is not None:
            return d[n]
    return default


def _rope_theta(text: dict) -> float:
    for key in ("rope_parameters", "rope_scaling"):
        params = text.get(key) or {}
        if "rope_theta" in params:
            return float(params["rope_theta"])
    return float(text.get("rope_theta", 1_000_000.0))


def _tie_word_embeddings(layout: str, raw: dict, top: dict, text: dict) -> bool:
    """Whether the LM head is the embedding matrix.

    transformers' composite model reads the top-level flag (default True for
    Qwen3ASRConfig) and ignores ``text_config``'s, which a config saved with only
    ``tie_word_embeddings`` at the top can contradict; the original layout keeps it
    with the text model.
    """
    if layout == "hf":
        return bool(_get(raw, "tie_word_embeddings", default=True))
    return bool(_get(text, "tie_word_embeddings", default=_get(top, "tie_word_embeddings",
                                                               default=_get(raw, "tie_word_embeddings", default=False))))


def load_config(model_dir) -> ModelConfig:
    """Read config.json (and generation_config.json for end tokens) from ``model_dir``."""
    model_dir = Path(model_dir)
    path = model_dir / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{model_dir}: no config.json; is this a Qwen3-ASR model folder?")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path}: not valid JSON ({e})") from e
    layout = "original" if "thinker_config" in raw else "hf"
    top = raw["thinker_config"] if layout == "original" else raw
    audio, text = top.get("audio_config"), top.get("text_config")
    if not isinstance(audio, dict) or not isinstance(text, dict):
        raise CheckpointError(f"{path}: audio_config and text_config are required")
    try:
        enc = EncoderConfig(
            num_mel_bins=audio.get("num_mel_bins", 128), d_model=audio["d_model"],
            layers=audio["encoder_layers"], heads=audio["encoder_attention_heads"],
            ffn_dim=audio["encoder_ffn_dim"], conv_channels=audio.get("downsample_hidden_size", 480),
            n_window=audio.get("n_window", 50), n_window_infer=audio.get("n_window_infer", 800),
            output_dim=audio["output_dim"], activation=audio.get("activation_function", "gelu"),
        )
        hidden, heads = text["hidden_size"], text["num_attention_heads"]
        tie = _tie_word_embeddings(layout, raw, top, text)
        dec = DecoderConfig(
            vocab_size=text["vocab_size"], hidden_size=hidden, layers=text["num_hidden_layers"],
            heads=heads, kv_heads=text.get("num_key_value_heads", heads),
            head_dim=text.get("head_dim") or hidden // heads,
            intermediate_size=text["intermediate_size"], rope_theta=_rope_theta(text),
            rms_norm_eps=text.get("rms_norm_eps", 1e-6), tie_word_embeddings=tie,
        )
    except KeyError as e:
        raise CheckpointError(f"{path}: missing config key {e}") from e
    if enc.n_window_infer % enc.chunk_frames:
        raise CheckpointError(f"{path}: n_window_infer must be a multiple of 2 * n_window")
    eos = _end_tokens(model_dir, raw, top)
    num_labels = None
    if "classify_num" in top:
        num_labels = int(top["classify_num"])
    elif "id2label" in raw and any("TokenClassification" in a for a in raw.get("architectures", [])):
        num_labels = len(raw["id2label"])
    return ModelConfig(
        encoder=enc, decoder=dec, layout=layout,
        audio_token_id=int(_get(top, "audio_token_id", "audio_token_index", default=151676)),
        eos_token_ids=eos, num_labels=num_labels,
        timestamp_token_id=_get(raw, "timestamp_token_id", default=_get(top, "timestamp_token_id")),
        timestamp_segment_ms=float(_get(raw, "timestamp_segment_time", default=80.0)),
        score_bias=bool(_get(raw, "token_classification_bias", default=False)),
    )


def _end_tokens(model_dir: Path, raw: dict, top: dict) -> tuple[int, ...]:
    gen_path = model_dir / "generation_config.json"
    candidates = []
    if gen_path.is_file():
        candidates.append(json.loads(gen_path.read_text()).get("eos_token_id"))
    candidates += [raw.get("eos_token_id"), top.get("eos_token_id")]
    for c in candidates:
        if c is not None:
            return tuple(c) if isinstance(c, (list, tuple)) else (int(c),)
    return (151643, 151645)  # <|endoftext|>, <|im_end|> in the Qwen vocabulary
