"""An edited segment keeps real word times: re-aligned by the loaded aligner, else estimated.

The app's edit path end to end (TranscriptEdits -> EditAlignment -> EngineClient -> the engine
thread -> the aligner -> History), with the shipped tiny aligner over espeak-ng speech whose
sentence times are known, and tests/fake_engine.py standing in for the recogniser.
"""
from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")

import fake_engine  # noqa: E402
from app_fixtures import data_dir  # noqa: E402,F401 (autouse: the main window's settings stay in tmp_path)
from app.backend.engine_client import EngineClient  # noqa: E402
from app.history import History  # noqa: E402
from app.transcript.edit_alignment import EditAlignment, stretch_of  # noqa: E402
from app.transcript.transcript_edits import TranscriptEdits  # noqa: E402
from engine.text.types import Segment, Transcript, Word  # noqa: E402
from known_times import known_times_recording  # noqa: E402
from real_speech import ALIGNER_DIR  # noqa: E402

EDITED = 1   # the segment the user corrects


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """Three or more one-sentence utterances with pauses; their true times are known."""
    k = known_times_recording(tmp_path_factory.mktemp("edit"), 8.0, seed=5)
    assert len(k.sentences) >= 3
    return k


@pytest.fixture(scope="module")
def aligner():
    from engine.pipelines.aligner import Aligner

    return Aligner(ALIGNER_DIR, device="cpu", dtype="float32")


def _recognised(known) -> Transcript:
    """What recognition gave: every sentence at its (estimated) place, the edited one misheard, with
    its words spread over it."""
    segments = []
    for i, (text, (start, end)) in enumerate(zip(known.sentences, known.times)):
        start, end = round(start + 0.1, 2), round(end - 0.05, 2)
        if i == EDITED:
            text = "Where is my story now"
        step = (end - start) / len(text.split())
        words = [Word(w, round(start + j * step, 3), round(start + (j + 1) * step, 3))
                 for j, w in enumerate(text.split())]
        segments.append(Segment(start, end, text, words, "English", timing="estimated"))
    return Transcript(text=" ".join(s.text for s in segments), language="English",
                      duration=len(known.samples) / 16000, segments=segments)


def _loader(engine_aligner):
    """The worker's loader: the fake recogniser with ``engine_aligner`` (a loaded Aligner, or None)."""
    return lambda d, dev=None, dt=None, *, aligner=None, **_: fake_engine.FakeEngine(d, dev, dt, engine_aligner)


def _app(qtbot, tmp_path, engine_aligner, audio_path):
    """History with the recognised transcript of ``audio_path``, edits with undo, and the engine
    thread with (or without) a loaded aligner."""
    history = History(tmp_path / "h.db")
    client = EngineClient(_loader(engine_aligner))
    client.load_model(str(tmp_path))
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=10000)
    edits = TranscriptEdits(history)
    alignment = EditAlignment(edits, history, client)
    file_id = history.add_file(str(audio_path))
    return history, client, edits, alignment, file_id


def _edit_and_wait(qtbot, known, history, edits, alignment, file_id):
    history.save_transcript(file_id, _recognised(known))
    new_text = known.sentences[EDITED]
    edits.edit(file_id, EDITED, new_text)
    saved = history.get_transcript(file_id).segments[EDITED]   # saved at once, before any aligner answer
    assert saved.text == new_text and saved.timing == "estimated"
    assert len(saved.words) == len(new_text.split())
    qtbot.waitUntil(lambda: alignment.pending == 0, timeout=120000)
    return new_text


