"""Model configuration read from a checkpoint folder, in either published layout.

The transformers-native layout (``Qwen3-ASR-0.6B-hf``) keeps ``audio_config`` and
``text_config`` at the top of config.json; the original layout (``Qwen3-ASR-0.6B``)
nests them under ``thinker_config``. Both become one ``ModelConfig``.
"""
from __future__ import annotations

import json
import math
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


# config.json, generation_config.json and the shard index are kilobytes; a huge one is not a config.
_MAX_JSON_BYTES = 64 << 20


def _get(d: dict, *names, default=None):
    for n in names:
        if n in d and d[n] is not None:
            return d[n]
    return default


def _rope_theta(text: dict):
    """The raw rope_theta value (checked by the caller)."""
    for key in ("rope_parameters", "rope_scaling"):
        params = text.get(key) or {}
        if isinstance(params, dict) and "rope_theta" in params:
            return params["rope_theta"]
    return text.get("rope_theta", 1_000_000.0)


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


def read_json_object(path: Path) -> dict:
    """A small JSON file that must hold an object; any problem is one CheckpointError line
    naming the folder and the file."""
    where = f"{path.parent}: {path.name}"
    try:
        size = path.stat().st_size
        if size > _MAX_JSON_BYTES:
            raise CheckpointError(f"{where} is {size / 1e6:.0f} MB, too large for a model's JSON file")
        data = path.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{where} cannot be read ({e.strerror or e})") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{where} is not UTF-8 text (bad byte at offset {e.start})") from e
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"{where} is not valid JSON ({e})") from e
    if not isinstance(raw, dict):
        raise CheckpointError(f"{where} must hold a JSON object, found a {_json_type(raw)}")
    return raw


def _json_type(value) -> str:
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


