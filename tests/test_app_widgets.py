"""Fast UI tests against tests/fake_engine.py: models, worker, widgets, dialogs."""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QObject, QPointF, Qt, QUrl, Signal  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402

from app import settings as S  # noqa: E402
from app.queue.file_collect import collect_audio_files, describe_refused  # noqa: E402
from app.queue.queue_model import QueueItem, QueueModel  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.transcript.transcript_model import TranscriptModel, word_spans  # noqa: E402
from engine.text.types import Segment, Transcript, Word  # noqa: E402
from app_fixtures import client, data_dir, open_main_window  # noqa: E402,F401  (fixtures, found by name)




@pytest.fixture
def window(qtbot, client, tmp_path):
    return open_main_window(qtbot, client, tmp_path)


def _wavs(tmp_path, *names):
    import numpy as np
    import soundfile as sf

    paths = []
    for name in names:
        path = tmp_path / name
        sf.write(str(path), np.zeros(8000, np.float32), 16000)
        paths.append(path)
    return paths


def test_collect_recurses_and_refuses(tmp_path):
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    _wavs(tmp_path, "sub/a.wav", "sub/deeper/b.wav")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    got = collect_audio_files([tmp_path / "sub", tmp_path / "notes.txt", tmp_path / "sub/a.wav",
                               tmp_path / "missing.wav", tmp_path / "empty"])
    assert [p.name for p in got.accepted] == ["a.wav", "b.wav"]
    reasons = dict((p.name, r) for p, r in got.refused)
    assert "not a supported" in reasons["notes.txt"]
    assert reasons["missing.wav"] == "no such file"
    assert "no audio" in reasons["empty"]
    assert describe_refused(got.refused, limit=1).endswith("and 2 more")


def test_queue_model_moves_only_waiting_rows_and_edits_options(qtbot):
    model = QueueModel()
    for i in range(3):
        model.add(QueueItem(i, f"/x/{i}.wav"))
    model.update(0, state="running")
    assert not model.move(1, -1)          # cannot jump over a running file
    assert model.move(1, +1)
    assert [i.job_id for i in model.items] == [0, 2, 1]
    edited = []
    model.options_edited.connect(lambda *a: edited.append(a))
    assert model.setData(model.index(2, 2), "German")
    assert model.setData(model.index(2, 3), "names: Ada")
    assert edited[-1] == (1, "German", "names: Ada")
    assert not model.flags(model.index(0, 2)) & Qt.ItemFlag.ItemIsEditable  # running: locked


def test_word_spans_and_transcript_model(qtbot):
    seg = Segment(1.0, 3.0, "Hello, big world.", [Word("Hello,", 1.0, 1.5), Word("missing", 1.5, 1.6),
                                                  Word("world.", 2.0, 3.0)])
    spans = word_spans(seg.text, seg.words)
    assert [(s.start, s.end, s.index) for s in spans] == [(0, 6, 0), (11, 17, 2)]
    model = TranscriptModel()
    model.set_transcript(7, Transcript("x", "English", 3.0, [seg]))
    assert model.locate(2.5) == (0, 2)
    assert model.locate(1.55) == (0, 1)
    assert model.set_playhead(0.2) == -1
    assert model.set_search("WORLD") == [0]
    edits = []
    model.segment_edited.connect(lambda *a: edits.append(a))
    assert model.setData(model.index(0, 1), "Hello, small world.")
    assert edits == [(7, 0, "Hello, small world.")]


def test_drop_queues_files_and_they_finish(window, qtbot, tmp_path):
    a, b = _wavs(tmp_path, "one.wav", "two.wav")
    (tmp_path / "readme.md").write_text("x")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in (a, b, tmp_path / "readme.md")])
    event = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime,
                       Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier)
    window.dropEvent(event)
    assert "readme.md" in window.notice.label.text()  # kept until dismissed (issue 15)
    items = window.queue.model.items
    assert [i.name for i in items] == ["one.wav", "two.wav"]
    qtbot.waitUntil(lambda: all(i.state == "done" for i in items), timeout=5000)
    assert window.transcript_view.model.segments[0].text == "Fake one."
    assert window.history_panel.file_ids() == [items[1].job_id, items[0].job_id]


def test_worker_survives_a_crashing_step(window, qtbot, tmp_path, client):
    a, b = _wavs(tmp_path, "a.wav", "b.wav")
    window.queue.parallel = 1
    engine = client.worker.engine
    engine.fail_next_step = RuntimeError("CUDA out of memory")
    engine.progress_per_step = 0.5
    ids = window.add_paths([a])
    qtbot.waitUntil(lambda: window.queue.model.item(ids[0]).state == "failed", timeout=5000)
    assert "a.wav" in window.queue.model.item(ids[0]).error
    assert "out of memory" in window.queue.model.item(ids[0]).error
    ids2 = window.add_paths([b])
    qtbot.waitUntil(lambda: window.queue.model.item(ids2[0]).state == "done", timeout=5000)
    window.queue.retry(ids)
    qtbot.waitUntil(lambda: window.queue.model.item(ids[0]).state == "done", timeout=5000)


