"""The app's speaker column, colours, rename, merge, per-segment change and search by speaker."""
from __future__ import annotations

from engine.text.types import Segment, Transcript, Word


def _transcript():
    segs = [Segment(0.0, 1.0, "Hello there.", [Word("Hello", 0.0, 0.4, "S1"), Word("there.", 0.5, 1.0, "S1")],
                    speaker="S1"),
            Segment(1.2, 2.0, "Good morning.", speaker="S2"),
            Segment(2.2, 3.0, "How are you?", speaker="S1")]
    return Transcript("Hello there. Good morning. How are you?", "English", 3.0, segs)


def test_speaker_column_rename_merge_and_search(qtbot):
    from app.transcript.transcript_model import COL_SPEAKER
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView()
    qtbot.addWidget(view)
    edits = []
    view.speakers_edited.connect(edits.append)
    view.show_transcript(7, _transcript(), "", "talk.wav")
    model = view.model
    assert not view.table.isColumnHidden(COL_SPEAKER)
    assert [model.index(r, COL_SPEAKER).data() for r in range(3)] == ["S1", "S2", "S1"]
    colours = [model.index(r, COL_SPEAKER).data(8).name() for r in range(3)]   # BackgroundRole
    assert colours[0] == colours[2] != colours[1]

    view.speakers.list.setCurrentRow(0)
    view.speakers.rename("Alice")
    assert [model.index(r, COL_SPEAKER).data() for r in range(3)] == ["Alice", "S2", "Alice"]
    assert edits == [7] and model.transcript.speaker_names == {"S1": "Alice"}
    assert model.set_search("alice") == [0, 2] and model.match_count() == 2

    assert model.setData(model.index(1, COL_SPEAKER), "Alice")          # one segment to another speaker
    assert model.transcript.segments[1].speaker == "S1" and edits == [7, 7]
    assert model.setData(model.index(2, COL_SPEAKER), "Carol")          # a new name: a new speaker
    assert model.transcript.segments[2].speaker == "S2"
    assert model.transcript.speaker_names["S2"] == "Carol"

    view.speakers.list.setCurrentRow(1)                                # merge Carol into Alice
    view.speakers.merge("S1")
    assert {s.speaker for s in model.transcript.segments} == {"S1"} and len(edits) == 4


def test_no_speaker_column_without_speakers(qtbot):
    from app.transcript.transcript_model import COL_SPEAKER
    from app.transcript.transcript_view import TranscriptView

    view = TranscriptView()
    qtbot.addWidget(view)
    view.show_transcript(1, Transcript("Hi.", "English", 1.0, [Segment(0, 1, "Hi.")]), "", "a.wav")
    assert view.table.isColumnHidden(COL_SPEAKER) and not view.speakers.isVisibleTo(view)


def test_the_settings_default_for_speakers(tmp_path):
    from PySide6.QtCore import QSettings

    from app.settings import Settings
    from app.transcript.speaker_setup import speakers_setting

    qs = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    settings = Settings(qs)
    assert speakers_setting(settings) is None                 # off by default
    for stored, expected in (("auto", "auto"), ("3", 3), ("many", None), ("0", None)):
        qs.setValue("transcribe/speakers", stored)
        assert speakers_setting(settings) == expected
