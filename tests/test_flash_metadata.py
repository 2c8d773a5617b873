"""The padded attention metadata flash-attn and CUDA graphs use, checked on CPU."""
from __future__ import annotations

import pytest
import torch

from engine.flash import attention_tensors


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
