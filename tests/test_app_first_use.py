"""What a new user met in the main window (issue 15), each checked as the user would notice it.

Fast: the engine is tests/fake_engine.py, which "transcribes" a file by naming it.
"""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtWidgets import QPlainTextEdit  # noqa: E402

from app import settings as S  # noqa: E402
from app.settings import Settings  # noqa: E402
from engine.text.types import Segment, Transcript  # noqa: E402
from app_fixtures import client, data_dir, silent_wav  # noqa: E402,F401  (fixtures, found by name)

WAIT_MS = 10_000




def _window(qtbot, client, tmp_path, model: bool = True):
    from app.history import History
    from app.main_window import MainWindow

    settings = Settings()
    settings.set(S.MODEL, str(tmp_path) if model else "")
    w = MainWindow(client, History(tmp_path / "h.db"), settings)
    qtbot.addWidget(w)
    w.show()
    if model:
        w.start()
        qtbot.waitUntil(lambda: client.model_dir != "", timeout=WAIT_MS)
    else:
        w.load_configured_model()  # what start() does, without opening the Models dialog
    return w


@pytest.fixture
def window(qtbot, client, tmp_path):
    return _window(qtbot, client, tmp_path)


_wav = silent_wav   # other app tests import it under this name


def _finish(window, qtbot, paths):
    ids = window.add_paths(paths)
    qtbot.waitUntil(lambda: all(window.queue.model.item(i).state == "done" for i in ids),
                    timeout=WAIT_MS)
    return ids


def test_a_172_character_file_name_never_widens_the_window(window, qtbot, tmp_path):
    name = ("a-very-long-recording-name-" * 7)[:168] + ".wav"
    assert len(name) == 172
    path = _wav(tmp_path, name)
    window.resize(900, 600)
    _finish(window, qtbot, [path])
    window.queue_panel.table.selectRow(0)
    qtbot.wait(50)
    assert window.transcript_view.title.full_text() == name
    assert window.minimumSizeHint().width() < 900 and window.minimumWidth() < 900
    assert window.width() <= 900
    window.resize(700, 500)
    qtbot.wait(50)
    assert window.width() == 700, "the window must still shrink with the long name shown"


def test_a_saved_geometry_wider_than_the_screen_is_fitted_to_it(qtbot, client, tmp_path):
    first = _window(qtbot, client, tmp_path)
    screen = first.screen().availableGeometry()
    first.setMinimumSize(0, 0)
    first.setGeometry(screen.left() - 300, screen.top(), screen.width() + 1500, screen.height() + 400)
    first.settings.set_raw("window/geometry", first.saveGeometry())
    first.settings.sync()
    first.settings.set(S.CONFIRM_QUIT, False)
    second = _window(qtbot, client, tmp_path)
    second.restore_geometry()
    assert second.width() <= screen.width() and second.height() <= screen.height()
    assert screen.contains(second.geometry().topLeft())


def test_without_a_model_files_wait_for_one_and_the_pane_says_so(qtbot, client, tmp_path):
    from app.main_window import WAITING_FOR_MODEL
    from app.queue.queue_view import progress_text

    w = _window(qtbot, client, tmp_path, model=False)
    ids = w.add_paths([_wav(tmp_path, "talk.wav")])
    w.queue_panel.table.selectRow(0)
    item = w.queue.model.item(ids[0])
    assert item.state == "waiting"       # in the engine's queue (held by the worker until a model loads)
    assert progress_text(item, w.queue.model.wait_text) == WAITING_FOR_MODEL
    view = w.transcript_view
    assert view.details.text() == WAITING_FOR_MODEL
    assert view.models_button.isVisibleTo(w)
    opened = []
    w.open_model_manager = lambda *a: opened.append(True)
    view.models_requested.disconnect()
    view.models_requested.connect(w.open_model_manager)
    view.models_button.click()
    assert opened


def test_quitting_while_transcribing_asks_and_the_next_start_says_what_resumed(
        qtbot, client, tmp_path):
    from app.main_window import MainWindow

    w = _window(qtbot, client, tmp_path, model=False)  # no model: the files stay unfinished
    w.add_paths([_wav(tmp_path, "one.wav"), _wav(tmp_path, "two.wav")])
    asked = []
    w.ask_quit = lambda n: (asked.append(n), (False, False))[1]
    assert not w.close() and w.isVisible() and asked == [2]
    w.ask_quit = lambda n: (asked.append(n), (True, True))[1]
    assert w.close() and asked == [2, 2]
    assert Settings().get(S.CONFIRM_QUIT) is False, "don't ask again was not remembered"

    again = MainWindow(client, w.history, Settings())
    qtbot.addWidget(again)
    again.ask_quit = lambda n: pytest.fail("asked although the user said not to")
    assert "2 unfinished files were resumed" in again.notice.label.text()
    assert not again.notice.isHidden()
    again.close()