class _Section:
    """One config section (``text_config``...) whose values are checked as they are read,
    so a bad value is named by its full key ("thinker_config.text_config.hidden_size")."""

    def __init__(self, path: Path, prefix: str, values: dict):
        self.path, self.prefix, self.values = path, prefix, values

    def _bad(self, key: str, value, want: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: {self.prefix}{key} must be {want}, found {json.dumps(value)[:60]}")

    def _present(self, key: str, default):
        value = self.values.get(key)
        if value is None:
            if default is _REQUIRED:
                raise CheckpointError(f"{self.path}: missing config key '{self.prefix}{key}'")
            return default
        return value

    def int(self, key: str, default, *, minimum: int = 1, maximum: int | None = None) -> int:
        value = self._present(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum or (
                maximum is not None and value > maximum):
            raise self._bad(key, value, f"a whole number from {minimum} to {maximum}" if maximum is not None
                            else f"a whole number of at least {minimum}")
        return value

    def float(self, key: str, value) -> float:
        number = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and abs(value) < 1e300 else math.nan
        if not math.isfinite(number) or number <= 0:
            raise self._bad(key, value, "a positive number")
        return number

    def str(self, key: str, default: str) -> str:
        value = self._present(key, default)
        if not isinstance(value, str):
            raise self._bad(key, value, "a string")
        return value


_REQUIRED = object()


def load_config(model_dir) -> ModelConfig:
    """Read config.json (and generation_config.json for end tokens) from ``model_dir``.

    Every value the network is built from is checked here (type, sign), so a bad
    config fails with one line naming its key instead of deep inside torch.
    """
    model_dir = Path(model_dir)
    path = model_dir / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{model_dir}: no config.json; is this a Qwen3-ASR model folder?")
    raw = read_json_object(path)
    layout = "original" if "thinker_config" in raw else "hf"
    top = raw["thinker_config"] if layout == "original" else raw
    if not isinstance(top, dict):
        raise CheckpointError(f"{path}: thinker_config must be a JSON object, found a {_json_type(top)}")
    audio, text = top.get("audio_config"), top.get("text_config")
    if not isinstance(audio, dict) or not isinstance(text, dict):
        raise CheckpointError(f"{path}: audio_config and text_config are required")
    outer = "thinker_config." if layout == "original" else ""
    a = _Section(path, outer + "audio_config.", audio)
    t = _Section(path, outer + "text_config.", text)
    enc = EncoderConfig(
        num_mel_bins=a.int("num_mel_bins", 128), d_model=a.int("d_model", _REQUIRED),
        layers=a.int("encoder_layers", _REQUIRED), heads=a.int("encoder_attention_heads", _REQUIRED),
        ffn_dim=a.int("encoder_ffn_dim", _REQUIRED), conv_channels=a.int("downsample_hidden_size", 480),
        # Window sizes set no tensor shape, so the weights cannot check them: bound them here
        # (the published models use 50 and 800; 1500 is a 30 s conv chunk).
        n_window=a.int("n_window", 50, maximum=1500), n_window_infer=a.int("n_window_infer", 800, maximum=60000),
        output_dim=a.int("output_dim", _REQUIRED), activation=a.str("activation_function", "gelu"),
    )
    hidden, heads = t.int("hidden_size", _REQUIRED), t.int("num_attention_heads", _REQUIRED)
    tie = _tie_word_embeddings(layout, raw, top, text)
    dec = DecoderConfig(
        vocab_size=t.int("vocab_size", _REQUIRED), hidden_size=hidden, layers=t.int("num_hidden_layers", _REQUIRED),
        heads=heads, kv_heads=t.int("num_key_value_heads", heads),
        head_dim=t.int("head_dim", None) if text.get("head_dim") else hidden // heads,
        intermediate_size=t.int("intermediate_size", _REQUIRED), rope_theta=t.float("rope_theta", _rope_theta(text)),
        rms_norm_eps=t.float("rms_norm_eps", text.get("rms_norm_eps", 1e-6)), tie_word_embeddings=tie,
    )
    if enc.n_window_infer % enc.chunk_frames:
        raise CheckpointError(f"{path}: {a.prefix}n_window_infer ({enc.n_window_infer}) must be a multiple of "
                              f"2 * n_window ({enc.chunk_frames})")
    if enc.d_model % enc.heads:
        raise CheckpointError(f"{path}: {a.prefix}d_model ({enc.d_model}) must be a multiple of "
                              f"encoder_attention_heads ({enc.heads})")
    if dec.head_dim < 1 or dec.heads % dec.kv_heads:
        raise CheckpointError(f"{path}: {t.prefix}num_attention_heads ({dec.heads}) must be a multiple of "
                              f"num_key_value_heads ({dec.kv_heads}), and hidden_size at least num_attention_heads")
    eos = _end_tokens(model_dir, raw, top)
    num_labels = None
    try:
        if "classify_num" in top:
            num_labels = _Section(path, outer, top).int("classify_num", _REQUIRED)
        elif "id2label" in raw and any("TokenClassification" in str(x) for x in raw.get("architectures") or []):
            num_labels = len(raw["id2label"])
        return ModelConfig(
            encoder=enc, decoder=dec, layout=layout,
            audio_token_id=_token_id(path, "audio_token_id",
                                     _get(top, "audio_token_id", "audio_token_index", default=151676)),
            eos_token_ids=eos, num_labels=num_labels,
            timestamp_token_id=_token_id(path, "timestamp_token_id", _get(
                raw, "timestamp_token_id", default=_get(top, "timestamp_token_id")), optional=True),
            timestamp_segment_ms=float(_get(raw, "timestamp_segment_time", default=80.0)),
            score_bias=bool(_get(raw, "token_classification_bias", default=False)),
        )
    except (TypeError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{path}: a token id or aligner setting has the wrong type ({e})") from e


def _token_id(path: Path, key: str, value, optional: bool = False):
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CheckpointError(f"{path}: {key} must be a token id (a whole number), found {json.dumps(value)[:60]}")
    return value


def _end_tokens(model_dir: Path, raw: dict, top: dict) -> tuple[int, ...]:
    gen_path = model_dir / "generation_config.json"
    candidates = []
    if gen_path.is_file():
        candidates.append((gen_path, read_json_object(gen_path).get("eos_token_id")))
    candidates += [(model_dir / "config.json", raw.get("eos_token_id")), (model_dir / "config.json", top.get("eos_token_id"))]
    for path, c in candidates:
        if c is None:
            continue
        ids = tuple(c) if isinstance(c, (list, tuple)) else (c,)
        if not ids or any(isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in ids):
            raise CheckpointError(f"{path}: eos_token_id must be a token id or a list of them, "
                                  f"found {json.dumps(c)[:60]}")
        return ids
    return (151643, 151645)  # <|endoftext|>, <|im_end|> in the Qwen vocabulary


# Config keys behind each dimension, for errors that name the key a tensor disagrees with.
_DIMENSION_KEYS = {
    "audio_config.num_mel_bins": ("encoder", "num_mel_bins"), "audio_config.d_model": ("encoder", "d_model"),
    "audio_config.encoder_ffn_dim": ("encoder", "ffn_dim"),
    "audio_config.downsample_hidden_size": ("encoder", "conv_channels"),
    "audio_config.output_dim": ("encoder", "output_dim"),
    "text_config.vocab_size": ("decoder", "vocab_size"), "text_config.hidden_size": ("decoder", "hidden_size"),
    "text_config.intermediate_size": ("decoder", "intermediate_size"),
    "text_config.head_dim": ("decoder", "head_dim"),
}


def config_dimensions(config: ModelConfig) -> dict[str, int]:
    """config.json keys (as written in this layout) and the tensor dimensions they set."""
    outer = "thinker_config." if config.layout == "original" else ""
    dims = {outer + key: getattr(getattr(config, part), field) for key, (part, field) in _DIMENSION_KEYS.items()}
    d = config.decoder
    dims[f"{outer}text_config.num_attention_heads * head_dim"] = d.heads * d.head_dim
    dims[f"{outer}text_config.num_key_value_heads * head_dim"] = d.kv_heads * d.head_dim
    if config.num_labels:
        dims["classify_num"] = config.num_labels
    return dims