def test_cancel_and_remove(window, qtbot, tmp_path, client):
    paths = _wavs(tmp_path, "a.wav", "b.wav", "c.wav")
    client.worker.engine.progress_per_step = 0.0  # never finishes (the fake steps ~20,000 times a second)
    window.queue.parallel = 1
    ids = window.add_paths(paths)
    model = window.queue.model
    qtbot.waitUntil(lambda: model.item(ids[0]).state == "running", timeout=5000)
    assert model.item(ids[1]).state == "waiting"
    window.queue.cancel([ids[0]])
    qtbot.waitUntil(lambda: model.item(ids[0]).state == "cancelled", timeout=5000)
    qtbot.waitUntil(lambda: model.item(ids[1]).state == "running", timeout=5000)
    window.queue.remove([ids[2]])
    assert model.item(ids[2]) is None
    assert window.history.get_file(ids[2]).state == "cancelled"
    assert window.history.get_file(ids[0]).state == "cancelled"


def test_settings_survive_restart(qtbot):
    first = Settings()
    first.set(S.LANGUAGE, "German")
    first.set(S.MAX_LINE_CHARS, 30)
    first.set(S.WORD_TIMESTAMPS, False)
    first.sync()
    del first
    again = Settings()
    assert again.get(S.LANGUAGE) == "German"
    assert again.get(S.MAX_LINE_CHARS) == 30
    assert again.get(S.WORD_TIMESTAMPS) is False
    assert again.cue_options().max_line_chars == 30


def test_settings_dialog_roundtrip(qtbot):
    from app.settings.settings_dialog import SettingsDialog

    settings = Settings()
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.template_edit.setText("{date}_{stem}.{ext}")
    dialog.lines_spin.setValue(1)
    dialog.theme_combo.setCurrentIndex(dialog.theme_combo.findData("dark"))
    dialog.accept()
    again = Settings()
    assert again.get(S.EXPORT_TEMPLATE) == "{date}_{stem}.{ext}"
    assert again.get(S.MAX_LINES) == 1 and again.get(S.THEME) == "dark"


def test_model_manager_offline_says_so(qtbot, monkeypatch, tiny_model_dir, tmp_path):
    from app.models.model_manager import ModelManagerDialog

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dialog = ModelManagerDialog(first_run=True)
    qtbot.addWidget(dialog)
    chosen = []
    dialog.model_chosen.connect(lambda *a: chosen.append(a))
    dialog.select(0)
    dialog.start_download()
    qtbot.waitUntil(lambda: "Cannot reach huggingface.co" in dialog.status.text(), timeout=5000)
    assert not dialog.use_folder(str(tmp_path))
    assert "does not hold a model" in dialog.status.text()
    assert dialog.use_folder(str(tiny_model_dir))
    assert chosen == [(str(tiny_model_dir), "asr")]


def test_export_and_edit_from_window(window, qtbot, tmp_path):
    from app.export.export_actions import CHOICES

    (a,) = _wavs(tmp_path, "talk.wav")
    window.settings.set(S.EXPORT_DIR, str(tmp_path / "out"))
    ids = window.add_paths([a])
    qtbot.waitUntil(lambda: window.queue.model.item(ids[0]).state == "done", timeout=5000)
    window.queue_panel.table.selectRow(0)
    view = window.transcript_view
    view.model.setData(view.model.index(0, 1), "Edited words.")
    assert window.history.get_transcript(ids[0]).segments[0].text == "Edited words."
    written = window.export_selected(CHOICES[0])
    assert written == [tmp_path / "out" / "talk.srt"]
    assert "Edited words." in written[0].read_text()


def test_about_and_player_degrade(qtbot):
    from app.widgets.about_dialog import AboutDialog
    from app.transcript.player import Player

    dialog = AboutDialog("tiny", "cpu")
    qtbot.addWidget(dialog)
    player = Player(backend="none")
    messages = []
    player.failed.connect(messages.append)
    assert not player.play("/x.wav", 1.0)
    assert "no sound output device" in messages[0]  # no hint at a package we do not install


def test_version_prints_without_window(capsys):
    from app.main import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("qwen3-asr-desktop ")


