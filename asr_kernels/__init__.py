"""Fused Triton kernels for the decoder hot path, each with a plain torch reference.

Every kernel module holds three things: the Triton kernel, a launcher that checks the
layout the kernel assumes (raising ValueError, never asserting), and a torch reference
that states the math the launcher must reproduce. The engine calls the dispatching
function; it takes the Triton path only where that pays (CUDA) and the reference
elsewhere, so CPU-only machines never need a working Triton.
"""
from __future__ import annotations

import functools
import os

import torch

__all__ = ["triton_available", "interpret_mode", "switch_on"]

CPU_OPT_IN = "KERNELS_TRITON_ON_CPU"


@functools.lru_cache(maxsize=1)
def _triton_importable() -> bool:
    # Cached: importing triton is slow, and a missing or broken install (e.g. on macOS
    # or Windows) must not cost every call a fresh failed import.
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception:  # ImportError, or a broken install failing in its own way
        return False
    return True


def switch_on(name: str) -> bool:
    """An on/off environment switch that defaults to on: "1" (or unset) is on, "0" off, anything
    else a ValueError (a misspelt value must not silently pick a side)."""
    switch = os.environ.get(name, "1")
    if switch not in ("0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {switch!r}")
    return switch == "1"


def interpret_mode() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter.

    Triton reads TRITON_INTERPRET when it is imported, so setting it later has no
    effect on the kernels; it has to be set before anything imports triton.
    """
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def triton_available(device: torch.device | str) -> bool:
    """Whether the Triton kernels can run on tensors living on ``device``.

    True when triton imports and either the device is CUDA (where the fused kernels
    save memory round-trips) or both TRITON_INTERPRET=1 and KERNELS_TRITON_ON_CPU=1
    are set (tests route CPU tensors through the interpreted kernels). The test suite
    sets TRITON_INTERPRET for the whole session on machines without CUDA, so the
    opt-in keeps the engine on the fast torch references there.
    """
    device = torch.device(device)
    if device.type != "cuda" and not (interpret_mode() and os.environ.get(CPU_OPT_IN) == "1"):
        return False
    return _triton_importable()
