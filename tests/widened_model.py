"""The trained tiny model written into a checkpoint of larger dimensions that computes the same thing.

Benchmarks need the real 0.6B dimensions (the cost) and, for live captions, a model that says the
same words about the same audio from one update to the next (the worth of the draft tokens).
Random weights give the first but not the second: their text changes with every new bit of audio.
This module widens ``tests/models/qwen3-asr-tiny`` to any larger dimensions without changing what
it computes, up to float rounding:

- decoder: hidden states padded with zeros and scaled by ``c_d = sqrt(H_big / H_tiny)``, so every
  RMSNorm divides by the tiny model's own root mean square (eps included) and its weight is
  divided by ``c_d``;
- decoder heads: each tiny head sits in the first and the middle of a big head
  (dims ``i`` and ``hd_big/2 + i`` hold the tiny's rotary pair ``i``, ``hd_tiny/2 + i``), with
  ``rope_theta`` raised to the power ``hd_big / hd_tiny`` so pair ``i`` turns at the same
  frequency; q and k are scaled by ``sqrt(hd_big / hd_tiny)`` and k_norm's weight divided by it,
  so q_norm/k_norm see the tiny's root mean square and the scores keep their 1/sqrt(hd_tiny) scale;
- encoder: LayerNorm subtracts the mean, so zero padding would change it; the residual stream holds
  ``c_e * [P x, -P x, 0]`` (P removes x's mean): its mean is zero, its variance the tiny's, and only
  LayerNorms read it, which ignore x's mean anyway;
- added layers have zero output projections (the residual passes through); added vocabulary rows
  of the LM head copy one real row, so they never win an argmax (the first maximal index wins).

One thing the checkpoint cannot carry: the encoder adds sinusoidal positions computed from its
width (not weights). ``widened_positions`` is the tiny model's table in the widened layout, and
``use_widened_positions(engine)`` puts it in place after ``engine.load``; it has the same shape as
the table it replaces, so the cost is unchanged.
"""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

TINY = Path(__file__).resolve().parent / "models" / "qwen3-asr-tiny"
POSITIONS_FILE = "widened_audio_positions.pt"   # not *.safetensors: the loader reads only those
_COPY_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json",
               "processor_config.json", "preprocessor_config.json")


def _load(folder: Path) -> dict[str, torch.Tensor]:
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        return {k: f.get_tensor(k).float() for k in f.keys()}


