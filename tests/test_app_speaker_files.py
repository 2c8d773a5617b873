"""Speakers per file in the app: the queue's Speakers column, renames kept when a file is
transcribed again, and remembered voices naming later files.

The engine here is tests/fake_engine.py's, except that a file asked for speakers is labelled by
the real diarizer (Silero VAD + the pretrained GE2E encoder, engine.pipelines.diarize) over
synthetic two-voice conversations (tests/conversations.py): the voices, labels and names are real,
only the words are stand-ins (every 2 s of audio is one segment).
"""
from __future__ import annotations

import fake_engine
import numpy as np
import pytest
import soundfile as sf
from app_fixtures import data_dir, open_main_window  # noqa: F401  (pytest finds fixtures by name)
from conversations import make_conversation, write_wav
from speaker_weights import ge2e_weights

from app.backend.engine_client import EngineClient
from engine.text.types import Segment, Transcript

_EMBEDDER = []   # the GE2E embedder, loaded once for the module


class _VoiceEngine(fake_engine.FakeEngine):
    """FakeEngine whose files asked for speakers come out labelled by the real diarizer."""

    def submit_file(self, source, *, speakers=None, **options):
        job = super().submit_file(source, **options)
        job.speakers, job.labelled = speakers, False
        return job

    def step(self):
        touched = super().step()
        for job in self.jobs:
            if job.state == "done" and job.speakers is not None and not job.labelled:
                job.transcript, job.labelled = _diarized(job.source, job.speakers), True
        return touched


def _diarized(path, speakers) -> Transcript:
    from engine.pipelines.diarize import DiarizationOptions, Diarizer

    samples, _ = sf.read(str(path), dtype="float32")
    duration = len(samples) / 16000
    cuts = np.arange(0.0, duration, 2.0)
    segments = [Segment(float(a), float(min(a + 2.0, duration)), f"Words {i}.") for i, a in enumerate(cuts)]
    transcript = Transcript(" ".join(s.text for s in segments), "English", duration, segments)
    count = None if speakers == "auto" else int(speakers)
    diarizer = Diarizer(_EMBEDDER[0], DiarizationOptions(num_speakers=count))
    diarizer.add(samples)
    diarizer.label(transcript)
    return transcript


def _load(model_dir, device=None, dtype=None, *, aligner=None):
    return _VoiceEngine(model_dir, device, dtype, aligner)


