"""Run a test as if on another CPU kind: ``on_platform(monkeypatch, native_bf16=False)``.

The network reads every hardware rule from ``engine.network.platform.current()``, so replacing
it checks each kind's path on any machine (the arithmetic stays this machine's)."""
from __future__ import annotations

import dataclasses

from engine.network import platform


def on_platform(monkeypatch, native_bf16: bool | None = None, **fields) -> platform.Platform:
    """Replace the detected platform for this test (monkeypatch restores it); returns it."""
    if native_bf16 is not None:
        fields.update(amx=False, avx512_bf16=native_bf16)
    fake = dataclasses.replace(platform.current(), **fields)
    monkeypatch.setattr(platform, "current", lambda: fake)
    return fake
