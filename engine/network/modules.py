"""The Qwen3-ASR network as plain torch modules, named like the checkpoint tensors.

Parameters only; the forward passes live in encoder.py and decoder.py as plain
functions over these modules and explicit per-step metadata.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from asr_kernels import int8_argmax
from engine.network.config import DecoderConfig, EncoderConfig, ModelConfig
from engine.network.choose_linear import LinearChooser, fits
from engine.network.fp16_weights import Fp16CompactLinear
from engine.network.linear_methods import LinearMethod, NotLoaded


def greedy_from_logits(logits: torch.Tensor) -> list[int]:
    """Each row's first index of its largest logit, for logits [rows, vocab]."""
    # Widening to float32 is exact, and CPU argmax over bfloat16 is slower than the copy;
    # max returns the first maximal index like argmax, in half its time on CPU.
    return logits.float().max(dim=-1).indices.tolist()


def sinusoid_positions(length: int, channels: int, max_timescale: float = 10000.0) -> torch.Tensor:
    """Whisper-style positions: [length, channels], sin half then cos half."""
    log_increment = math.log(max_timescale) / (channels // 2 - 1)
    inv_timescales = torch.exp(-log_increment * torch.arange(channels // 2).float())
    scaled = torch.arange(length)[:, None] * inv_timescales[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


class EncoderLayer(nn.Module):
    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.self_attn = nn.Module()
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self.self_attn, name, nn.Linear(c.d_model, c.d_model))
        self.self_attn_layer_norm = nn.LayerNorm(c.d_model)
        self.fc1 = nn.Linear(c.d_model, c.ffn_dim)
        self.fc2 = nn.Linear(c.ffn_dim, c.d_model)
        self.final_layer_norm = nn.LayerNorm(c.d_model)


class AudioTower(nn.Module):
    def __init__(self, c: EncoderConfig):
        super().__init__()
        ch = c.conv_channels
        self.conv2d1 = nn.Conv2d(1, ch, 3, 2, padding=1)
        self.conv2d2 = nn.Conv2d(ch, ch, 3, 2, padding=1)
        self.conv2d3 = nn.Conv2d(ch, ch, 3, 2, padding=1)
        freq = (((c.num_mel_bins + 1) // 2 + 1) // 2 + 1) // 2
        self.conv_out = nn.Linear(ch * freq, c.d_model, bias=False)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.layers))
        self.ln_post = nn.LayerNorm(c.d_model)
        # Placeholder: load_network computes the table on the real device. Computing it here, under
        # torch.device("meta"), imported torch._dynamo (~4 s of every load).
        self.register_buffer("positions", torch.empty(c.tokens_per_chunk, c.d_model), persistent=False)


class Projector(nn.Module):
    def __init__(self, c: EncoderConfig):
        super().__init__()
        self.linear_1 = nn.Linear(c.d_model, c.d_model)
        self.linear_2 = nn.Linear(c.d_model, c.output_dim)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps


class DecoderLayer(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        h, hd = c.hidden_size, c.head_dim
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(h, c.heads * hd, bias=False)
        self.self_attn.k_proj = nn.Linear(h, c.kv_heads * hd, bias=False)
        self.self_attn.v_proj = nn.Linear(h, c.kv_heads * hd, bias=False)
        self.self_attn.o_proj = nn.Linear(c.heads * hd, h, bias=False)
        self.self_attn.q_norm = RMSNorm(hd, c.rms_norm_eps)
        self.self_attn.k_norm = RMSNorm(hd, c.rms_norm_eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(h, c.intermediate_size, bias=False)
        self.mlp.up_proj = nn.Linear(h, c.intermediate_size, bias=False)
        self.mlp.down_proj = nn.Linear(c.intermediate_size, h, bias=False)
        self.input_layernorm = RMSNorm(h, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(h, c.rms_norm_eps)
        # The linear methods decode steps call: one GEMM for q, k, v, one for gate and up;
        # fuse_projections sets them from the checkpoint's weights.
        self.qkv, self.o = NotLoaded("qkv"), NotLoaded("o")
        self.gate_up, self.down = NotLoaded("gate_up"), NotLoaded("down")


class LanguageModel(nn.Module):
    def __init__(self, c: DecoderConfig):
        super().__init__()
        # An uninitialised weight (the checkpoint fills it): Embedding's own normal_ init on the
        # meta device goes through torch._refs, which imports torch._dynamo (~3 s of every load).
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size,
                                         _weight=torch.empty(c.vocab_size, c.hidden_size))
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        inv_freq = torch.empty(c.head_dim // 2)   # placeholder, as positions: load_network fills it
        self.register_buffer("inv_freq", inv_freq, persistent=False)


class Qwen3ASRNetwork(nn.Module):
    """Audio tower, projector, Qwen3 decoder, and either an LM head or an aligner score head."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.compact_projections = 0      # how many fuse_projections keeps in 2 bytes (fp16_weights)
        self.head_screen: int8_argmax.ArgmaxScreen | None = None   # fuse_projections sets it
        self.audio_tower = AudioTower(config.encoder)
        self.projector = Projector(config.encoder)
        self.language_model = LanguageModel(config.decoder)
        d = config.decoder
        if config.num_labels:
            self.score = nn.Linear(d.hidden_size, config.num_labels, bias=config.score_bias)
        else:
            self.lm_head = nn.Linear(d.hidden_size, d.vocab_size, bias=False)

    @torch.no_grad()
    def greedy_tokens(self, hidden: torch.Tensor) -> list[int]:
        """Each row's greedy token (the first index of its largest logit) for hidden [rows, hidden]:
        one row through ``head_screen`` where the head has one, else from the head's logits."""
        if self.head_screen is not None and hidden.shape[0] == 1:
            token = self.head_screen.greedy(hidden.contiguous())
            if token is not None:
                return [token]
        return greedy_from_logits(self.head(hidden))

    def int8_sources(self) -> dict[str, tuple[str, ...]]:
        """The projections ``fuse_projections(quantize="int8")`` builds, by their cache name, each
        with the parameters it is made from (q, k, v -> qkv; gate, up -> gate_up)."""
        sources = {}
        for i in range(len(self.language_model.layers)):
            attn, mlp = f"language_model.layers.{i}.self_attn.", f"language_model.layers.{i}.mlp."
            sources[f"layers.{i}.qkv"] = tuple(f"{attn}{x}_proj.weight" for x in "qkv")
            sources[f"layers.{i}.gate_up"] = (f"{mlp}gate_proj.weight", f"{mlp}up_proj.weight")
            sources[f"layers.{i}.o"] = (f"{attn}o_proj.weight",)
            sources[f"layers.{i}.down"] = (f"{mlp}down_proj.weight",)
        if hasattr(self, "lm_head"):
            sources["head"] = ("lm_head.weight",)
        return sources

    def compact_sources(self) -> set[str]:
        """The parameters compact weights are packed from: the decoder projections, and with an
        LM head, the head and the embedding it may be tied to (``fuse_projections`` widens what
        is left unpacked to the model's dtype)."""
        names = {p for params in self.int8_sources().values() for p in params}
        return names | {"language_model.embed_tokens.weight"} if hasattr(self, "lm_head") else names

    def covered_by_int8(self, int8_weights: dict[str, tuple[torch.Tensor, torch.Tensor]] | None) -> set[str]:
        """Parameters that ``int8_weights`` (the on-disk cache) already holds in int8 form with the
        right shapes: the loader need not read them, fuse_projections will not quantize them."""
        shapes = {name: tuple(p.shape) for name, p in self.named_parameters()}
        covered = set()
        for name, params in self.int8_sources().items():
            if fits((int8_weights or {}).get(name), (sum(shapes[p][0] for p in params), shapes[params[0]][1])):
                covered.update(params)
        return covered

    def projection_tensors(self) -> list[torch.Tensor]:
        """What every decode step reads in full: the decoder projections' and the LM head's weights
        in the forms their linear methods keep, and the head's int8 copy where one row's greedy token
        is read through it (empty before ``fuse_projections``)."""
        found = [t for m in self.modules() if isinstance(m, LinearMethod) for t in m.tensors()]
        return found + ([self.head_screen.packed] if self.head_screen is not None else [])

    @torch.no_grad()
    def fuse_projections(self, quantize: str | None = None,
                         int8_weights: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None,
                         compact: bool = False) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Concatenate q/k/v and gate/up weights so each runs as one GEMM per layer, and give
        every decoder projection and the LM head its linear method (``choose_linear``).

        ``int8_weights``: name -> (q, scale) already quantized (the on-disk cache). Returns what
        was quantized here, for the cache (empty when nothing was)."""
        device = self.language_model.embed_tokens.weight.device
        choose = LinearChooser(quantize, int8_weights, compact, dtype=self.language_model.norm.weight.dtype)
        for i, layer in enumerate(self.language_model.layers):
            a, m = layer.self_attn, layer.mlp
            layer.qkv = choose(f"layers.{i}.qkv", a.q_proj.weight, a.k_proj.weight, a.v_proj.weight)
            layer.gate_up = choose(f"layers.{i}.gate_up", m.gate_proj.weight, m.up_proj.weight)
            layer.o = choose(f"layers.{i}.o", a.o_proj.weight.data)
            layer.down = choose(f"layers.{i}.down", m.down_proj.weight.data)
            # The fused methods replace the originals; drop them to keep one copy in memory.
            for lin in (a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj):
                _drop_weight(lin, device)
        if hasattr(self, "lm_head"):
            # The LM head is the largest single read of a decode step.
            weight = self.lm_head.weight.data
            tied = weight.data_ptr() == self.language_model.embed_tokens.weight.data_ptr()
            self.head = choose("head", weight, tied=tied)
        choose.finish()
        self.compact_projections = choose.compact_count
        if hasattr(self, "lm_head"):
            # One row's greedy token from an int8 read of the head, exactly (int8_argmax), where a
            # one-row kernel reads it; built with the compact weights, whose load-time cost the same
            # inputs repay.
            self.head_screen = int8_argmax.screen_for(weight, getattr(self.head, "row", None)) if compact else None
            dtype, embed = self.language_model.norm.weight.dtype, self.language_model.embed_tokens
            embedding = choose.compact_embedding(self.head, dtype)
            if embedding is not None:        # a tied head packed in float16: the embedding reads it
                self.language_model.embed_tokens = embedding
            elif embed.weight.dtype != dtype:
                # kept in the checkpoint's bfloat16 for compact weights (load_network), which did
                # not take it: widened now, sharing a tied head's own widened float weight
                head = self.head.weight
                wide = head if tied and head is not None and head.dtype == dtype else embed.weight.to(dtype)
                embed.weight = nn.Parameter(wide, requires_grad=False)
            compact_float = isinstance(self.head, Fp16CompactLinear) and self.head.weight is not None \
                and self.head.weight.data_ptr() != weight.data_ptr()
            if self.head.weight is None or compact_float:
                _drop_weight(self.lm_head, device)   # int8, packed or widened: the plain head is no longer read
        return choose.fresh


def _drop_weight(linear: nn.Linear, device: torch.device) -> None:
    # ``device``, not the weight's own: a weight whose int8 form came from the cache was never
    # read and is still on the meta device.
    linear.weight = nn.Parameter(torch.empty(0, dtype=linear.weight.dtype, device=device), requires_grad=False)