def test_an_edit_is_realigned_by_the_loaded_aligner(qtbot, tmp_path, known, aligner):
    history, client, edits, alignment, file_id = _app(qtbot, tmp_path, aligner, known.path)
    try:
        new_text = _edit_and_wait(qtbot, known, history, edits, alignment, file_id)
        transcript = history.get_transcript(file_id)
        seg = transcript.segments[EDITED]
        assert seg.text == new_text and seg.timing == "aligned", transcript.notes
        assert " ".join(w.text for w in seg.words) == new_text       # the edit's words, punctuation kept
        lo, hi = stretch_of(_recognised(known), EDITED)
        assert all(lo <= w.start <= w.end <= hi for w in seg.words)
        assert all(a.end <= b.start for a, b in zip(seg.words, seg.words[1:]))   # in order
        assert (seg.start, seg.end) == (seg.words[0].start, seg.words[-1].end)
        true_start = known.times[EDITED][0]
        assert abs(seg.words[0].start - true_start) < 0.3, (seg.words[0].start, true_start)
        assert all(s.text == t.text for s, t in zip(transcript.segments, _recognised(known).segments)
                   if s is not seg)                                   # the other lines untouched
        # the word times complete the edit's version: no extra version, and undo/redo still work
        assert [v.kind for v in history.versions.list(file_id)] == ["recognised", "edited"]
        assert history.versions.list(file_id)[-1].transcript.segments[EDITED].timing == "aligned"
        edits.stack(file_id).undo()
        assert history.get_transcript(file_id).segments[EDITED].text == "Where is my story now"
        edits.stack(file_id).redo()
        redone = history.get_transcript(file_id).segments[EDITED]
        assert redone.text == new_text and redone.timing == "aligned" and redone.words == seg.words
    finally:
        client.shutdown()


def test_without_an_aligner_the_edit_keeps_estimated_word_times(qtbot, tmp_path, known):
    history, client, edits, alignment, file_id = _app(qtbot, tmp_path, None, known.path)
    try:
        new_text = _edit_and_wait(qtbot, known, history, edits, alignment, file_id)
        transcript = history.get_transcript(file_id)
        seg = transcript.segments[EDITED]
        assert seg.text == new_text and seg.timing == "estimated" and len(seg.words) == len(new_text.split())
        assert transcript.notes == []
    finally:
        client.shutdown()


def test_missing_audio_keeps_estimated_times_with_a_note(qtbot, tmp_path, known, aligner):
    history, client, edits, alignment, file_id = _app(qtbot, tmp_path, aligner, tmp_path / "moved-away.wav")
    try:
        new_text = _edit_and_wait(qtbot, known, history, edits, alignment, file_id)
        transcript = history.get_transcript(file_id)
        seg = transcript.segments[EDITED]
        assert seg.text == new_text and seg.timing == "estimated" and len(seg.words) == len(new_text.split())
        [note] = transcript.notes
        assert "could not be aligned" in note and "moved-away.wav" in note and "estimated" in note
    finally:
        client.shutdown()


def test_a_refused_alignment_keeps_estimated_times_with_a_note(qtbot, tmp_path, known, aligner):
    """Text that is not what was said: the checked alignment is refused, the edit stays as typed."""
    history, client, edits, alignment, file_id = _app(qtbot, tmp_path, aligner, known.path)
    try:
        history.save_transcript(file_id, _recognised(known))
        edits.edit(file_id, EDITED, "The brown record, the clock, the tree, the dinner and the door again")
        qtbot.waitUntil(lambda: alignment.pending == 0, timeout=120000)
        transcript = history.get_transcript(file_id)
        seg = transcript.segments[EDITED]
        assert seg.text.startswith("The brown record") and seg.timing == "estimated"
        assert len(transcript.notes) == 1 and "could not be aligned" in transcript.notes[0]
    finally:
        client.shutdown()


def test_the_window_shows_the_note_of_an_edit_whose_audio_is_gone(qtbot, tmp_path, known, aligner):
    """In the main window: the edit shows at once; the note about its word times follows above the lines."""
    from PySide6.QtCore import Qt

    from app_fixtures import open_main_window

    client = EngineClient(_loader(aligner))
    try:
        window = open_main_window(qtbot, client, tmp_path)
        file_id = window.history.add_file(str(tmp_path / "deleted.wav"))
        window.history.save_transcript(file_id, _recognised(known))
        view = window.transcript_view
        view.show_transcript(file_id, window.history.get_transcript(file_id), str(tmp_path / "deleted.wav"), "x")
        assert view.model.setData(view.model.index(EDITED, 1), known.sentences[EDITED], Qt.ItemDataRole.EditRole)
        assert view.model.segments[EDITED].text == known.sentences[EDITED]
        qtbot.waitUntil(lambda: "could not be aligned" in view.notes_label.text(), timeout=60000)
        assert "deleted.wav" in view.notes_label.text() and not view.notes_label.isHidden()
    finally:
        client.shutdown()
