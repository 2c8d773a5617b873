"""transformers as the reference our engine must match, one clip at a time."""
from __future__ import annotations

import functools

import numpy as np
import torch


@functools.lru_cache(maxsize=4)
def load_reference(model_dir: str, aligner: bool = False):
    from transformers import (
        AutoProcessor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRForTokenClassification,
    )

    cls = Qwen3ASRForTokenClassification if aligner else Qwen3ASRForConditionalGeneration
    model = cls.from_pretrained(model_dir, dtype=torch.float32).eval()
    processor = AutoProcessor.from_pretrained(model_dir)
    return model, processor


def reference_inputs(model_dir: str, audio: np.ndarray, *, language=None, context=""):
    _, processor = load_reference(str(model_dir))
    # No context is no system message, as a caller of transformers writes it (prompt=None).
    return processor.apply_transcription_request(audio=[audio], language=language, prompt=context or None)


@torch.no_grad()
def reference_generate(model_dir, audio: np.ndarray, *, language=None, context="", max_new_tokens=32):
    """Greedy token ids transformers generates for one clip, up to and including the end token."""
    model, _ = load_reference(str(model_dir))
    inputs = reference_inputs(model_dir, audio, language=language, context=context)
    out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens)
    return out[0, inputs["input_ids"].shape[1]:].tolist()
