"""Hundreds of files at once through the real CLI: every good file finishes under `ulimit -n 256`,
and peak memory does not grow with the number of files queued.

Each run is a fresh process (tests/many_files.py): RLIMIT_NOFILE is set inside it and its
peak RSS is the kernel's own ru_maxrss. The checkpoint ends every transcript at once and
``--no-vad`` skips speech detection, so what runs is the queue itself: opening, decoding,
chunking and scheduling hundreds of files.
"""
from __future__ import annotations

import pytest

from many_files import quick_checkpoint, run_cli_measured, short_files

# Before files waited as paths, each queued 2-5 s file added ~0.4 MB to the peak (300 more:
# +123 MB; a 35 s file ~8 MB); now 300 more add ~14 MB, which is noise.
MAX_GROWTH_MB = 50


@pytest.fixture(scope="module")
def quick_model(tmp_path_factory):
    return quick_checkpoint(tmp_path_factory.mktemp("quick-asr"))


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    good = short_files(folder, 300, seed=3)
    (folder / "not_audio.wav").write_text("this is text, not audio\n")
    (folder / "empty.wav").write_bytes(b"")
    return good, [folder / "not_audio.wav", folder / "empty.wav"]


@pytest.fixture(scope="module")
def big_run(quick_model, clips, tmp_path_factory):
    """300 good files and two bad ones under RLIMIT_NOFILE 256."""
    good, bad = clips
    files = good[:150] + bad + good[150:]
    return run_cli_measured(files, quick_model, tmp_path_factory.mktemp("out-big"), nofile=256, extra=["--no-vad"])


def test_every_good_file_finishes_under_ulimit_256(big_run, clips):
    good, bad = clips
    assert big_run["written"] == {p.stem for p in good}
    errors = [line for line in big_run["stderr"] if line.startswith("error:")]
    assert len(errors) == 2 and all(any(p.name in e for p in bad) for e in errors), errors
    assert not any("open files" in line for line in big_run["stderr"])
    assert big_run["rc"] == 1     # the two bad files, and nothing else


def test_peak_memory_does_not_grow_with_the_queue(big_run, quick_model, clips, tmp_path_factory):
    good, _ = clips
    small = run_cli_measured(good[:75], quick_model, tmp_path_factory.mktemp("out-small"), extra=["--no-vad"])
    assert small["written"] == {p.stem for p in good[:75]}
    growth = big_run["maxrss_mb"] - small["maxrss_mb"]
    assert growth < MAX_GROWTH_MB, (f"peak RSS {small['maxrss_mb']:.0f} MB for 75 files, "
                                    f"{big_run['maxrss_mb']:.0f} MB for 302")
