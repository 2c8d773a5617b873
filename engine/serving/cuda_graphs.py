"""CUDA graphs for engine steps: capture once per bucket, replay with new inputs copied in.

A bucket is a padded token count (decode-only steps: one token per row; mixed
steps: packed tokens of all rows) plus a padded row count. The graph covers the
decoder layers and the LM head at the sampling rows; embedding lookup and the
audio splice run eagerly before it. Needs an attention whose metadata lives in
device tensors (flash-attn or the Triton paged kernel); with the torch path the
runner stays eager.
"""
from __future__ import annotations

import torch

from engine.network.decoder import StepMetadata, decoder_forward
from engine.serving.flash import AttentionTensors


class _Graph:
    def __init__(self, tokens: int, rows: int, max_blocks: int, hidden: int, dtype, device):
        self.tokens, self.rows = tokens, rows
        self.embeds = torch.zeros(tokens, hidden, dtype=dtype, device=device)
        self.positions = torch.zeros(tokens, dtype=torch.long, device=device)
        self.slots = torch.full((tokens,), -1, dtype=torch.long, device=device)
        self.cu_q = torch.zeros(rows + 1, dtype=torch.int32, device=device)
        self.cu_k = torch.zeros(rows + 1, dtype=torch.int32, device=device)
        self.table = torch.zeros(rows, max_blocks, dtype=torch.int32, device=device)
        self.sample_index = torch.zeros(rows, dtype=torch.long, device=device)
        self.logits: torch.Tensor | None = None
        self.graph: torch.cuda.CUDAGraph | None = None


class CudaGraphRunner:
    """Replays captured step graphs; ``run`` returns logits at the sampling rows."""

    def __init__(self, net, cache, attention, *, max_blocks: int, max_query_len: int, max_context_len: int,
                 token_buckets: tuple[int, ...], row_buckets: tuple[int, ...]):
        self.net, self.cache = net, cache
        self.attention = attention          # flash or Triton paged attention: reads StepMetadata.tensors
        self.max_blocks = max_blocks
        self.token_buckets, self.row_buckets = frozenset(token_buckets), frozenset(row_buckets)
        self.max_query_len, self.max_context_len = max_query_len, max_context_len
        self.graphs: dict[tuple[int, int], _Graph] = {}
        self.pool = None

    def _meta(self, g: _Graph) -> StepMetadata:
        tensors = AttentionTensors(g.cu_q, g.cu_k, g.table, self.max_query_len, self.max_context_len)
        return StepMetadata(positions=g.positions, slot_mapping=g.slots, query_lens=[], context_lens=[],
                            block_tables=[], tensors=tensors)

    def _forward(self, g: _Graph) -> torch.Tensor:
        hidden = decoder_forward(self.net, self.cache, g.embeds, self._meta(g), attention=self.attention)
        return self.net.head(hidden.index_select(0, g.sample_index))

    @torch.no_grad()
    def _capture(self, tokens: int, rows: int) -> _Graph:
        dec = self.net.config.decoder
        embed = self.net.language_model.embed_tokens.weight   # the head may be packed; the embedding never is
        g = _Graph(tokens, rows, self.max_blocks, dec.hidden_size, embed.dtype, embed.device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):   # warm up kernels (Triton autotuning, cuBLAS handles) outside the graph
                self._forward(g)
        torch.cuda.current_stream().wait_stream(stream)
        g.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g.graph, pool=self.pool):
            g.logits = self._forward(g)
        self.pool = g.graph.pool()
        return g

    def fits(self, tokens: int, meta: StepMetadata) -> bool:
        """Whether a step has a bucket's shape. Past the largest buckets (a step over 8192 tokens,
        a request holding more than MAX_CONTEXT tokens) it runs eagerly: capturing a graph for
        every odd size would grow without bound, and a wider block table fits no captured one."""
        t: AttentionTensors = meta.tensors
        return (tokens in self.token_buckets and t.cu_seqlens_q.numel() - 1 in self.row_buckets
                and t.block_table.shape[1] == self.max_blocks)

    @torch.no_grad()
    def run(self, embeds: torch.Tensor, meta: StepMetadata, sample_index: torch.Tensor) -> torch.Tensor:
        """embeds: [padded_tokens, hidden] -> logits [sampling rows, vocab]."""
        t: AttentionTensors = meta.tensors
        rows = t.cu_seqlens_q.numel() - 1
        key = (embeds.shape[0], rows)
        if key not in self.graphs:
            self.graphs[key] = self._capture(*key)
        g = self.graphs[key]
        g.embeds.copy_(embeds)
        g.positions.copy_(meta.positions)
        g.slots.copy_(meta.slot_mapping)
        g.cu_q.copy_(t.cu_seqlens_q)
        g.cu_k.copy_(t.cu_seqlens_k)
        g.table.copy_(t.block_table)
        n = sample_index.numel()
        g.sample_index.zero_()
        g.sample_index[:n].copy_(sample_index)
        g.graph.replay()
        return g.logits[:n]
