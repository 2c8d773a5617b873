"""The live window as a user sees it through a long session: lines appear in order, each once, the
tentative line is replaced rather than piled up, the view follows the newest line unless the user
scrolled up, and the recording holds every sample. The audio reaches the engine off the UI thread.

Fast: the engine is tests/fake_engine.py (a committed line per second of audio, "second N").
"""
from __future__ import annotations

import threading

import numpy as np
import pytest
import soundfile as sf
from app_fixtures import client, data_dir  # noqa: F401  (fixtures, found by name)

from app.backend.worker import CaptionEvent
from app.settings import Settings
from engine.text.types import Segment

pytest.importorskip("pytestqt")

WAIT_MS = 20_000


def _lines(view) -> list[str]:
    return [line for line in view.toPlainText().splitlines() if line.strip()]


@pytest.fixture(autouse=True)
def none_kept_alive(qapp):
    """Thousands of void Qt calls here: under PySide6 6.12.0 on Python 3.11 each takes a reference
    to None from the test process (app/none_refs.py), as the app's own keeper gives them back."""
    from app.none_refs import keep_none_alive

    if getattr(qapp, "_none_keeper", None) is None:
        qapp._none_keeper = keep_none_alive(qapp)


@pytest.fixture
def loaded(client, qtbot, tmp_path):
    client.load_model(str(tmp_path))
    qtbot.waitUntil(lambda: client.model_dir != "", timeout=5000)
    return client


def test_a_long_session_arrives_in_many_events_each_line_once_in_order_and_fully_recorded(loaded, qtbot,
                                                                                        monkeypatch):
    from app.live.live_window import LiveWindow
    from engine.audio.recorder import FileSource, SessionRecorder

    writing_threads = set()
    write = SessionRecorder.write

    def write_spy(self, block):
        writing_threads.add(threading.current_thread())
        write(self, block)

    monkeypatch.setattr(SessionRecorder, "write", write_spy)

    live = LiveWindow(loaded, Settings())
    qtbot.addWidget(live)
    live.record_check.setChecked(True)
    events: list[CaptionEvent] = []
    loaded.worker.stream_captions.connect(lambda _sid, event: events.append(event))
    feeding_threads = set()
    feed = loaded.feed_stream

    def spy(stream_id, pcm):
        feeding_threads.add(threading.current_thread())
        feed(stream_id, pcm)

    loaded.feed_stream = spy
    seconds = 30
    rng = np.random.default_rng(1)
    audio = (0.1 * rng.standard_normal(seconds * 16000)).astype(np.float32)
    assert live.start_source(FileSource(audio, speed=15.0))        # 30 s of audio in about 2 s
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=WAIT_MS)

    expected = [f"{n // 60}:{n % 60:02d}  second {n + 1}" for n in range(seconds)]
    assert _lines(live.captions) == expected
    assert live.committed_text() == " ".join(f"second {n + 1}" for n in range(seconds))
    assert len(events) > 3, "the session should arrive as many small events"
    sent = [seg.text for event in events for seg in event.segments]
    assert sent == [f"second {n + 1}" for n in range(seconds)], "each segment is sent once, in order"
    assert [e.first for e in events] == list(np.cumsum([0] + [len(e.segments) for e in events[:-1]]))
    assert feeding_threads and threading.main_thread() not in feeding_threads, \
        "audio went to the engine through the UI thread"
    assert writing_threads and threading.main_thread() not in writing_threads, "the UI thread wrote the WAV"
    recorded, rate = sf.read(str(live.recording_path), dtype="float32")
    assert rate == 16000 and len(recorded) == len(audio)
    assert np.max(np.abs(recorded - np.clip(audio, -1, 1))) < 1e-3, "the recording is the audio heard"
    assert live.status.text() == f"Stopped. Audio recorded to {live.recording_path}."


def test_the_tentative_line_is_replaced_then_committed_and_styled_apart(qtbot):
    from app.live.caption_view import TENTATIVE_COLOR, CaptionView

    view = CaptionView()
    qtbot.addWidget(view)
    view.update_captions([Segment(0.0, 2.0, "Good morning.")], "we")
    view.update_captions([], "we start")
    view.update_captions([], "we start at nine")
    assert _lines(view) == ["0:00  Good morning.", "we start at nine"]
    last = view.document().lastBlock()
    fmt = last.begin().fragment().charFormat()
    assert fmt.fontItalic() and fmt.foreground().color().name() == TENTATIVE_COLOR.lower()
    first_words = [f for f in _fragments(view.document().firstBlock()) if "Good" in f.text()]
    assert first_words and not first_words[0].charFormat().fontItalic(), "committed text is not italic"

    view.update_captions([Segment(2.5, 4.0, "We start at nine.")], "")
    assert _lines(view) == ["0:00  Good morning.", "0:02  We start at nine."]
    assert not any(f.charFormat().fontItalic() for f in _fragments(view.document().lastBlock()))

    view.update_captions([], "and then")
    view.set_show_times(False)                     # the "Times" box: every line again, tentative kept
    assert _lines(view) == ["Good morning.", "We start at nine.", "and then"]
    view.set_show_times(True)
    assert _lines(view) == ["0:00  Good morning.", "0:02  We start at nine.", "and then"]


def _fragments(block):
    it = block.begin()
    while not it.atEnd():
        yield it.fragment()
        it += 1


