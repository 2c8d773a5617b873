"""The app as a client of a server (Settings > Engine: Server): queue, transcript, exports and the live window
work over the network, against a real server on loopback."""
from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("pytestqt")

from app import settings as S  # noqa: E402
from app.backend.remote_engine import ENGINE_MODE, SERVER_KEY, SERVER_URL  # noqa: E402
from app.settings import Settings  # noqa: E402
from app_fixtures import data_dir  # noqa: E402,F401  (autouse fixture, found by name)
from app_fixtures import real_engine_window  # noqa: E402
from server_fixtures import MODELS, RunningServer  # noqa: E402

import engine  # noqa: E402

WAIT_MS = 60_000
KEY = "app-key-0123"


@pytest.fixture(scope="module")
def server():
    running = RunningServer(engine.load(MODELS / "qwen3-asr-tiny", dtype="float32"), api_key=KEY)
    yield running
    running.stop()


@pytest.fixture
def window(qtbot, server, data_dir):
    values = {ENGINE_MODE: "server", SERVER_URL: server.url, SERVER_KEY: KEY}
    with real_engine_window(qtbot, values, wait_ms=WAIT_MS) as w:
        yield w


def test_queue_transcript_and_exports_over_the_network(window, qtbot, server, speech_wav, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(speech_wav, folder / "first.wav")
    (folder / "broken.wav").write_bytes(b"RIFF not really a wave file")
    window.add_paths([folder / "first.wav", folder / "broken.wav"])
    model = window.queue.model
    qtbot.waitUntil(lambda: all(i.state in ("done", "failed") for i in model.items), timeout=WAIT_MS)
    assert {i.name: i.state for i in model.items} == {"first.wav": "done", "broken.wav": "failed"}
    assert "not audio" in next(i for i in model.items if i.name == "broken.wav").error
    first = next(i for i in model.items if i.name == "first.wav")
    local = engine.load(MODELS / "qwen3-asr-tiny", dtype="float32").transcribe(str(speech_wav))
    assert first.transcript.text == local.text and [s.text for s in first.transcript.segments] == \
        [s.text for s in local.segments]
    window.queue_panel.table.selectRow(model.row_of(first.job_id))
    assert window.transcript_view.model.transcript.text == local.text
    from app.export.export_actions import CHOICES

    window.settings.set(S.EXPORT_DIR, str(tmp_path / "out"))
    written = window.export_selected(next(c for c in CHOICES if "JSON" in str(c)))
    assert json.loads(written[0].read_text("utf-8"))["text"] == local.text
    assert "qwen3-asr on server, " + server.url in window.model_label.text()
    assert window.client.model_chunk_seconds == 12      # the server model's own (its health says)


def test_live_window_streams_to_the_server(window, qtbot, speech_wav):
    from engine.audio.recorder import FileSource

    live = window.open_live_window()
    qtbot.addWidget(live)
    live.record_check.setChecked(False)
    assert live.start_source(FileSource(str(speech_wav), speed=4.0))
    qtbot.waitUntil(lambda: live.source is None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: live.stream_id is None, timeout=WAIT_MS)
    assert live.committed, "no committed segments from the server"
    assert live.committed_text() in live.captions.toPlainText()


def test_engine_page_saves_the_choice(qtbot, data_dir):
    from app.settings.settings_dialog import SettingsDialog

    settings = Settings()
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    assert dialog.engine_page.local_radio.isChecked() and not dialog.engine_page.url_edit.isEnabled()
    dialog.engine_page.server_radio.setChecked(True)
    dialog.engine_page.url_edit.setText("http://10.0.0.5:8000")
    dialog.engine_page.key_edit.setText("secret-key")
    dialog.accept()
    assert (settings.get(ENGINE_MODE), settings.get(SERVER_URL), settings.get(SERVER_KEY)) == \
        ("server", "http://10.0.0.5:8000", "secret-key")
