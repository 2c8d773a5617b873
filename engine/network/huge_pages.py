"""Decoder weights moved onto 2 MB pages after load (Linux transparent huge pages).

A decode step reads every projection weight once, about 1.2 GB in bfloat16 for the 0.6B. On 4 KB
pages that walk touches 300,000 page-table entries a step; on 2 MB pages, 600. Turning huge pages
on for every allocation (torch's ``THP_MEM_ALLOC_ENABLE=1``) also hands each big activation fresh
2 MB pages to zero, which costs a queue more than the weights gain, so only the weights move:
``madvise(MADV_COLLAPSE)`` (Linux 6.1+) over each weight's whole 2 MB pages, after load, in a
background thread at low priority (the kernel copies the pages while the engine runs, and the
contents never change). Where the machine's administrator turned
huge pages off (``/sys/kernel/mm/transparent_hugepage/enabled`` says ``[never]``) nothing is asked,
by choice: MADV_COLLAPSE would still work. The kernel refuses ranges it cannot move (a kernel
before 6.1, a weight still mapped from its checkpoint file): those stay, and ``CollapseResult``
says how much and why. Figures: tests/bench/RESULTS.md.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from asr_kernels import switch_on

MADV_COLLAPSE = 25
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")
SWITCH = "QWEN3_ASR_HUGE_PAGES"     # "0": never collapse, "1": the default (the EngineConfig knob's None)


def _huge_page_size(path: Path = Path("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")) -> int:
    """The kernel's huge page: 2 MB on x86-64, 32 or 512 MB on arm64 kernels of 16 or 64 KB pages."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return 2 << 20


HUGE_PAGE = _huge_page_size()


@dataclass
class CollapseResult:
    """What a collapse did: bytes now on huge pages, bytes asked for, bytes the kernel refused or
    had no free huge page for (they stay on small pages), and why, where nothing was asked or some
    were refused."""

    collapsed: int = 0
    asked: int = 0
    refused: int = 0
    reason: str | None = None


def thp_mode(setting: Path = THP_SETTING) -> str | None:
    """The kernel's transparent huge page mode (always, madvise, never), None where unreadable."""
    try:
        text = setting.read_text()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def wanted(knob: bool | None) -> bool:
    """The EngineConfig knob: None means on, unless ``QWEN3_ASR_HUGE_PAGES=0``."""
    return knob if knob is not None else switch_on(SWITCH)


def tensor_range(t: torch.Tensor) -> tuple[int, int] | None:
    """(address, bytes) of a CPU tensor's memory, oneDNN's opaque tensors included; None otherwise."""
    if t.device.type != "cpu":
        return None
    if t.layout == torch._mkldnn:
        return torch.ops.mkldnn.data_ptr(t), torch.ops.mkldnn._nbytes(t)
    if t.layout == torch.strided:
        return t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
    return None


def whole_pages(address: int, size: int) -> tuple[int, int]:
    """The huge pages lying wholly inside [address, address + size): (start, length), maybe 0 long."""
    start = -(-address // HUGE_PAGE) * HUGE_PAGE
    end = (address + size) // HUGE_PAGE * HUGE_PAGE
    return start, max(0, end - start)


def collapse(ranges: list[tuple[int, int]], mode: str | None = None) -> CollapseResult:
    """MADV_COLLAPSE over the whole huge pages of each (address, bytes) range."""
    pages = [whole_pages(a, n) for a, n in ranges]
    result = CollapseResult(asked=sum(n for _, n in pages))
    mode = thp_mode() if mode is None else mode
    if not sys.platform.startswith("linux"):
        result.reason = "not Linux"
        return result
    if mode in (None, "never"):
        result.reason = f"transparent huge pages are {mode or 'not available'} here"
        return result
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    errors: dict[int, int] = {}
    for start, length in pages:
        if not length:
            continue
        if libc.madvise(start, length, MADV_COLLAPSE) == 0:
            result.collapsed += length
            continue
        # EINVAL: a kernel before 6.1, or memory it cannot move (a file's pages); EAGAIN: no free
        # huge page right now; ENOMEM: a memory limit. Each range on its own: the rest may still go.
        err = ctypes.get_errno()
        errors[err] = errors.get(err, 0) + length
        result.refused += length
    if errors:
        said = {errno.EINVAL: "not movable here (MADV_COLLAPSE needs Linux 6.1+; file-mapped weights stay)",
                errno.EAGAIN: "no free huge page at the time"}
        result.reason = "; ".join(f"{n / 2 ** 20:.0f} MiB {said.get(e, os.strerror(e))}" for e, n in errors.items())
    return result


class BackgroundCollapse:
    """``collapse`` on its own daemon thread; holds ``owner`` (the network) until done."""

    def __init__(self, tensors: list[torch.Tensor], owner: object = None):
        self._owner, self._tensors = owner, tensors
        self.result: CollapseResult | None = None
        self._thread = threading.Thread(target=self._run, name="weights-to-huge-pages", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            try:   # below the engine's threads: on a machine of few cores the first request goes first
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
            except (AttributeError, OSError):
                pass
            self.result = collapse([r for r in map(tensor_range, self._tensors) if r is not None])
        except Exception as e:  # placement only: never worth failing an engine for
            self.result = CollapseResult(reason=f"{type(e).__name__}: {e}")
        finally:
            self._owner = self._tensors = None

    def wait(self, timeout: float | None = None) -> CollapseResult | None:
        self._thread.join(timeout)
        return self.result


__all__ = ["CollapseResult", "BackgroundCollapse", "collapse", "thp_mode", "tensor_range", "whole_pages", "wanted"]