def test_export_never_overwrites_without_asking_and_kinds_get_their_own_names(
        window, qtbot, tmp_path):
    from app.export.export_actions import CHOICES

    out = tmp_path / "out"
    window.settings.set(S.EXPORT_DIR, str(out))
    _finish(window, qtbot, [_wav(tmp_path, "talk.wav")])
    window.queue_panel.table.selectRow(0)
    by_label = {c.label: c for c in CHOICES}
    names = set()
    for choice in CHOICES:
        written = window.export_selected(choice)
        assert len(written) == 1
        names.add(written[0].name)
    assert len(names) == len(CHOICES), f"two export kinds share a file name: {sorted(names)}"
    assert {"talk.vtt", "talk.karaoke.vtt", "talk.txt", "talk.timestamps.txt"} <= names
    assert window.notice.action_button.text() == "Open folder"

    srt = out / "talk.srt"
    srt.write_text("my own subtitles")
    asked = []
    window.ask_replace = lambda paths: (asked.append(paths), False)[1]
    assert window.export_selected(by_label["SubRip subtitles (.srt)"]) == []
    assert srt.read_text() == "my own subtitles" and asked == [[srt]]
    window.ask_replace = lambda paths: True
    assert window.export_selected(by_label["SubRip subtitles (.srt)"]) == [srt]
    assert "Fake talk." in srt.read_text()


def test_search_counts_matches_not_rows(qtbot):
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView()
    qtbot.addWidget(view)
    text = " ".join(["the cat saw the dog"] * 5)  # "the" 10 times in one segment
    t = Transcript(text=text + " Then the end.", language="English", duration=9.0,
                   segments=[Segment(0.0, 5.0, text), Segment(5.0, 9.0, "Then the end.")])
    view.show_transcript(1, t, "x.wav", "x.wav")
    view.search.setText("the")
    assert view.match_label.text() == "1 of 12"   # every occurrence counts, not rows
    view.search.setText("dog")
    assert view.match_label.text() == "1 of 5"
    view.search.setText("zebra")
    assert view.match_label.text() == "No matches"


def test_rows_show_start_and_end_and_edit_in_a_multi_line_box(qtbot):
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView()
    qtbot.addWidget(view)
    t = Transcript(text="Hello there.", language="English", duration=70.0,
                   segments=[Segment(61.5, 64.25, "Hello there.")])
    view.show_transcript(1, t, "x.wav", "x.wav")
    cell = view.model.index(0, 0).data()
    assert cell == "~1:01–1:04"   # start–end on one line (issue 35), "~": estimated, no aligner ran
    editor = view.table.text_delegate.createEditor(view.table.viewport(), None, view.model.index(0, 1))
    assert isinstance(editor, QPlainTextEdit)
    view.table.text_delegate.setEditorData(editor, view.model.index(0, 1))
    editor.setPlainText("Hello  there,\nfriend.")
    view.table.text_delegate.setModelData(editor, view.model, view.model.index(0, 1))
    assert view.model.segments[0].text == "Hello there, friend."


def test_no_speech_is_said_in_words(qtbot):
    from app.queue.queue_model import QueueItem, QueueModel
    from app.transcript.transcript_view import NO_SPEECH, TranscriptView

    silent = Transcript(text="", language=None, duration=12.0, segments=[])
    view = TranscriptView()
    qtbot.addWidget(view)
    view.show_transcript(1, silent, "quiet.wav", "quiet.wav")
    assert view.stack.currentWidget() is view.placeholder
    assert view.placeholder.text() == NO_SPEECH
    model = QueueModel()
    model.add(QueueItem(1, "quiet.wav", state="done", transcript=silent))
    assert model.index(0, 4).data() == "No speech"