def test_drop_hint_shown_while_empty(window, qtbot):
    panel = window.queue_panel
    assert panel.stack.currentIndex() == 0
    window.queue.model.add(QueueItem(999, "/x.wav", state="done"))
    assert panel.stack.currentIndex() == 1


class StubPlayer(QObject):
    """Records play requests; stands in for audio output, which test machines lack."""

    position_changed = Signal(float)
    playing_changed = Signal(bool)
    failed = Signal(str)
    available, playing, unavailable_reason = True, False, ""

    def __init__(self):
        super().__init__()
        self.calls = []

    def play(self, path, start_s=0.0):
        self.calls.append((path, start_s))
        return True

    def stop(self):
        pass


def test_click_word_plays_from_it_and_playhead_highlights(qtbot):
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QStyleOptionViewItem

    from app.transcript.transcript_view import TranscriptView

    player = StubPlayer()
    view = TranscriptView(player=player)
    qtbot.addWidget(view)
    view.resize(700, 400)
    seg = Segment(1.0, 3.0, "alpha beta gamma", [Word("alpha", 1.0, 1.4), Word("beta", 1.5, 2.0),
                                                   Word("gamma", 2.1, 3.0)])
    view.show_transcript(5, Transcript("alpha beta gamma", "English", 3.0, [seg]), "/a.wav", "a.wav")
    view.show()
    qtbot.waitExposed(view)
    table, delegate = view.table, view.table.text_delegate
    index = view.model.index(0, 1)
    rect = table.visualRect(index)
    option = QStyleOptionViewItem()
    option.rect, option.font = rect, table.font()
    target = next(QPoint(x, rect.top() + 8) for x in range(rect.left(), rect.right())
                  if delegate.word_at(option, index, QPointF(x, rect.top() + 8)) == 2)
    qtbot.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=target)
    assert player.calls == [("/a.wav", 2.1)]
    player.position_changed.emit(1.6)
    assert view.model.playing == (0, 1)
    assert view.position_label.text() == "00:01.6 / 00:03.0"  # where, in how long


def test_live_window_with_fake_stream(client, qtbot, tmp_path, data_dir):
    import numpy as np
    import soundfile as sf

    from app.live.live_window import LiveWindow
    from engine.audio.recorder import FileSource

    client.load_model(str(tmp_path))
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=5000)
    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.record_check.setChecked(True)
    audio = (0.1 * np.sin(np.arange(int(3.5 * 16000)) / 5.0)).astype(np.float32)
    assert live.start_source(FileSource(audio, speed=float("inf")))
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=5000)
    assert live.committed_text() == "second 1 second 2 second 3 the end"
    assert live.captions.toPlainText().splitlines()[-2:] == ["0:02  second 3", "0:03  the end"]  # a line each
    recorded, rate = sf.read(str(live.recording_path))
    assert rate == 16000 and len(recorded) == len(audio)
    saved = live.save_text(tmp_path / "live.txt")
    assert saved.read_text() == "second 1 second 2 second 3 the end\n"
    live.font_spin.setValue(30)
    assert Settings().get(S.LIVE_FONT_SIZE) == 30


def test_live_window_tentative_is_lighter(client, qtbot):
    from app.backend.worker import CaptionEvent
    from app.live.live_window import TENTATIVE_COLOR, LiveWindow

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.stream_id = 3
    live._stream_captions(3, CaptionEvent(0, (Segment(0, 1, "Hello there."),), "and then"))
    html = live.captions.toHtml()
    assert "Hello there." in html and "and then" in html
    assert TENTATIVE_COLOR.lower() in html.lower() and "italic" in html


def test_search_match_stays_marked_on_a_playing_row(qtbot):
    """A row that plays without word times is tinted; the searched-for text stays yellow."""
    from PySide6.QtGui import QTextCursor
    from PySide6.QtWidgets import QStyleOptionViewItem

    from app.transcript.transcript_delegate import SEARCH_BACKGROUND
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView(player=StubPlayer())
    qtbot.addWidget(view)
    view.show_transcript(1, Transcript("alpha beta", "English", 2.0, [Segment(0.0, 2.0, "alpha beta")]),
                         "/a.wav", "a.wav")
    view.search.setText("beta")
    view.model.set_playhead(0.5)
    index = view.model.index(0, 1)
    option = QStyleOptionViewItem()
    option.font, option.palette = view.table.font(), view.table.palette()
    doc = view.table.text_delegate._document(option, index, 400)

    def background(at):
        cursor = QTextCursor(doc)
        cursor.setPosition(at + 1)
        return cursor.charFormat().background().color().name()

    assert background("alpha beta".index("beta")) == SEARCH_BACKGROUND
    assert background(0) != SEARCH_BACKGROUND  # the rest has only the playing tint


