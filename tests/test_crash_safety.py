"""A crash inside an engine step fails that step's requests only.

The requests of the crashed step finish with an error that says what broke
(RequestOutput.error, Request.error, and FileJob.error naming the file); their
KV-cache blocks come back; and the engine goes on serving: the next requests
give exactly the tokens a freshly loaded engine gives. In the app, the file
being transcribed fails with a message, the window stays up and later files
complete.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import engine as engine_pkg
from engine.serving.request import RequestState

SR = 16000
WAIT_MS = 60_000
BOOM = "simulated worker crash"
# Small steps: a prompt needs several prefill steps, so a crash can land mid-prefill.
OPTIONS = dict(max_step_tokens=48, max_prefill_rows=2)


@pytest.fixture(scope="module")
def clips(speech_wav) -> list[np.ndarray]:
    audio, rate = sf.read(str(speech_wav), dtype="float32")
    assert rate == SR
    return [audio[: int(1.2 * SR)], audio[int(0.8 * SR): int(2.4 * SR)], audio[int(1.5 * SR):],
            audio[: int(2.0 * SR)]]


@pytest.fixture(scope="module")
def fresh(tiny_model_dir):
    """A freshly loaded engine that never sees a crash: the reference."""
    return engine_pkg.load(tiny_model_dir, **OPTIONS, dtype="float32")


@pytest.fixture(scope="module")
def fresh_tokens(fresh, clips) -> list[list[int]]:
    """What a freshly loaded engine generates for each clip, alone."""
    return [fresh.generate(clip)[0] for clip in clips]


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine_pkg.load(tiny_model_dir, **OPTIONS, dtype="float32")


def _crash_once(monkeypatch, obj, name: str, after: int = 0, exc=None):
    """``obj.name`` raises once, on its (after+1)-th call, then behaves again."""
    real = getattr(obj, name)
    calls = {"n": 0, "crashed": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == after + 1:
            calls["crashed"] += 1
            raise exc or RuntimeError(BOOM)
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, name, flaky)
    return calls


def _all_blocks_free(e) -> bool:
    return e.cache.allocator.num_free == e.cache.allocator.num_blocks


def _run_idle(e, limit: int = 5000) -> list:
    outputs = []
    for _ in range(limit):
        if not e.has_work():
            return outputs
        outputs += e.step()
    raise AssertionError("the engine never went idle")


@pytest.mark.parametrize("where, after", [("runner.run", 0), ("runner.run", 3), ("scheduler.postprocess", 2)],
                         ids=["run-step-1", "run-step-4", "postprocess-step-3"])
def test_crashed_step_fails_its_requests_and_the_engine_recovers(eng, clips, fresh_tokens, monkeypatch,
                                                                  where, after):
    owner, name = where.split(".")
    calls = _crash_once(monkeypatch, getattr(eng, owner), name, after=after)
    first = [eng.submit(clips[0]), eng.submit(clips[1])]
    outputs = _run_idle(eng)
    assert calls["crashed"] == 1
    errors = [o for o in outputs if o.error]
    assert errors, "the crashed step reported nothing"
    crashed = {o.request.id for o in errors}
    for out in errors:
        assert out.finished and BOOM in out.error and "engine step failed" in out.error
        assert out.request.error == out.error
        assert out.request.finish_reason == "error" and out.request.state is RequestState.FINISHED
    for req in first:
        assert req.finished
        if req.id not in crashed:   # not in the crashed step: it was served normally
            assert req.error is None
    assert _all_blocks_free(eng)
    assert not eng.scheduler.running and not eng.scheduler.waiting and eng.core.open_requests == 0

    # The same engine, afterwards: token for token what a fresh engine gives.
    again = [eng.submit(clip) for clip in clips]
    _run_idle(eng)
    assert [list(r.token_ids) for r in again] == fresh_tokens
    assert all(r.error is None for r in again)
    assert _all_blocks_free(eng)


def test_crash_with_decoders_running_keeps_finished_and_waiting_requests(eng, clips, fresh_tokens,
                                                                         monkeypatch):
    """Requests that were not in the crashed step (already finished, or still waiting for a
    row) are untouched: the finished keep their tokens, the waiting ones still run."""
    done = eng.submit(clips[0])
    _run_idle(eng)
    assert list(done.token_ids) == fresh_tokens[0]
    running = eng.submit(clips[1])
    while not running.token_ids:   # into decode
        eng.step()
    waiting = eng.submit(clips[2])   # arrives after the crash is armed; not in the crashed step
    calls = _crash_once(monkeypatch, eng.runner, "run")
    outputs = eng.step()           # the crash: running (decode) + waiting (first prefill chunk)
    assert calls["crashed"] == 1
    failed = {o.request.id for o in outputs if o.error}
    assert running.id in failed and running.finished and BOOM in running.error
    late = eng.submit(clips[3])
    _run_idle(eng)
    assert list(done.token_ids) == fresh_tokens[0] and done.error is None
    if waiting.id not in failed:
        assert list(waiting.token_ids) == fresh_tokens[2]
    assert list(late.token_ids) == fresh_tokens[3] and late.error is None
    assert _all_blocks_free(eng)


def test_crash_fails_the_file_job_with_a_clear_error_and_the_next_file_is_exact(
        eng, fresh, speech_wav, tmp_path, monkeypatch):
    expected = fresh.transcribe(str(speech_wav)).text
    e = eng
    victim = Path(shutil.copy(speech_wav, tmp_path / "victim file.wav"))
    calls = _crash_once(monkeypatch, e.runner, "run", after=1)
    job = e.submit_file(str(victim))
    _run_idle(e)
    assert calls["crashed"] == 1
    assert job.state == "failed"
    assert str(victim) in job.error and "engine step failed" in job.error and BOOM in job.error
    assert _all_blocks_free(e)
    # Later files on the same engine are transcribed exactly as by a fresh one.
    later = e.submit_file(str(speech_wav))
    _run_idle(e)
    assert later.state == "done", later.error
    assert later.transcript.text == expected
    assert _all_blocks_free(e)


# --- the app ------------------------------------------------------------------------------

@pytest.fixture
def window(qtbot, tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("pytestqt")
    from app import settings as S
    from app_fixtures import real_engine_window

    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(tmp_path / "data"))
    with real_engine_window(qtbot, {S.MODEL: str(tiny_model_dir), S.PARALLEL_FILES: 1}, wait_ms=WAIT_MS) as w:
        yield w


def test_app_survives_engine_crashes(window, qtbot, speech_wav, tmp_path, monkeypatch):
    worker = window.client.worker
    eng = worker.engine       # lives in the engine thread; idle now, so patching is safe
    model = window.queue.model
    files = {n: Path(shutil.copy(speech_wav, tmp_path / f"{n}.wav")) for n in ("a", "b", "c", "d")}

    def finished(job_id):
        return lambda: model.item(job_id).state in ("done", "failed", "cancelled")

    # 1. The model crashes inside a step (the engine catches it and fails the rows).
    calls = _crash_once(monkeypatch, eng.runner, "run")
    [a] = window.add_paths([files["a"]])
    qtbot.waitUntil(finished(a), timeout=WAIT_MS)
    item = model.item(a)
    assert calls["crashed"] == 1
    assert item.state == "failed" and "a.wav" in item.error and BOOM in item.error
    assert window.history.get_file(a).state == "failed"
    assert window.isVisible()
    [b] = window.add_paths([files["b"]])
    qtbot.waitUntil(finished(b), timeout=WAIT_MS)
    assert model.item(b).state == "done", model.item(b).error
    qtbot.waitUntil(lambda: not eng.has_work(), timeout=WAIT_MS)
    assert _all_blocks_free(eng)

    # 2. The whole step raises (a bug outside the model): the worker fails the running file.
    calls = _crash_once(monkeypatch, eng, "step", after=1)
    [c] = window.add_paths([files["c"]])
    qtbot.waitUntil(finished(c), timeout=WAIT_MS)
    assert calls["crashed"] == 1
    item = model.item(c)
    assert item.state == "failed" and "c.wav" in item.error and BOOM in item.error, item.error
    assert window.isVisible()
    [d] = window.add_paths([files["d"]])
    qtbot.waitUntil(finished(d), timeout=WAIT_MS)
    assert model.item(d).state == "done", model.item(d).error
    assert model.item(d).transcript.text == model.item(b).transcript.text
    qtbot.waitUntil(lambda: not eng.has_work(), timeout=WAIT_MS)
    assert _all_blocks_free(eng)
    assert window.isVisible() and worker.engine is eng