def test_two_hours_of_lines_one_event_each_lose_nothing(client, qtbot):
    from app.live.live_window import LiveWindow, clock_text

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.stream_id = 9
    lines = 1800                                    # a line per 4 s: two hours
    for n in range(lines):
        seg = Segment(4.0 * n, 4.0 * n + 3.0, f"line {n}")
        live._stream_captions(9, CaptionEvent(n, (), f"line {n} so"))   # its tentative first
        live._stream_captions(9, CaptionEvent(n, (seg,), f"next {n}"))
    live._stream_captions(9, CaptionEvent(lines - 1, (Segment(0, 1, "line 1799"),), ""))  # a repeat
    shown = _lines(live.captions)
    assert len(shown) == lines and shown[0] == "0:00  line 0" and shown[-1] == "1:59:56  line 1799"
    assert shown == [f"{clock_text(4.0 * n)}  line {n}" for n in range(lines)]
    assert len(live.committed_segments) == lines, "a segment sent twice is shown once"


def test_the_view_follows_new_lines_unless_the_user_scrolled_up(client, qtbot):
    from app.live.live_window import LiveWindow

    live = LiveWindow(client, Settings())
    qtbot.addWidget(live)
    live.resize(600, 300)
    live.show()
    live.stream_id = 1
    bar = live.captions.verticalScrollBar()
    for n in range(60):
        live._stream_captions(1, CaptionEvent(n, (Segment(n, n + 1, f"line {n}"),), "more"))
    qtbot.waitUntil(lambda: bar.maximum() > 0)
    assert bar.value() == bar.maximum(), "the newest line is in view"
    bar.setValue(bar.maximum() // 3)               # the user scrolls up to read
    where = bar.value()
    for n in range(60, 80):
        live._stream_captions(1, CaptionEvent(n, (Segment(n, n + 1, f"line {n}"),), "more"))
    assert bar.value() == where, "new lines must not pull the reader away"
    bar.setValue(bar.maximum())                    # back at the bottom: following again
    live._stream_captions(1, CaptionEvent(80, (Segment(80, 81, "line 80"),), ""))
    assert bar.value() == bar.maximum()
    assert _lines(live.captions)[-1].endswith("line 80")


class _FailingSource:
    """Two seconds of audio, then the input fails (a sound server that went away)."""

    level = -20.0

    def __init__(self):
        self.audio = (0.1 * np.sin(np.arange(2 * 16000) / 5.0)).astype(np.float32)
        self.sent = 0
        self.error = None
        self.stopped = False

    def start(self):
        pass

    def stop(self):
        self.stopped = True

    def read(self):
        if self.sent >= len(self.audio):
            self.error = "the sound server went away"
            return np.zeros(0, np.float32)
        block, self.sent = self.audio[self.sent:self.sent + 4000], self.sent + 4000
        return block


def test_an_input_that_fails_keeps_the_lines_and_a_complete_recording_and_says_why(loaded, qtbot):
    from app.live.live_window import LiveWindow

    live = LiveWindow(loaded, Settings())
    qtbot.addWidget(live)
    live.record_check.setChecked(True)
    source = _FailingSource()
    assert live.start_source(source)
    qtbot.waitUntil(lambda: live.source is None and live.stream_id is None, timeout=WAIT_MS)
    assert live.status.text() == "Input stopped: the sound server went away"
    assert live.start_button.text() == "Start" and source.stopped
    assert _lines(live.captions) == ["0:00  second 1", "0:01  second 2"]
    recorded, _ = sf.read(str(live.recording_path), dtype="float32")
    assert len(recorded) == len(source.audio), "every sample heard before the failure is in the WAV"


def test_a_corrected_speaker_redraws_its_line_and_nothing_else(qtbot):
    """Live speaker labels may move an early utterance to another speaker as more speech arrives:
    that line shows the new label in place; the other lines and the tentative text stay."""
    from types import SimpleNamespace

    from app.backend.worker import EngineWorker, _StreamState
    from app.live.caption_view import CaptionView

    segs = [Segment(0.0, 1.0, "Good morning."), Segment(1.5, 2.5, ""), Segment(3.0, 4.0, "Come here.")]
    segs[0].speaker, segs[2].speaker = "S1", "S1"
    changes = []
    stream = SimpleNamespace(committed=segs, tentative="we start", speakers=SimpleNamespace(changes=changes))
    worker = EngineWorker()
    events = []
    worker.stream_captions.connect(lambda sid, ev: events.append(ev))
    state = _StreamState(stream)
    worker._send_captions(7, state)
    view = CaptionView()
    qtbot.addWidget(view)
    view.update_captions(events[-1].segments, events[-1].tentative, events[-1].relabelled)
    assert _lines(view) == ["0:00  S1: Good morning.", "0:03  S1: Come here.", "we start"]

    segs[2].speaker = "S2"                   # what LiveSpeakers does in the engine thread
    changes.append(SimpleNamespace(index=2, old="S1", new="S2"))
    worker._send_captions(7, state)
    assert events[-1].relabelled == (2,) and events[-1].segments == ()
    view.update_captions(events[-1].segments, events[-1].tentative, events[-1].relabelled)
    assert _lines(view) == ["0:00  S1: Good morning.", "0:03  S2: Come here.", "we start"]

    view.update_captions([Segment(5.0, 6.0, "Not today.")], "")
    assert _lines(view)[-1] == "0:05  Not today."
    view.set_show_times(False)
    assert _lines(view) == ["S1: Good morning.", "S2: Come here.", "Not today."]
