"""The padded attention metadata flash-attn, the Triton kernel and CUDA graphs use, and which attention runs where; on CPU."""
from __future__ import annotations

import pytest
import torch

from engine.serving.flash import attention_tensors


def test_padding_rows_have_no_queries_and_no_context():
    t = attention_tensors([5, 1, 1], [5, 40, 17], [[3], [0, 1], [2]], rows=8, max_blocks=4, device="cpu")
    assert t.cu_seqlens_q.tolist() == [0, 5, 6, 7, 7, 7, 7, 7, 7]
    assert t.cu_seqlens_k.tolist() == [0, 5, 45, 62, 62, 62, 62, 62, 62]
    assert t.block_table.shape == (8, 4)
    assert t.block_table[1, :2].tolist() == [0, 1] and t.block_table[4:].abs().sum() == 0
    assert t.cu_seqlens_q.dtype == torch.int32 and t.max_query_len == 5 and t.max_context_len == 40


def test_too_many_rows_or_blocks_is_an_error():
    with pytest.raises(ValueError, match="bucket"):
        attention_tensors([1] * 9, [1] * 9, [[0]] * 9, rows=8, max_blocks=2, device="cpu")
    with pytest.raises(ValueError, match="blocks"):
        attention_tensors([1], [1], [[0, 1, 2]], rows=8, max_blocks=2, device="cpu")


def test_attention_backend_choice(monkeypatch):
    import engine.serving.attention as attention

    cuda = torch.device("cuda")
    assert attention.attention_backend("cpu", torch.bfloat16) == "torch"
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: True)
    assert attention.attention_backend(cuda, torch.bfloat16) == "flash"
    assert attention.attention_backend(cuda, torch.float32) == "torch"   # flash-attn has no float32; parity mode
    monkeypatch.setattr(attention, "flash_attn_installed", lambda: False)
    monkeypatch.setattr(attention, "triton_available", lambda device: torch.device(device).type == "cuda")
    assert attention.attention_backend(cuda, torch.float16) == "triton"
    monkeypatch.setattr(attention, "triton_available", lambda device: False)
    assert attention.attention_backend(cuda, torch.bfloat16) == "torch"
    with pytest.raises(ValueError, match="backend"):
        attention.attention_function("xformers")


def test_graphs_replay_only_bucket_shapes():
    # Past the largest buckets (huge steps, a request longer than MAX_CONTEXT) a step runs
    # eagerly instead of capturing a graph for its odd shape.
    from engine.network.decoder import StepMetadata
    from engine.serving.cuda_graphs import CudaGraphRunner

    graphs = CudaGraphRunner(None, None, None, max_blocks=4, max_query_len=8, max_context_len=64,
                             token_buckets=(1, 2, 4, 8), row_buckets=(8, 16))

    def meta(rows, width):
        tensors = attention_tensors([1] * rows, [5] * rows, [[0]] * rows, rows=rows, max_blocks=width, device="cpu")
        return StepMetadata(torch.zeros(0), torch.zeros(0), [], [], [], tensors=tensors)

    assert graphs.fits(4, meta(8, 4))
    assert not graphs.fits(5, meta(8, 4))      # no such token bucket
    assert not graphs.fits(4, meta(12, 4))     # no such row bucket
    assert not graphs.fits(4, meta(8, 5))      # a block table wider than the captured one