def test_transcript_pane_says_why_it_is_empty(qtbot):
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView(player=StubPlayer())
    qtbot.addWidget(view)
    assert view.stack.currentWidget() is view.placeholder
    assert "Select a file" in view.placeholder.text() and not view.search.isEnabled()
    view.show_transcript(2, None, "/b.wav", "b.wav", "Transcribing… 40%")
    assert view.stack.currentWidget() is view.placeholder
    assert "when the file is done" in view.placeholder.text()
    assert view.details.text() == "Transcribing… 40%"
    view.show_transcript(2, Transcript("hi", "", 1.0, [Segment(0.0, 1.0, "hi")]), "/b.wav", "b.wav")
    assert view.stack.currentWidget() is view.table and view.search.isEnabled()
    assert view.details.text().startswith("Language not detected")


def test_failed_file_pane_points_to_retry(window, qtbot):
    window.queue.model.add(QueueItem(998, "/bad.wav", state="failed", error="Cannot decode /bad.wav"))
    window.queue_panel.table.selectRow(0)
    view = window.transcript_view
    assert view.details.text() == "Cannot decode /bad.wav"
    assert "Retry" in view.placeholder.text()


def test_only_files_in_flight_get_a_progress_bar_text(qtbot):
    from app.queue.queue_view import progress_text

    running = QueueItem(1, "/a.wav", state="running", progress=0.4, eta=75.0)
    assert progress_text(running) == "40% · 1:15 left"
    # a file waiting in the engine's queue says only why nothing starts (no model yet)
    assert progress_text(QueueItem(2, "/b.wav", state="waiting"), "Loading the model…") == "Loading the model…"
    for state in ("waiting", "done", "failed", "cancelled"):  # the Status column says these
        assert progress_text(QueueItem(3, "/c.wav", state=state)) == ""


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_finished_states_are_coloured_readably(qapp, theme):
    from PySide6.QtGui import QColor

    from app.queue.queue_model import COL_STATUS
    from app.widgets.theme import apply_theme, dark_palette

    apply_theme(qapp, theme)
    try:
        model = QueueModel()
        base = dark_palette().color(dark_palette().ColorRole.Base) if theme == "dark" else QColor("white")
        for job, state in enumerate(("done", "failed", "cancelled")):
            model.add(QueueItem(job, "/a.wav", state=state))
            color = model.data(model.index(job, COL_STATUS), Qt.ItemDataRole.ForegroundRole)
            assert color is not None and _contrast(color, base) >= 4.5, (theme, state, color.name())
        model.add(QueueItem(9, "/b.wav", state="running"))
        assert model.data(model.index(3, COL_STATUS), Qt.ItemDataRole.ForegroundRole) is None
    finally:
        apply_theme(qapp, "light")


def _contrast(a, b) -> float:
    def lum(c):
        chans = [v / 255 for v in (c.red(), c.green(), c.blue())]
        chans = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in chans]
        return 0.2126 * chans[0] + 0.7152 * chans[1] + 0.0722 * chans[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_dark_theme_check_boxes_have_a_visible_box(qtbot, qapp):
    from PySide6.QtWidgets import QCheckBox

    from app.widgets.theme import apply_theme

    apply_theme(qapp, "dark")
    try:
        box = QCheckBox("Stay on top")
        qtbot.addWidget(box)
        box.show()
        qtbot.waitExposed(box)
        image = box.grab().toImage()
        window = box.palette().color(box.palette().ColorRole.Window)
        left_edge = [image.pixelColor(x, image.height() // 2) for x in range(0, 6)]
        assert max(c.lightness() for c in left_edge) > window.lightness() + 40
    finally:
        apply_theme(qapp, "light")


def test_live_window_without_microphone_offers_a_file(client, qtbot, monkeypatch):
    import engine.audio.microphone
    from app.live.live_window import FILE_ITEM, LiveWindow

    monkeypatch.setattr(engine.audio.microphone, "list_input_devices", lambda: [])
    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    assert live.device_combo.currentData() == FILE_ITEM
    assert not live.device_combo.model().item(0).isEnabled()  # "No microphone found"
    assert "No microphone found" in live.status.text()


def test_history_rows_show_length_and_never_scroll_sideways(qtbot):
    from app.history.history_panel import HistoryPanel

    panel = HistoryPanel()
    qtbot.addWidget(panel)
    panel.add(4, "/talks/long.wav", 1_700_000_000.0, Transcript("word " * 200, "English", 125.0, []))
    text = panel.list.item(0).text()
    assert text.startswith("long.wav\n") and " · 2:05 · word word" in text and text.endswith("…")
    assert panel.list.horizontalScrollBarPolicy() == Qt.ScrollBarPolicy.ScrollBarAlwaysOff