@pytest.fixture(scope="module")
def talks(tmp_path_factory):
    """Two-voice conversations (the same two espeak voices, other sentences): (wav, reference
    turns) for a first file, that file's audio cut and swapped (a re-run numbering the voices the
    other way round), and a second file."""
    from engine.pipelines.diarize import GE2EEmbedder

    if not _EMBEDDER:
        _EMBEDDER.append(GE2EEmbedder(str(ge2e_weights())))
    folder = tmp_path_factory.mktemp("talks")
    out = {}
    for name, seed in (("first", 31), ("second", 37)):
        conv = make_conversation(2, 0.35, seed=seed, turn_range=(2.0, 6.0))
        write_wav(folder / f"{name}.wav", conv.samples)
        out[name] = (folder / f"{name}.wav", conv.turns)
    conv_samples, _ = sf.read(str(out["first"][0]), dtype="float32")
    turns = out["first"][1]
    cut = turns[len(turns) // 2][1] - 0.15                       # in the pause before a turn
    start = next(t for t in turns if t[1] >= cut)[0]
    rotated = np.concatenate([conv_samples[int(cut * 16000):], conv_samples[:int(cut * 16000)]])
    out["rotated"] = (rotated, start)                            # its first voice: ``start``
    return out


@pytest.fixture
def client(qtbot):
    c = EngineClient(_load)
    yield c
    c.shutdown()


def _finish(qtbot, w, job_id):
    qtbot.waitUntil(lambda: w.queue.model.item(job_id).state == "done", timeout=30000)
    return w.queue.model.item(job_id).transcript


def _voice_of(transcript, turns, speaker) -> str:
    """The label whose segments overlap ``speaker``'s reference turns most."""
    overlap: dict[str, float] = {}
    for seg in transcript.segments:
        for who, a, b in turns:
            if who == speaker and seg.speaker:
                overlap[seg.speaker] = overlap.get(seg.speaker, 0.0) + max(0.0, min(b, seg.end) - max(a, seg.start))
    return max(overlap, key=overlap.get)


def _rename(w, job_id, label, name):
    """What a user does: select the file, select the speaker in the panel, rename it."""
    w.queue_panel.table.selectRow(w.queue.model.row_of(job_id))
    panel = w.transcript_view.speakers
    assert panel.file_id == job_id and panel.transcript is w.transcript_view.model.transcript
    panel.list.setCurrentRow([panel.list.item(r).data(256) for r in range(panel.list.count())].index(label))
    panel.rename(name)
    return panel


def test_each_queued_file_has_its_own_speaker_count(qtbot, client, tmp_path, talks):
    from PySide6.QtCore import Qt

    from app.queue.queue_model import COL_SPEAKERS

    w = open_main_window(qtbot, client, tmp_path, PARALLEL_FILES=1, SPEAKERS="off")
    first, second = w.add_paths([talks["first"][0], talks["second"][0]])
    model, table = w.queue.model, w.queue_panel.table
    assert model.item(second).state == "waiting"
    assert table.isColumnHidden(COL_SPEAKERS), "no file labels speakers: the names keep the room"
    table.selectRow(model.row_of(second))                     # the row menu's "Speakers…"
    actions = {a.text(): a for a in w.queue_context_actions()}
    w.queue_panel.ask_speakers = lambda current: ("2", current == "off")
    actions["Speakers…"].trigger()
    index = model.index(model.row_of(second), COL_SPEAKERS)
    assert index.data() == "2" and not table.isColumnHidden(COL_SPEAKERS)
    assert model.index(model.row_of(first), COL_SPEAKERS).data() == "Off"
    assert model.flags(index) & Qt.ItemFlag.ItemIsEditable     # the cell itself edits it too
    assert w.history.get_file(second).speakers == "2"                   # a restart keeps it
    assert w.history.get_file(first).speakers == "off"
    off, two = _finish(qtbot, w, first), _finish(qtbot, w, second)
    assert not any(s.speaker for s in off.segments) and not off.voices
    assert {s.speaker for s in two.segments} == {"S1", "S2"} and sorted(two.voices) == ["S1", "S2"]
    # a finished file given a count is transcribed again with it
    assert model.setData(model.index(model.row_of(first), COL_SPEAKERS), "2")
    assert {s.speaker for s in _finish(qtbot, w, first).segments} == {"S1", "S2"}
    assert w.history.get_file(first).speakers == "2"


def test_renames_and_remembered_voices_follow_the_voice(qtbot, client, tmp_path, talks):
    import shutil

    from app.transcript.transcript_model import COL_SPEAKER

    w = open_main_window(qtbot, client, tmp_path, SPEAKERS="2")
    w.history_actions.ask_transcribe_edited = lambda names: True
    path, turns = shutil.copy(talks["first"][0], tmp_path / "meeting.wav"), talks["first"][1]
    (job,) = w.add_paths([path])
    alice = _voice_of(_finish(qtbot, w, job), turns, "spk1")
    panel = _rename(w, job, alice, "Alice")
    assert panel.remember_button.isEnabled()

    # Transcribe again a recording whose voices now come the other way round: new labels, same names
    rotated, first_voice = talks["rotated"]
    write_wav(path, rotated)
    w.history_actions.transcribe_again([job])
    again = _finish(qtbot, w, job)
    label = "S1" if first_voice == "spk1" else "S2"
    assert again.speaker_names == {label: "Alice"}
    assert {w.transcript_view.model.index(r, COL_SPEAKER).data() for r in range(len(again.segments))
            if again.segments[r].speaker == label} == {"Alice"}
    stored = w.history.get_transcript(job)
    assert stored.speaker_names == {label: "Alice"} and len(stored.voices[label]) == 256

    # Remember Alice's voice: another file with that voice shows "Alice" by itself
    panel = _rename(w, job, label, "Alice")
    assert panel.remember_voice() == "Alice" and not panel.remember_button.isEnabled()
    assert "voice remembered" in panel.list.currentItem().text() and panel.forget_button.isEnabled()
    path2, turns2 = talks["second"]
    (job2,) = w.add_paths([path2])
    later = _finish(qtbot, w, job2)
    assert later.speaker_names == {_voice_of(later, turns2, "spk1"): "Alice"}

    # The user calls that speaker "Alicia" in the first file: a re-run keeps the user's name
    _rename(w, job, label, "Alicia")
    w.history_actions.transcribe_again([job])
    assert _finish(qtbot, w, job).speaker_names == {label: "Alicia"}

    panel = _rename(w, job, label, "Alice")
    panel.forget_voice()
    assert not panel.forget_button.isEnabled()
    (job3,) = w.add_paths([shutil.copy(talks["second"][0], tmp_path / "another.wav")])
    assert _finish(qtbot, w, job3).speaker_names == {}


def test_a_history_from_before_speaker_counts_opens_and_keeps_them(tmp_path):
    import sqlite3

    from app.history import History

    old = sqlite3.connect(str(tmp_path / "old.db"))
    old.executescript("CREATE TABLE files (id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, "
                      "state TEXT NOT NULL DEFAULT 'queued', language TEXT, context TEXT NOT NULL DEFAULT '', "
                      "added_at REAL NOT NULL, finished_at REAL, error TEXT);"
                      "INSERT INTO files (path, added_at) VALUES ('talk.wav', 0);")
    old.close()
    history = History(tmp_path / "old.db")
    assert history.get_file(1).speakers is None                          # the Settings default applies
    history.add_file("b.wav", None, "", "3")
    history.set_speakers(1, "auto")
    assert [(r.path, r.speakers) for r in history.unfinished()] == [("talk.wav", "auto"), ("b.wav", "3")]
    history.close()


def test_voices_survive_the_transcript_round_trip_and_stay_out_of_exports():
    from engine.text.exports import to_json

    t = Transcript("Hi.", "English", 1.0, [Segment(0, 1, "Hi.", speaker="S1")], voices={"S1": [0.5] * 256})
    back = Transcript.from_dict(t.to_dict())
    assert back.voices == {"S1": [0.5] * 256} and Transcript.from_dict({"text": ""}).voices == {}
    assert "0.5" not in to_json(t)


def test_voice_match_setting_and_a_damaged_profiles_file(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from app import settings as S
    from app.settings import Settings
    from app.settings.settings_dialog import SettingsDialog
    from app.transcript.speaker_names import SpeakerNamer
    from app.transcript.speaker_setup import voice_match_setting
    from engine import DEFAULT_MATCH_THRESHOLD

    qs = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    settings = Settings(qs)
    assert voice_match_setting(settings) == DEFAULT_MATCH_THRESHOLD == S.VOICE_MATCH.default
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.voice_match_spin.setValue(0.85)
    dialog.save()
    assert voice_match_setting(settings) == 0.85
    qs.setValue(S.VOICE_MATCH.name, "7")                                 # hand-edited: the default
    assert voice_match_setting(settings) == DEFAULT_MATCH_THRESHOLD
    with pytest.raises(ValueError):
        SpeakerNamer(tmp_path / "v.json", threshold=0)

    (tmp_path / "v.json").write_text("{not json", encoding="utf-8")
    namer = SpeakerNamer(tmp_path / "v.json")
    t = Transcript("", None, 0.0, [], speaker_names={"S1": "Alice"}, voices={"S1": [1.0, 0.0]})
    assert namer.remember(t, "S1") == "Alice" and "could not be read" in namer.problem
    assert (tmp_path / "v.damaged.json").read_text(encoding="utf-8") == "{not json"   # nothing lost
    assert SpeakerNamer(tmp_path / "v.json").is_remembered("Alice")
