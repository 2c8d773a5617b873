"""Issue 35: a finished file's language can be changed in the queue, which transcribes it
again in that language (the "No speech… try another language" hint is no dead end)."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401


def test_changing_a_finished_files_language_runs_it_again(qtbot, client, tmp_path):
    from app.queue.queue_model import COL_LANGUAGE

    w = open_main_window(qtbot, client, tmp_path)
    (job,) = w.add_paths([silent_wav(tmp_path, "talk.wav")])
    model = w.queue.model
    qtbot.waitUntil(lambda: model.item(job).state == "done", timeout=5000)
    assert model.item(job).transcript.language == "English"
    index = model.index(model.row_of(job), COL_LANGUAGE)
    assert model.flags(index) & Qt.ItemFlag.ItemIsEditable
    assert model.setData(index, "German")
    qtbot.waitUntil(lambda: model.item(job).state == "done" and
                    model.item(job).transcript.language == "German", timeout=5000)
    assert w.history.get_file(job).language == "German", "kept for the next run too"
    assert not model.setData(index, "German"), "the same language again does nothing"