def test_queue_menu_and_buttons_offer_only_what_applies(window, qtbot, tmp_path):
    ids = _finish(window, qtbot, [_wav(tmp_path, "talk.wav")])
    window.queue_panel.table.selectRow(0)
    texts = [a.text() for a in window.queue_context_actions()]
    assert "Cancel" not in texts and "Retry" not in texts
    assert texts[:2] == ["Transcribe again", "Remove"] and "Export" in texts
    assert window.queue_panel.retry_button.text() == "Transcribe again"
    assert not window.queue_panel.cancel_button.isEnabled()
    window.queue_panel.retry_button.click()
    qtbot.waitUntil(lambda: window.queue.model.item(ids[0]).state == "done", timeout=WAIT_MS)
    assert window.history.get_transcript(ids[0]) is not None


def test_skipped_files_stay_said_until_dismissed(window, qtbot, tmp_path):
    folder = tmp_path / "drop"
    folder.mkdir()
    wav = _wav(folder, "talk.wav")
    notes = tmp_path / "notes.xyz"
    notes.write_text("not audio")
    _finish(window, qtbot, [wav, notes])
    qtbot.wait(100)
    assert "Skipped notes.xyz" in window.notice.label.text() and not window.notice.isHidden()
    window.notice.close_button.click()
    assert window.notice.isHidden()


def test_language_editor_is_wide_enough_for_its_entries(qtbot):
    from PySide6.QtCore import QRect
    from PySide6.QtWidgets import QStyleOptionViewItem

    from app.queue.queue_model import COL_LANGUAGE, QueueItem, QueueModel
    from app.queue.queue_view import QueueTable

    model = QueueModel()
    model.add(QueueItem(1, "talk.wav"))
    table = QueueTable(model)
    qtbot.addWidget(table)
    index = model.index(0, COL_LANGUAGE)
    delegate = table.itemDelegateForColumn(COL_LANGUAGE)
    editor = delegate.createEditor(table.viewport(), QStyleOptionViewItem(), index)
    option = QStyleOptionViewItem()
    option.rect = QRect(0, 0, 60, 30)   # a column narrower than "Detect automatically"
    delegate.updateEditorGeometry(editor, option, index)
    assert editor.width() >= editor.sizeHint().width() > 60


def test_model_loading_is_said_once_and_toolbar_and_help_are_complete(window):
    window._activity("Loading model tiny…")
    assert window.activity_label.full_text() == ""
    window._model_loading("/models/tiny")
    assert window.model_label.text() == "Loading tiny…"
    assert all(not a.icon().isNull() for a in (window.add_action, window.live_action,
                                                 window.models_action, window.settings_action))
    help_menu = [m for m in window.menuBar().actions() if m.text() == "&Help"][0].menu()
    assert len([a for a in help_menu.actions() if not a.isSeparator()]) >= 3


def test_seek_bar_and_time_belong_to_the_file_shown(qtbot):
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView()
    qtbot.addWidget(view)
    t = Transcript(text="Hi.", language="English", duration=83.0, segments=[Segment(0, 2, "Hi.")])
    view.show_transcript(1, t, "a.wav", "a.wav")
    assert view.seek.maximum() == 83000
    assert view.position_label.text() == "00:00.0 / 01:23.0"
    view.player._path = "other.wav"   # another file was playing
    view._position(42.0)
    assert view.position_label.text() == "00:00.0 / 01:23.0"
    view.player._path = "a.wav"
    view._position(42.0)
    assert view.position_label.text() == "00:42.0 / 01:23.0" and view.seek.value() == 42000


def test_a_live_session_lands_in_history_and_the_window_reopens_empty(window, qtbot):
    import numpy as np

    from engine.audio.recorder import FileSource

    live = window.open_live_window()
    assert not live.record_check.isChecked(), "recording must be opt-in"
    audio = (0.1 * np.sin(np.arange(int(3.5 * 16000)) / 5.0)).astype(np.float32)
    before = len(window.history.list_transcripts())
    assert live.start_source(FileSource(audio, speed=float("inf")))
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=WAIT_MS)
    records = window.history.list_transcripts()
    assert len(records) == before + 1
    saved = records[0].transcript
    assert saved.text == live.committed_text() == "second 1 second 2 second 3 the end"
    assert window.history_panel.list.count() == before + 1
    live.close()
    window.open_live_window()
    assert live.captions.toPlainText() == "" and live.committed_text() == ""