class _Widen:
    def __init__(self, tiny_cfg: dict, dims: dict):
        te, tt = tiny_cfg["audio_config"], tiny_cfg["text_config"]
        be = {**te, **dims["encoder"]}
        bt = {**tt, **dims["text"]}
        for key in ("n_window", "n_window_infer", "num_mel_bins", "activation_function"):
            if be.get(key) != te.get(key):
                raise ValueError(f"widening keeps the encoder's {key} ({te.get(key)!r}), got {be.get(key)!r}")
        for key in ("rms_norm_eps", "hidden_act"):
            if bt.get(key) != tt.get(key):
                raise ValueError(f"widening keeps the decoder's {key} ({tt.get(key)!r}), got {bt.get(key)!r}")
        self.te, self.tt, self.be, self.bt = te, tt, be, bt
        self.Dt, self.Db = te["d_model"], be["d_model"]
        self.Ht, self.Hb = tt["hidden_size"], bt["hidden_size"]
        if self.Db < 2 * self.Dt:
            raise ValueError(f"encoder d_model {self.Db} must be at least twice the tiny's {self.Dt}")
        self.enc_hd_t = self.Dt // te["encoder_attention_heads"]
        self.enc_hd_b = self.Db // be["encoder_attention_heads"]
        self.hd_t, self.hd_b = tt["head_dim"], bt["head_dim"]
        r_t = tt["num_attention_heads"] // tt["num_key_value_heads"]
        r_b = bt["num_attention_heads"] // bt["num_key_value_heads"]
        checks = [(self.Hb >= self.Ht, "hidden_size"), (self.hd_b >= self.hd_t, "head_dim"),
                  (self.enc_hd_b >= self.enc_hd_t, "encoder head width"),
                  (be["encoder_attention_heads"] >= te["encoder_attention_heads"], "encoder heads"),
                  (bt["num_key_value_heads"] >= tt["num_key_value_heads"] and r_b >= r_t, "decoder heads"),
                  (be["encoder_ffn_dim"] >= te["encoder_ffn_dim"], "encoder_ffn_dim"),
                  (bt["intermediate_size"] >= tt["intermediate_size"], "intermediate_size"),
                  (be["downsample_hidden_size"] >= te["downsample_hidden_size"], "downsample_hidden_size"),
                  (be["encoder_layers"] >= te["encoder_layers"], "encoder_layers"),
                  (bt["num_hidden_layers"] >= tt["num_hidden_layers"], "num_hidden_layers")]
        for ok, what in checks:
            if not ok:
                raise ValueError(f"the widened {what} must be at least the tiny model's")
        self.c_e = math.sqrt(self.Db / (2 * self.Dt))     # encoder residual scale: variance kept
        self.c_d = math.sqrt(self.Hb / self.Ht)           # decoder residual scale: mean square kept
        self.c_h = math.sqrt(self.hd_b / self.hd_t)       # decoder q, k scale
        self.c_q = math.sqrt(self.enc_hd_b / self.enc_hd_t)   # encoder q scale (SDPA's 1/sqrt(hd))
        # Decoder head slots: tiny q head h of KV group g, index w -> big q head g * r_b + w.
        self.q_slot = [(h // r_t) * r_b + h % r_t for h in range(tt["num_attention_heads"])]
        half_t, half_b = self.hd_t // 2, self.hd_b // 2
        self.dim_map = torch.tensor([i if i < half_t else half_b + i - half_t for i in range(self.hd_t)])

    # -- encoder residual: x -> c_e * [P x, -P x, 0]
    def residual_out(self, w: torch.Tensor) -> torch.Tensor:
        """A tiny [Dt, ...] output map (weight or bias) -> the widened residual layout [Db, ...]."""
        centred = w - w.mean(dim=0, keepdim=True)
        out = w.new_zeros((self.Db, *w.shape[1:]))
        out[:self.Dt], out[self.Dt:2 * self.Dt] = self.c_e * centred, -self.c_e * centred
        return out

    def enc_norm(self, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wb, bb = w.new_zeros(self.Db), w.new_zeros(self.Db)
        wb[:self.Dt], bb[:self.Dt] = w / self.c_e, b
        return wb, bb

    def enc_heads(self, n_heads: int) -> torch.Tensor:
        """Big row index of each tiny row of q/k/v (head h stays head h, dims first)."""
        return torch.cat([h * self.enc_hd_b + torch.arange(self.enc_hd_t) for h in range(n_heads)])

    def dec_q_rows(self) -> torch.Tensor:
        return torch.cat([s * self.hd_b + self.dim_map for s in self.q_slot])

    def dec_kv_rows(self) -> torch.Tensor:
        return torch.cat([j * self.hd_b + self.dim_map for j in range(self.tt["num_key_value_heads"])])


def _place(shape, rows: torch.Tensor, cols: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A zero matrix of ``shape`` with ``values`` [len(rows), len(cols)] at those rows and columns."""
    out = torch.zeros(shape)
    out[rows[:, None], cols[None, :]] = values
    return out


def widen(tiny_dir: Path, out_dir: Path, dims: dict, dtype=torch.float32) -> Path:
    """Write the widened checkpoint of ``tiny_dir`` to ``out_dir``. ``dims``: {"encoder": {...},
    "text": {...}, "vocab_size": N} in config keys (tests/checkpoints.py REAL_0_6B's form)."""
    tiny_dir, out_dir = Path(tiny_dir), Path(out_dir)
    cfg = json.loads((tiny_dir / "config.json").read_text())
    w = _Widen(cfg, dims)
    t = _load(tiny_dir)
    te, tt, be, bt = w.te, w.tt, w.be, w.bt
    Dt, Db, Ht, Hb = w.Dt, w.Db, w.Ht, w.Hb
    ch_t, ch_b = te["downsample_hidden_size"], be["downsample_hidden_size"]
    Ft, Fb, It, Ib = te["encoder_ffn_dim"], be["encoder_ffn_dim"], tt["intermediate_size"], bt["intermediate_size"]
    Vt, Vb = tt["vocab_size"], dims.get("vocab_size", tt["vocab_size"])
    s: dict[str, torch.Tensor] = {}
    a = "model.audio_tower."
    # Convolutions: the tiny's channels first, the added ones all zero (GELU(0) = 0).
    for i in (1, 2, 3):
        wt = t[f"{a}conv2d{i}.weight"]
        wb = torch.zeros(ch_b, 1 if i == 1 else ch_b, 3, 3)
        wb[:ch_t, :wt.shape[1]] = wt
        s[f"{a}conv2d{i}.weight"] = wb
        s[f"{a}conv2d{i}.bias"] = torch.cat([t[f"{a}conv2d{i}.bias"], torch.zeros(ch_b - ch_t)])
    # conv_out reads [channel * freq + f]: the tiny's channels come first, at the same indices.
    freq = t[f"{a}conv_out.weight"].shape[1] // ch_t
    conv_out = torch.zeros(Db, ch_b * freq)
    conv_out[:, :ch_t * freq] = w.residual_out(t[f"{a}conv_out.weight"])
    s[f"{a}conv_out.weight"] = conv_out
    q_rows = w.enc_heads(te["encoder_attention_heads"])
    for layer in range(be["encoder_layers"]):
        p, tp = f"{a}layers.{layer}.", f"{a}layers.{layer}."
        if layer >= te["encoder_layers"]:     # a pass-through layer: both outputs zero
            for name, (o, i) in {"self_attn.q_proj": (Db, Db), "self_attn.k_proj": (Db, Db),
                                 "self_attn.v_proj": (Db, Db), "self_attn.out_proj": (Db, Db),
                                 "fc1": (Fb, Db), "fc2": (Db, Fb)}.items():
                s[f"{p}{name}.weight"], s[f"{p}{name}.bias"] = torch.zeros(o, i), torch.zeros(o)
            for norm in ("self_attn_layer_norm", "final_layer_norm"):
                s[f"{p}{norm}.weight"], s[f"{p}{norm}.bias"] = torch.ones(Db), torch.zeros(Db)
            continue
        for norm in ("self_attn_layer_norm", "final_layer_norm"):
            s[f"{p}{norm}.weight"], s[f"{p}{norm}.bias"] = w.enc_norm(t[f"{tp}{norm}.weight"], t[f"{tp}{norm}.bias"])
        for name, scale in (("q_proj", w.c_q), ("k_proj", 1.0), ("v_proj", 1.0)):
            s[f"{p}self_attn.{name}.weight"] = _place((Db, Db), q_rows, torch.arange(Dt),
                                                      scale * t[f"{tp}self_attn.{name}.weight"])
            bias = torch.zeros(Db)
            bias[q_rows] = scale * t[f"{tp}self_attn.{name}.bias"]
            s[f"{p}self_attn.{name}.bias"] = bias
        out = torch.zeros(Db, Db)
        out[:, q_rows] = w.residual_out(t[f"{tp}self_attn.out_proj.weight"])
        s[f"{p}self_attn.out_proj.weight"] = out
        s[f"{p}self_attn.out_proj.bias"] = w.residual_out(t[f"{tp}self_attn.out_proj.bias"])
        s[f"{p}fc1.weight"] = _place((Fb, Db), torch.arange(Ft), torch.arange(Dt), t[f"{tp}fc1.weight"])
        s[f"{p}fc1.bias"] = torch.cat([t[f"{tp}fc1.bias"], torch.zeros(Fb - Ft)])
        fc2 = torch.zeros(Db, Fb)
        fc2[:, :Ft] = w.residual_out(t[f"{tp}fc2.weight"])
        s[f"{p}fc2.weight"], s[f"{p}fc2.bias"] = fc2, w.residual_out(t[f"{tp}fc2.bias"])
    s[f"{a}ln_post.weight"], s[f"{a}ln_post.bias"] = w.enc_norm(t[f"{a}ln_post.weight"], t[f"{a}ln_post.bias"])
    # Projector: reads the tiny's dims of ln_post, writes the decoder's residual layout (x c_d).
    m = "model.multi_modal_projector."
    s[f"{m}linear_1.weight"] = _place((Db, Db), torch.arange(Dt), torch.arange(Dt), t[f"{m}linear_1.weight"])
    s[f"{m}linear_1.bias"] = torch.cat([t[f"{m}linear_1.bias"], torch.zeros(Db - Dt)])
    s[f"{m}linear_2.weight"] = _place((Hb, Db), torch.arange(Ht), torch.arange(Dt), w.c_d * t[f"{m}linear_2.weight"])
    s[f"{m}linear_2.bias"] = torch.cat([w.c_d * t[f"{m}linear_2.bias"], torch.zeros(Hb - Ht)])
    # Decoder.
    lm = "model.language_model."
    embed = torch.zeros(Vb, Hb)
    embed[:Vt, :Ht] = w.c_d * t[f"{lm}embed_tokens.weight"]
    s[f"{lm}embed_tokens.weight"] = embed
    qr, kvr, hidden = w.dec_q_rows(), w.dec_kv_rows(), torch.arange(Ht)
    q_out, kv_out = bt["num_attention_heads"] * w.hd_b, bt["num_key_value_heads"] * w.hd_b

    def dec_norm(weight: torch.Tensor) -> torch.Tensor:
        return torch.cat([weight / w.c_d, torch.ones(Hb - Ht)])

    for layer in range(bt["num_hidden_layers"]):
        p = f"{lm}layers.{layer}."
        if layer >= tt["num_hidden_layers"]:      # pass-through: o_proj and down_proj zero
            for name, shape in {"self_attn.q_proj": (q_out, Hb), "self_attn.k_proj": (kv_out, Hb),
                                "self_attn.v_proj": (kv_out, Hb), "self_attn.o_proj": (Hb, q_out),
                                "mlp.gate_proj": (Ib, Hb), "mlp.up_proj": (Ib, Hb), "mlp.down_proj": (Hb, Ib)}.items():
                s[f"{p}{name}.weight"] = torch.zeros(shape)
            for name, size in (("input_layernorm", Hb), ("post_attention_layernorm", Hb),
                               ("self_attn.q_norm", w.hd_b), ("self_attn.k_norm", w.hd_b)):
                s[f"{p}{name}.weight"] = torch.ones(size)
            continue
        s[f"{p}input_layernorm.weight"] = dec_norm(t[f"{p}input_layernorm.weight"])
        s[f"{p}post_attention_layernorm.weight"] = dec_norm(t[f"{p}post_attention_layernorm.weight"])
        s[f"{p}self_attn.q_proj.weight"] = _place((q_out, Hb), qr, hidden, w.c_h * t[f"{p}self_attn.q_proj.weight"])
        s[f"{p}self_attn.k_proj.weight"] = _place((kv_out, Hb), kvr, hidden, w.c_h * t[f"{p}self_attn.k_proj.weight"])
        s[f"{p}self_attn.v_proj.weight"] = _place((kv_out, Hb), kvr, hidden, t[f"{p}self_attn.v_proj.weight"])
        for name, scale in (("q_norm", 1.0), ("k_norm", 1.0 / w.c_h)):
            norm = torch.ones(w.hd_b)
            norm[w.dim_map] = scale * t[f"{p}self_attn.{name}.weight"]
            s[f"{p}self_attn.{name}.weight"] = norm
        s[f"{p}self_attn.o_proj.weight"] = _place((Hb, q_out), hidden, qr, w.c_d * t[f"{p}self_attn.o_proj.weight"])
        s[f"{p}mlp.gate_proj.weight"] = _place((Ib, Hb), torch.arange(It), hidden, t[f"{p}mlp.gate_proj.weight"])
        s[f"{p}mlp.up_proj.weight"] = _place((Ib, Hb), torch.arange(It), hidden, t[f"{p}mlp.up_proj.weight"])
        s[f"{p}mlp.down_proj.weight"] = _place((Hb, Ib), hidden, torch.arange(It), w.c_d * t[f"{p}mlp.down_proj.weight"])
    s[f"{lm}norm.weight"] = dec_norm(t[f"{lm}norm.weight"])
    head = torch.zeros(Vb, Hb)
    head[:Vt, :Ht] = t["lm_head.weight"]
    head[Vt:] = head[cfg["audio_token_id"]]      # copies of a real row: never the first maximum
    s["lm_head.weight"] = head

    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(dtype).contiguous() for k, v in s.items()}, str(out_dir / "model.safetensors"),
              metadata={"format": "pt"})
    big = json.loads(json.dumps(cfg))
    big["audio_config"].update(dims["encoder"])
    big["audio_config"]["output_dim"] = Hb
    text = big["text_config"]
    text.update({k: v for k, v in dims["text"].items() if k != "rope_theta"})
    text["vocab_size"] = Vb
    text["layer_types"] = ["full_attention"] * bt["num_hidden_layers"]
    theta = tt.get("rope_parameters", {}).get("rope_theta", tt.get("rope_theta", 1_000_000.0))
    text["rope_parameters"] = {"rope_theta": theta ** (w.hd_b / w.hd_t), "rope_type": "default"}
    text.pop("rope_theta", None)
    big["dtype"] = str(dtype).removeprefix("torch.")
    (out_dir / "config.json").write_text(json.dumps(big, indent=2))
    for name in _COPY_FILES:
        if (tiny_dir / name).is_file():
            shutil.copy(tiny_dir / name, out_dir / name)
    torch.save(widened_positions(cfg, dims), out_dir / POSITIONS_FILE)
    return out_dir


def widened_positions(tiny_cfg: dict, dims: dict) -> torch.Tensor:
    """The tiny encoder's position table [tokens_per_chunk, d_model_big] in the widened residual layout."""
    from engine.network.config import conv_output_length
    from engine.network.modules import sinusoid_positions

    w = _Widen(tiny_cfg, dims)
    tokens = conv_output_length(2 * w.be["n_window"])    # positions restart in every chunk
    return w.residual_out(sinusoid_positions(tokens, w.Dt).T).T.contiguous()


def use_widened_positions(eng) -> None:
    """Put the widened model's position table in place of the one computed from its width."""
    table = torch.load(Path(eng.model_dir) / POSITIONS_FILE)
    tower = eng.net.audio_tower
    if tuple(table.shape) != tuple(tower.positions.shape):
        raise ValueError(f"position table {tuple(table.shape)} does not fit {tuple(tower.positions.shape)}")
    tower.positions = table.to(tower.positions.device, tower.positions.dtype)
