"""Importing Ray lazily, with an error that says how to install it."""
from __future__ import annotations

INSTALL_HINT = "pip install 'qwen3-asr-desktop[cluster]'  (or: pip install 'ray[data,serve]>=2.9')"


class RayMissing(ImportError):
    """Ray (or the part of it a job needs) is not installed."""


def require_ray(part: str = "data"):
    """The ``ray`` module, after checking that ``ray.<part>`` imports; RayMissing otherwise."""
    try:
        import ray
        if part:
            __import__(f"ray.{part}")
    except ImportError as exc:
        what = f"ray[{part}]" if part else "ray"
        raise RayMissing(f"running on Ray needs {what}, which is not installed ({exc.name or exc}); "
                         f"install it with: {INSTALL_HINT}") from exc
    return ray
