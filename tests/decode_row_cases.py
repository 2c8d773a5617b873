"""One decode row's attention case and its torch reference, for the compiled decode-row kernels'
tests in bfloat16 (test_bf16_decode_row.py) and float32 (test_f32_decode_row.py)."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from asr_kernels.qk_norm_rope import qk_norm_rope_cpu, signed_sin
from engine.network.decoder import StepMetadata, paged_attention

EPS = 1e-6


@dataclass
class AttentionCase:
    """A layer's paged cache, one token's qkv and q/k norm weights, rotary at its position, its slot."""

    k_cache: torch.Tensor        # [blocks, block_size, kvh, hd]
    v_cache: torch.Tensor
    qkv: torch.Tensor            # [1, (heads + 2 kvh) hd]
    qkw: torch.Tensor            # [heads + kvh, hd]
    cos: torch.Tensor            # [1, hd]
    sin: torch.Tensor            # [1, hd]
    slot: int                    # the token's cache slot: position ctx - 1 through the table


def attention_case(heads, kvh, hd, ctx, block_size, table, seed, dtype) -> AttentionCase:
    g = torch.Generator().manual_seed(seed)
    blocks = max(table) + 1
    k_cache = torch.randn(blocks, block_size, kvh, hd, generator=g).to(dtype)
    v_cache = torch.randn(blocks, block_size, kvh, hd, generator=g).to(dtype)
    qkv = (2 * torch.randn(1, (heads + 2 * kvh) * hd, generator=g)).to(dtype)
    qkw = (1 + 0.3 * torch.randn(heads + kvh, hd, generator=g)).to(dtype)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
    freqs = torch.tensor([[ctx - 1.0]]) * inv_freq[None]
    emb = torch.cat((freqs, freqs), dim=-1)
    pos = ctx - 1
    return AttentionCase(k_cache, v_cache, qkv, qkw, emb.cos().to(dtype), emb.sin().to(dtype),
                         table[pos // block_size] * block_size + pos % block_size)


def torch_reference(case: AttentionCase, heads, kvh, hd, ctx, table):
    """(q [1, heads, hd], k cache, v cache, attention [1, heads * hd]): the torch prologue on copies of
    the case's caches, then decoder.paged_attention (SDPA)."""
    ref_k, ref_v = case.k_cache.clone(), case.v_cache.clone()
    qk = case.qkv[:, :(heads + kvh) * hd].view(1, heads + kvh, hd)
    v = case.qkv[:, (heads + kvh) * hd:].view(1, kvh, hd)
    q = qk_norm_rope_cpu(qk, case.qkw, EPS, case.cos[:, None, :], signed_sin(case.sin)[:, None, :], heads, v, ref_k,
                         ref_v, torch.tensor([case.slot]))
    meta = StepMetadata(positions=torch.tensor([ctx - 1]), slot_mapping=torch.tensor([case.slot]), query_lens=[1],
                        context_lens=[ctx], block_tables=[table])
    return q, ref_k, ref_v, paged_attention(q, ref_k, ref_v, meta)


def words_with_and_without(monkeypatch, switch: str, dtype: str) -> tuple[str, str, str]:
    """(the sentence spoken, the trained tiny model's transcript with the decode-row kernels, without):
    the kernels switched by the environment variable ``switch``. Checks that the decode-row decoder
    is chosen exactly when switched on and ran more than three steps then."""
    import engine
    from real_speech import ASR_DIR, heldout_sentences, speak

    sentence = heldout_sentences()[3]            # "David carried the brown record, but she found the clock."
    audio = speak(sentence)
    texts = {}
    for on in ("0", "1"):
        monkeypatch.setenv(switch, on)
        eng = engine.load(ASR_DIR, device="cpu", dtype=dtype)
        assert (eng.runner.decode_row is not None) == (on == "1")
        calls = []
        if eng.runner.decode_row is not None:
            inner = eng.runner.decode_row
            eng.runner.decode_row = lambda embeds, meta: calls.append(1) or inner(embeds, meta)
        texts[on] = eng.transcribe(audio).text
        assert (len(calls) > 3) == (on == "1")
    return sentence, texts["1"], texts["0"]
