"""Issue 35, the CLI's progress and time left: a file's progress rises with the tokens its chunks
decode (not in one jump when its batch of chunks finishes), never goes backwards, and the time
left the bar shows moves by a bounded amount between two redraws."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cli.eta import MIN_PROGRESS, STEP_S, STEP_SHARE, CliEta, clock
from engine.pipelines.job_progress import CHUNK_CAP, ProgressMeter, chunk_fraction

REPO = Path(__file__).resolve().parent.parent
TRAINED = REPO / "tests" / "models" / "qwen3-asr-tiny"


@pytest.fixture(scope="module")
def stepped_progress(tmp_path_factory):
    """The progress of a multi-chunk file read after every engine step: (step, progress) pairs."""
    import soundfile as sf

    import engine
    from conftest import espeak_wav

    folder = tmp_path_factory.mktemp("progress")
    texts = ["The quick brown fox jumps over the lazy dog.", "We will walk to the park after lunch.",
             "My sister bought a new car last week.", "The children are playing in the garden."]
    gap = np.zeros(8000, np.float32)
    parts = []
    for i, text in enumerate(texts * 2):
        parts += [sf.read(str(espeak_wav(folder / f"s{i}.wav", text)), dtype="float32")[0], gap]
    audio = np.concatenate(parts)
    eng = engine.load(TRAINED, device="cpu", dtype="float32")
    job = eng.submit_file(audio, max_chunk_seconds=6)
    seen = []
    for step in range(20_000):
        if job.finished:
            break
        eng.step()
        seen.append(job.progress)
    assert job.state == "done", job.error
    return seen, len(audio) / 16000


def test_progress_rises_in_many_steps_and_never_back(stepped_progress):
    seen, seconds = stepped_progress
    assert all(b >= a for a, b in zip(seen, seen[1:])), "progress went backwards"
    distinct = sorted(set(round(p, 4) for p in seen))
    assert len(distinct) >= 20, f"only {len(distinct)} distinct values: {distinct}"
    # the old count moved at chunk ends only: 10% for the audio read, then one jump per finished
    # chunk (the file's chunks run as one batch: 10% to 100% at once). Here, after the first step
    # that moves (which in the tiny model takes the whole file and its chunks' audio in one go,
    # once its reader thread has read it), no step adds more than a sixth of the bar
    moved = next(i for i, p in enumerate(seen) if p > 0)
    biggest = max(b - a for a, b in zip(seen[moved:-1], seen[moved + 1:]))
    assert biggest <= 1 / 6, f"a jump of {biggest:.0%} in one step ({seconds:.0f} s of audio): {seen}"
    assert seen[0] < 0.4
    assert seen[-1] == 1.0


def test_eta_moves_boundedly_between_redraws(stepped_progress):
    """Redraws one (made-up) second apart over the file's real progress sequence."""
    seen, _ = stepped_progress
    eta, shown = CliEta(), []
    for t, p in enumerate(seen):
        shown.append((float(t), eta.update(float(t), p)))
    known = [(t, s) for t, s in shown if s is not None and seen[int(t)] < 1.0]   # while it runs
    assert known, "no time left was ever shown"
    assert all(s is None for t, s in shown if seen[int(t)] < MIN_PROGRESS)   # not before it means something
    for (t0, a), (t1, b) in zip(known, known[1:]):
        expected = max(0.0, a - (t1 - t0))
        assert abs(b - expected) <= STEP_S + STEP_SHARE * expected + 1e-9, (t0, a, t1, b)
    assert eta.update(len(seen), 1.0) == 0.0


def test_eta_follows_a_slower_rate_without_jumping():
    eta, t, p, out = CliEta(), 0.0, 0.0, []
    while p < 1.0:     # 1% a second, then 0.2% a second from the middle on
        p = min(1.0, p + (0.01 if p < 0.5 else 0.002))
        t += 1.0
        out.append(eta.update(t, p))
    values = [v for v in out if v is not None]
    assert max(abs(b - a) for a, b in zip(values, values[1:])) <= STEP_S + STEP_SHARE * max(values) + 1.0
    assert clock(None) == "--:--" and clock(65) == "1:05" and clock(7389) == "2:03:09"


def test_chunk_in_flight_counts_by_tokens_and_stays_below_its_end():
    class Req:
        prompt_ids, num_cached, token_ids = [0] * 100, 0, []

    req, meter = Req(), ProgressMeter()
    values = [chunk_fraction(req, 5.0)]
    req.num_cached = 100
    for n in range(200):           # far more tokens than 5 s of speech needs: capped, still rising
        req.token_ids = [1] * n
        values.append(chunk_fraction(req, 5.0))
    assert all(b >= a for a, b in zip(values, values[1:])) and values[-1] == CHUNK_CAP
    assert meter.value(1000, 1000, 0, [(1000, 5.0, req)]) < 1.0
    assert meter.value(2000, 2000, 0, [(1000, 5.0, req)]) == meter.value(1000, 1000, 0, [(1000, 5.0, req)])


def test_cli_bar_shows_no_time_left_until_it_means_something(monkeypatch):
    import io
    import sys

    import cli.main as cli_main

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term, now = Terminal(), [100.0]
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(cli_main.time, "monotonic", lambda: now[0])
    bar = cli_main.ProgressBar(1, True)
    for done in (0.0, 0.1, 0.1, 0.2, 0.3, 0.4, 0.5):
        bar.show(done, "talk.wav")
        now[0] += 2.0
    lines = term.getvalue().split("\r")[1:]
    assert "eta   --:--" in lines[0] and "eta   --:--" in lines[2]      # start-up, then too little to go on
    assert lines[-1].strip().startswith("[###############") and "eta    0:" in lines[-1], lines[-1]
