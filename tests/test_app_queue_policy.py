"""One queue policy for files: the app hands every queued file to the engine at once, in table order,
and the engine's file admission (engine.pipelines.admission) decides which start; the queue shows
what the engine reports. Cancel, remove, reorder, new options and a restart keep working.

The fake engine (tests/fake_engine.py) starts files with the engine's own FileAdmission; the
last test runs the real engine on the tiny checkpoint.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import fake_engine
from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: F401
from app.backend.engine_client import EngineClient

NAMES = [f"f{i}.wav" for i in range(6)]


def _files(tmp_path, names=NAMES):
    return [silent_wav(tmp_path, name) for name in names]


def _watch_running(window) -> list[int]:
    """How many rows show "running" after every change the queue reports."""
    seen = []
    window.queue.job_changed.connect(
        lambda _id: seen.append(sum(i.state == "running" for i in window.queue.model.items)))
    return seen


def test_six_files_go_to_the_engine_at_once_and_its_admission_starts_them(qtbot, client, tmp_path):
    w = open_main_window(qtbot, client, tmp_path, PARALLEL_FILES=3)
    engine = client.worker.engine
    engine.progress_per_step = 0.0             # nothing finishes until all six are queued
    running = _watch_running(w)
    ids = w.add_paths(_files(tmp_path))
    qtbot.waitUntil(lambda: len(engine.jobs) == 6, timeout=5000)    # the app holds nothing back
    assert engine.admission.max_decoding == 3, "Files at once is the engine's knob"
    engine.progress_per_step = 0.05
    model = w.queue.model
    qtbot.waitUntil(lambda: all(model.item(i).state == "done" for i in ids), timeout=10_000)
    assert engine.most_running == 3 and max(running) == 3
    assert engine.started_order == NAMES, "queue order"
    assert [model.item(i).transcript.text.split(".")[0] for i in ids] == [f"Fake f{i}" for i in range(6)]


def test_cancel_remove_and_reorder_waiting_files(qtbot, client, tmp_path):
    w = open_main_window(qtbot, client, tmp_path, PARALLEL_FILES=1)
    engine = client.worker.engine
    engine.progress_per_step = 0.0            # the first file keeps the only slot until we say
    a, b, c, d, e, f = w.add_paths(_files(tmp_path))
    model, queue = w.queue.model, w.queue
    qtbot.waitUntil(lambda: model.item(a).state == "running", timeout=5000)
    assert {model.item(i).state for i in (b, c, d, e, f)} == {"waiting"}
    queue.move([f], -1)
    queue.move([f], -1)
    queue.move([f], -1)
    queue.move([f], -1)                        # f before b: the engine starts it next
    assert [i.job_id for i in model.items] == [a, f, b, c, d, e]
    queue.cancel([b])                          # waiting: cancelled at once, and in the engine
    assert model.item(b).state == "cancelled"
    assert w.history.get_file(b).state == "cancelled"
    queue.remove([c])
    assert model.item(c) is None and w.history.get_file(c).state == "cancelled"
    qtbot.waitUntil(lambda: sum(j.state == "cancelled" for j in engine.jobs) == 2, timeout=5000)
    engine.progress_per_step = 0.25
    qtbot.waitUntil(lambda: all(model.item(i).state == "done" for i in (a, f, d, e)), timeout=10_000)
    assert engine.started_order == ["f0.wav", "f5.wav", "f3.wav", "f4.wav"]
    assert engine.most_running == 1
    queue.retry([b])                           # a cancelled file queues again and runs
    qtbot.waitUntil(lambda: model.item(b).state == "done", timeout=5000)
    assert engine.started_order[-1] == "f1.wav" and model.item(b).state == "done"


def test_a_waiting_files_new_options_replace_its_engine_job_in_its_place(qtbot, client, tmp_path):
    from app.queue.queue_model import COL_CONTEXT, COL_LANGUAGE

    w = open_main_window(qtbot, client, tmp_path, PARALLEL_FILES=1)
    engine = client.worker.engine
    engine.progress_per_step = 0.0
    a, b, c = w.add_paths(_files(tmp_path, NAMES[:3]))
    model = w.queue.model
    qtbot.waitUntil(lambda: model.item(a).state == "running", timeout=5000)
    assert model.setData(model.index(model.row_of(b), COL_LANGUAGE), "German")
    assert model.setData(model.index(model.row_of(b), COL_CONTEXT), "Ada Lovelace")
    engine.progress_per_step = 0.25
    qtbot.waitUntil(lambda: all(model.item(i).state == "done" for i in (a, b, c)), timeout=10_000)
    assert engine.started_order == ["f0.wav", "f1.wav", "f2.wav"], "b kept its place before c"
    ran = [j for j in engine.jobs if j.state == "done" and Path(j.source).name == "f1.wav"]
    assert [(j.language, j.context) for j in ran] == [("German", "Ada Lovelace")]
    assert model.item(b).transcript.language == "German"


def test_a_restart_hands_unfinished_files_to_the_engine_in_order(qtbot, client, tmp_path):
    w = open_main_window(qtbot, client, tmp_path, PARALLEL_FILES=1)
    engine = client.worker.engine
    engine.progress_per_step = 0.0              # nothing finishes before the app stops
    ids = w.add_paths(_files(tmp_path, NAMES[:3]))
    qtbot.waitUntil(lambda: w.queue.model.item(ids[0]).state == "running", timeout=5000)
    client.shutdown()                           # the app stops with three files unfinished

    assert [r.id for r in w.history.unfinished()] == ids
    again = EngineClient(fake_engine.load)
    try:
        w2 = open_main_window(qtbot, again, tmp_path, PARALLEL_FILES=1)
        items = w2.queue.model.items
        assert [i.job_id for i in items] == ids
        engine2 = again.worker.engine
        qtbot.waitUntil(lambda: all(i.state == "done" for i in items), timeout=10_000)
        assert engine2.started_order == NAMES[:3] and engine2.most_running == 1
    finally:
        again.shutdown()


def test_the_real_engine_starts_files_by_its_admission_in_queue_order(qtbot, tiny_model_dir, speech_wav,
                                                                      tmp_path):
    """The real engine behind the app: all four files are its jobs at once; its admission opens one
    at a time (Files at once = 1), in the table's order after a move; all are transcribed."""
    import threading

    from app import settings as S
    from app_fixtures import real_engine_window

    files = [Path(shutil.copy(speech_wav, tmp_path / f"r{i}.wav")) for i in range(4)]
    with real_engine_window(qtbot, {S.MODEL: str(tiny_model_dir), S.PARALLEL_FILES: 1}) as w:
        eng = w.client.worker.engine
        decisions = []                          # (files decoding, names started) at every admission
        admit, gate = eng.admission.admit, threading.Event()

        def recording(files_, hungry):
            if not gate.is_set():               # nothing starts until all four are queued and moved
                return []
            started = admit(files_, hungry)
            decisions.append((sum(f.decoding for f in files_), [Path(f.source).name for f in started]))
            return started

        eng.admission.admit = recording         # an instance attribute; it runs in the engine thread
        ids = w.add_paths(files)
        w.queue.move([ids[3]], -1)
        w.queue.move([ids[3]], -1)               # r3 before r1
        qtbot.waitUntil(lambda: len(eng.jobs) == 4, timeout=10_000)
        assert eng.admission.max_decoding == 1
        gate.set()
        model = w.queue.model
        qtbot.waitUntil(lambda: all(model.item(i).state in ("done", "failed") for i in ids), timeout=120_000)
        assert [model.item(i).state for i in ids] == ["done"] * 4, [model.item(i).error for i in ids]
    started = [name for _, names in decisions for name in names]
    assert started == ["r0.wav", "r3.wav", "r1.wav", "r2.wav"]
    assert all(decoding + len(names) <= 1 for decoding, names in decisions if names)
