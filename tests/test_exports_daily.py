"""Issue 35, exports: several formats at once, Export all, Save As, Markdown and DOCX with
speakers and times, and recordings' exports in Documents, never in the hidden data folder."""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("pytestqt")

from app_fixtures import client, data_dir, open_main_window, silent_wav  # noqa: E402,F401
from engine.text.types import Segment, Transcript  # noqa: E402


def meeting() -> Transcript:
    segs = [Segment(7.2, 11.0, "Shall we start?", speaker="S1"),
            Segment(11.0, 14.5, "Yes, the budget first.", speaker="S2"),
            Segment(14.5, 16.0, "Then the plan.", speaker="S2")]
    return Transcript(text=" ".join(s.text for s in segs), language="English", duration=16.0,
                      segments=segs, speaker_names={"S1": "Alice"})


def test_markdown_has_times_and_speaker_names():
    from engine.text.documents import to_markdown

    md = to_markdown(meeting(), "standup.wav")
    assert md.startswith("# standup.wav\n")
    assert "`[0:07]` **Alice:** Shall we start?" in md
    assert "`[0:11]` **S2:** Yes, the budget first." in md
    assert "`[0:14]` Then the plan." in md, "the same speaker is not named again"


def test_docx_has_times_and_speakers(tmp_path):
    import docx

    from engine.text.documents import export_document

    path = export_document(meeting(), "docx", tmp_path, "standup")
    assert path.name == "standup.docx"
    texts = [p.text for p in docx.Document(str(path)).paragraphs]
    assert texts[0] == "standup"
    assert "[0:07] Alice: Shall we start?" in texts


def test_docx_without_python_docx_says_what_to_install(tmp_path, monkeypatch):
    from engine.text.documents import export_document

    monkeypatch.setitem(sys.modules, "docx", None)
    with pytest.raises(ValueError, match="pip install"):
        export_document(meeting(), "docx", tmp_path, "standup")
    assert not list(tmp_path.iterdir()), "nothing half-written"


@pytest.fixture
def finished(qtbot, client, tmp_path):
    w = open_main_window(qtbot, client, tmp_path)
    audio = tmp_path / "audio"
    audio.mkdir()
    ids = w.add_paths([silent_wav(audio, "one.wav"), silent_wav(audio, "two.wav")])
    qtbot.waitUntil(lambda: all(w.queue.model.item(j).state == "done" for j in ids), timeout=5000)
    w.queue_panel.table.selectRow(0)
    return w, audio


def _tick(dialog, *keys):
    for check, choice in dialog.checks:
        check.setChecked(choice.key in keys)


def test_several_formats_at_once_and_export_all(finished, tmp_path):
    w, audio = finished
    dialog = w.open_export_dialog(run=False)
    _tick(dialog, "srt", "md", "docx")
    dialog.choose("selected")
    assert sorted(p.name for p in audio.iterdir() if p.suffix != ".wav") == \
        ["one.docx", "one.md", "one.srt"]
    out = tmp_path / "out"
    dialog = w.open_export_dialog(run=False)
    assert [c.key for c in dialog.choices()] == ["srt", "md", "docx"], "the ticks are remembered"
    dialog.elsewhere.setChecked(True)
    dialog.folder.setText(str(out))
    dialog.choose("all")
    assert sorted(p.name for p in out.iterdir()) == \
        ["one.docx", "one.md", "one.srt", "two.docx", "two.md", "two.srt"]
    # Ctrl+E exports in the ticked formats too.
    w.ask_replace = lambda paths: True
    assert sorted(p.name for p in w.export_in_chosen_formats()) == ["one.docx", "one.md", "one.srt"]


def test_save_as_names_the_file(finished, tmp_path):
    w, _ = finished
    w.ask_save_as = lambda stem: str(tmp_path / "kept" / "Minutes 2 December")
    dialog = w.open_export_dialog(run=False)
    _tick(dialog, "txt", "md")
    dialog.choose("save_as")
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == \
        ["Minutes 2 December.md", "Minutes 2 December.txt"]


def test_recordings_export_to_documents_not_the_data_folder(qtbot, client, tmp_path, monkeypatch,
                                                            data_dir):
    from app.export.export_actions import CHOICES
    from app.paths import recordings_dir

    documents = tmp_path / "Documents"
    documents.mkdir()
    monkeypatch.setattr("app.widgets.dialog_folders.documents_folder", lambda: str(documents))
    w = open_main_window(qtbot, client, tmp_path)
    recordings_dir().mkdir(parents=True, exist_ok=True)
    recording = silent_wav(recordings_dir(), "live-2026-12-02.wav")
    file_id = w.save_live_session("Hello.", [Segment(0.0, 0.5, "Hello.")], recording, 0.5)
    w.history_panel.transcript_selected.emit(file_id)
    written = w.export_selected(CHOICES[0])
    assert [p.parent for p in written] == [documents]
    assert not list(recordings_dir().glob("*.srt"))
    # A session kept without a recording (no file at all) goes there too.
    file_id = w.save_live_session("Hi.", [Segment(0.0, 0.5, "Hi.")], None, 0.5)
    w.history_panel.transcript_selected.emit(file_id)
    assert [p.parent for p in w.export_selected(CHOICES[0])] == [documents]
