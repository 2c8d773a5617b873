"""Past one machine: archive transcription on Ray Data and server replicas on Ray Serve.

Ray is an optional dependency (``pip install 'qwen3-asr-desktop[cluster]'``); nothing in
``engine`` imports it, and this package imports it only when a job starts, so
``import cluster`` works without Ray and says how to get it when Ray is needed.

    from cluster import transcribe_archive
    summary = transcribe_archive(["a.wav", "b.mp3"], "out/", model="models/asr-0.6b")

See ``cluster.archive`` (the Ray Data job) and ``cluster.serve`` (the Ray Serve deployment).
"""
from __future__ import annotations

from cluster.ray_import import RayMissing, require_ray

__all__ = ["ArchiveJob", "ArchiveOptions", "ArchiveSummary", "FileResult", "RayMissing", "require_ray",
           "transcribe_archive"]


def __getattr__(name):
    if name in ("ArchiveJob", "ArchiveOptions", "ArchiveSummary", "FileResult", "transcribe_archive"):
        from cluster import archive

        return getattr(archive, name)
    raise AttributeError(f"module 'cluster' has no attribute {name!r}")
