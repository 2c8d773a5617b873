"""Runs a scheduled step on the model: flat inputs copied once, one decoder pass, greedy tokens.

Steps can be padded to a bucket of token counts (padding tokens write no cache
and are attended by nobody), so that on CUDA a captured graph per bucket can be
replayed; the padding logic is the same on every device and tested on CPU.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import torch

from engine.network.decode_row import decode_row_forward_for, decode_rows_only
from engine.network.decoder import StepMetadata, decoder_forward
from engine.network.modules import Qwen3ASRNetwork, greedy_from_logits
from engine.serving.attention import attention_backend, attention_function
from engine.serving.encoder_cache import EncoderCache
from engine.serving.flash import attention_tensors
from engine.serving.kv_cache import KVCache
from engine.serving.request import Request
from engine.serving.scheduler import RowMode, ScheduledRow

DECODE_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)
MIXED_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
ROW_BUCKETS = (8, 16, 32, 64, 128, 256)
MAX_CONTEXT = 8192     # tokens one request may hold in the cache when graphs are captured


def bucket_for(n: int, buckets: tuple[int, ...]) -> int:
    """The smallest bucket holding ``n``; ``n`` itself when it exceeds every bucket."""
    i = bisect.bisect_left(buckets, n)
    return buckets[i] if i < len(buckets) else n


@dataclass
class StepInputs:
    """Flat per-step tensors: every token of every row, padded to ``padded_tokens``."""

    input_ids: torch.Tensor          # [padded_tokens]
    meta: StepMetadata
    audio_dst: torch.Tensor          # [audio_tokens] positions in the flat batch that get audio embeddings
    audio_src: torch.Tensor          # [audio_tokens, hidden] the embeddings
    sample_index: torch.Tensor       # [sampled positions] flat index of each position that gets logits
    sample_rows: list[ScheduledRow]
    sample_counts: list[int]         # positions of each sampling row: 1, or 1 + its draft for a verify row
    num_tokens: int                  # real tokens before padding
    score_index: torch.Tensor | None = None   # [scored positions] flat index of each; None when none
    score_rows: list[ScheduledRow] = field(default_factory=list)
    score_counts: list[int] = field(default_factory=list)   # scored positions of each score row


def build_step_inputs(rows: list[ScheduledRow], block_size: int, device, pad_to: int | None = None,
                      attention_rows: int | None = None) -> StepInputs:
    """Flatten scheduled rows; ``attention_rows`` also builds padded attention tensors (flash, triton)."""
    ids, positions, slots, dst, src, sample_index, sample_rows, counts = [], [], [], [], [], [], [], []
    score_index, score_rows, score_counts = [], [], []
    for row in rows:
        req, offset = row.request, len(ids)
        span = range(row.start, row.start + row.length)
        all_ids = req.all_ids + row.draft if row.draft else req.all_ids
        ids += all_ids[row.start:row.start + row.length]
        positions += span
        slots += [req.block_table[p // block_size] * block_size + p % block_size for p in span]
        a0, a1 = req.audio_start, req.audio_start + req.num_audio_tokens
        lo, hi = max(row.start, a0), min(row.start + row.length, a1)
        if lo < hi:  # this row feeds audio placeholders: splice in the encoder output
            dst += range(offset + lo - row.start, offset + hi - row.start)
            src.append(req.audio_embeds[lo - a0:hi - a0])
        mode = row.mode
        if mode is RowMode.SCORE:
            marked = [offset + i for i, t in enumerate(ids[offset:]) if t == req.score_token_id]
            score_index += marked
            score_rows.append(row)
            score_counts.append(len(marked))
        elif mode is not RowMode.FEED:
            count = 1 + len(row.draft)   # a verify row: greedy's token after its last token and each draft token
            sample_index += range(offset + row.length - count, offset + row.length)
            sample_rows.append(row)
            counts.append(count)
    num_tokens = len(ids)
    pad = max(0, (pad_to or num_tokens) - num_tokens)
    ids += [0] * pad
    positions += [0] * pad
    slots += [-1] * pad
    meta = StepMetadata(
        positions=torch.tensor(positions, dtype=torch.long, device=device),
        slot_mapping=torch.tensor(slots, dtype=torch.long, device=device),
        query_lens=[r.length for r in rows],
        context_lens=[r.start + r.length for r in rows],
        block_tables=[r.request.block_table for r in rows],
    )
    if attention_rows is not None:
        max_blocks = max(-(-MAX_CONTEXT // block_size), max((len(r.request.block_table) for r in rows), default=1))
        meta.tensors = attention_tensors(meta.query_lens, meta.context_lens, meta.block_tables,
                                         attention_rows, max_blocks, device,
                                         max_query_len=pad_to or None, max_context_len=max_blocks * block_size)
    return StepInputs(
        input_ids=torch.tensor(ids, dtype=torch.long, device=device), meta=meta,
        audio_dst=torch.tensor(dst, dtype=torch.long, device=device),
        audio_src=torch.cat(src) if src else None,
        sample_index=torch.tensor(sample_index, dtype=torch.long, device=device),
        sample_rows=sample_rows, sample_counts=counts, num_tokens=num_tokens,
        score_index=torch.tensor(score_index, dtype=torch.long, device=device) if score_index else None,
        score_rows=score_rows, score_counts=score_counts,
    )


class ModelRunner:
    """Owns the network and the KV cache; turns scheduled rows into next tokens."""

    def __init__(self, net: Qwen3ASRNetwork, cache: KVCache, device: torch.device, *, pad_buckets: bool = False,
                 cuda_graphs: bool | None = None, attention: str | None = None):
        self.net = net
        self.cache = cache
        self.device = device
        self.pad_buckets = pad_buckets
        self.encoder_cache = EncoderCache(net)   # encoder outputs by audio content, for every request
        self.backend = attention or attention_backend(device, net.language_model.norm.weight.dtype)
        self.attention = attention_function(self.backend)
        self.tensor_metadata = self.backend != "torch"   # attention reads device tensors: graph-capturable
        # Steps of decode rows only on CPU (bfloat16: one clip at a time, a live stream, a queue's decode
        # steps; float32: steps of one row): compiled kernels between the GEMVs, no per-layer torch calls.
        self.decode_row = decode_row_forward_for(net, cache, device) if self.backend == "torch" else None
        self.graphs = None
        if self.tensor_metadata and device.type == "cuda" and (cuda_graphs if cuda_graphs is not None else True):
            from engine.serving.cuda_graphs import CudaGraphRunner

            self.pad_buckets = True
            blocks = -(-MAX_CONTEXT // cache.block_size)
            self.graphs = CudaGraphRunner(net, cache, self.attention, max_blocks=blocks,
                                          max_query_len=MIXED_BUCKETS[-1], max_context_len=blocks * cache.block_size,
                                          token_buckets=DECODE_BUCKETS + MIXED_BUCKETS, row_buckets=ROW_BUCKETS)

    @torch.no_grad()
    def encode_pending(self, rows: list[ScheduledRow]) -> None:
        """Run the encoder once for every request of this step that has no embeddings yet."""
        self._encode([r.request for r in rows if r.request.audio_embeds is None and r.request.num_audio_tokens])

    def encode_if_cached(self, request: Request) -> None:
        """Encode ``request`` now, before it is scheduled, if the encoder cache holds its first window:
        a repeat of recent audio (a live pass), whose audio prefix the KV cache may then hold too."""
        if (request.audio_embeds is None and request.features is not None and request.num_audio_tokens
                and self.encoder_cache.has_first_window(request.features)):
            try:
                self._encode([request])
            except Exception:   # the step's encode_pending tries again, where a failure fails the request alone
                request.audio_embeds = None

    def _encode(self, todo: list[Request]) -> None:
        if not todo:
            return
        embeds = self.encoder_cache.encode([r.features for r in todo], self.device)
        for req, emb in zip(todo, embeds):
            if emb.shape[0] != req.num_audio_tokens:
                raise RuntimeError(f"encoder gave {emb.shape[0]} tokens, prompt has {req.num_audio_tokens}")
            req.audio_embeds = emb
            req.features = None  # the features are no longer needed; free them

    def padded_size(self, rows: list[ScheduledRow]) -> int | None:
        if not self.pad_buckets:
            return None
        n = sum(r.length for r in rows)
        decode_only = all(r.length == 1 for r in rows)
        return bucket_for(n, DECODE_BUCKETS if decode_only else MIXED_BUCKETS)

    def embeddings(self, inputs: StepInputs) -> torch.Tensor:
        embeds = self.net.language_model.embed_tokens(inputs.input_ids)       # [tokens, hidden]
        if inputs.audio_src is not None:
            embeds.index_copy_(0, inputs.audio_dst, inputs.audio_src.to(embeds.dtype))
        return embeds

    @torch.no_grad()
    def hidden_states(self, inputs: StepInputs) -> torch.Tensor:
        embeds = self.embeddings(inputs)
        if self.decode_row is not None and decode_rows_only(embeds, inputs.meta):
            return self.decode_row(embeds, inputs.meta)
        return decoder_forward(self.net, self.cache, embeds, inputs.meta, self.attention)

    def step_inputs(self, rows: list[ScheduledRow]) -> StepInputs:
        rows_bucket = bucket_for(len(rows), ROW_BUCKETS) if self.tensor_metadata else None
        return build_step_inputs(rows, self.cache.block_size, self.device, self.padded_size(rows), rows_bucket)

    @torch.no_grad()
    def run(self, rows: list[ScheduledRow]) -> dict[int, int | list[int]]:
        """What each row's mode reads out, by request id: greedy's next token for a sample row, a
        list (one per position) for a verify row, the score head's classes (a list) for a score row."""
        self.encode_pending(rows)
        inputs = self.step_inputs(rows)
        graphable = all(r.mode in (RowMode.FEED, RowMode.SAMPLE) for r in rows)   # one logit row per row
        scores = None
        tokens = []
        if self.graphs is not None and graphable and self.graphs.fits(inputs.input_ids.numel(), inputs.meta):
            logits = self.graphs.run(self.embeddings(inputs), inputs.meta, inputs.sample_index)
            tokens = greedy_from_logits(logits)
        else:
            hidden = self.hidden_states(inputs)
            if inputs.sample_rows:
                tokens = self.net.greedy_tokens(hidden.index_select(0, inputs.sample_index))
            if inputs.score_index is not None:
                scores = self.net.score(hidden.index_select(0, inputs.score_index)).float().argmax(dim=-1).tolist()
        out: dict[int, int | list[int]] = {}
        if inputs.sample_rows:
            at = 0
            for row, count in zip(inputs.sample_rows, inputs.sample_counts):
                out[row.request.id] = tokens[at:at + count] if row.draft else tokens[at]
                at += count
        at = 0
        for row, count in zip(inputs.score_rows, inputs.score_counts):
            out[row.request.id] = scores[at:at + count] if count else []
            at += count
        return out