def test_inputs_have_friendly_names_and_a_lost_microphone_is_said_in_words():
    from engine.audio.microphone import InputDevice
    from app.live.live_window import describe_input_error, friendly_input_name

    default = InputDevice(0, "default", "ALSA", 44100.0, 2, True)
    usb = InputDevice(3, "USB Audio Device: Audio (hw:2,0)", "ALSA", 48000.0, 1, False)
    assert friendly_input_name(default) == "System microphone (default)"
    assert friendly_input_name(usb) == "USB Audio Device"

    class MicrophoneSource:  # named like the real one; describe_input_error reads the type name
        device = usb
        error = "Microphone 'USB' stopped: the audio stream ended unexpectedly (device unplugged)"

    assert describe_input_error(MicrophoneSource()).startswith("Microphone disconnected:")


def test_models_dialog_shows_the_model_in_use_sizes_and_deletes_downloads(qtbot, tmp_path):
    from app.models.model_manager import LAYOUTS_EXPLAINED, ModelManagerDialog
    from modelhub.downloads import default_model_dest

    def fake_download(repo_id, megabytes):
        folder = default_model_dest(repo_id)
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")
        (folder / "tokenizer.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"\0" * (megabytes * 1_000_000))
        return folder

    in_use = fake_download("Qwen/Qwen3-ASR-0.6B", 3)
    spare = fake_download("Qwen/Qwen3-ASR-1.7B", 5)
    dialog = ModelManagerDialog(str(in_use))
    qtbot.addWidget(dialog)
    assert dialog.in_use.text() == "In use now: Qwen/Qwen3-ASR-0.6B (downloaded)."
    rows = {dialog.list.topLevelItem(r).text(0): dialog.list.topLevelItem(r)
            for r in range(dialog.list.topLevelItemCount())}
    assert rows["Qwen/Qwen3-ASR-0.6B"].text(1) == "In use"
    assert rows["Qwen/Qwen3-ASR-0.6B"].text(2) == "3 MB"
    assert rows["Qwen/Qwen3-ASR-1.7B"].text(2) == "5 MB"
    dialog.list.setCurrentItem(rows["Qwen/Qwen3-ASR-0.6B"])
    assert not dialog.delete_button.isEnabled(), "the model in use cannot be deleted"
    dialog.list.setCurrentItem(rows["Qwen/Qwen3-ASR-1.7B"])
    assert dialog.delete_button.isEnabled()
    assert dialog.delete_selected(confirm=False) and not spare.exists()
    assert rows["Qwen/Qwen3-ASR-1.7B"].text(1) == "Not downloaded"
    assert "-hf" in LAYOUTS_EXPLAINED

    local = ModelManagerDialog(str(tmp_path / "my-model"))
    qtbot.addWidget(local)
    assert local.in_use.text() == f"In use now: the model folder {tmp_path / 'my-model'}"


def test_status_bar_labels_never_overlap(qtbot, client, tmp_path):
    """The activity ("Idle") was painted over "Model: … on cpu, float32" at the right edge."""
    w = _window(qtbot, client, tmp_path)
    w.resize(1320, 780)
    w._activity("Idle")
    w._model_loaded(str(tmp_path / "qwen3-asr-tiny"), "cpu, float32")
    for width in (1320, 900, 700):
        w.resize(width, 780)
        qtbot.wait(50)
        activity, model = w.activity_label.geometry(), w.model_label.geometry()
        assert activity.right() < model.left(), (width, activity, model)
        assert model.width() >= w.model_label.sizeHint().width() or width < 900, (width, model)
        shown = w.activity_label.elided_text()
        assert shown == "Idle" or width < 900, (width, shown)
    w._activity("Transcribing " + "a-very-long-file-name-" * 12 + ".wav")
    qtbot.wait(50)
    assert w.minimumSizeHint().width() < 900
    assert w.activity_label.geometry().right() < w.model_label.geometry().left()


def test_detected_language_is_shown_whole_in_the_queue(qtbot):
    """At the default width every row read "Engli…auto)"."""
    from app.queue.queue_model import COL_LANGUAGE, QueueItem, QueueModel
    from app.queue.queue_view import QueueTable

    model = QueueModel()
    model.add(QueueItem(1, "talk.wav"))
    table = QueueTable(model)
    qtbot.addWidget(table)
    metrics = table.fontMetrics()
    for text in ("English (auto)", "Portuguese (auto)", "Chinese (auto)"):
        assert table.columnWidth(COL_LANGUAGE) >= metrics.horizontalAdvance(text) + 12, text
