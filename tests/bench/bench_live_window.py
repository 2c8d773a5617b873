"""The live window's UI-thread cost per caption update, on a synthetic session of up to 2 hours.

Runs against whichever checkout is first on PYTHONPATH, so one sitting measures before and after:

    PYTHONPATH=/tmp/before QT_QPA_PLATFORM=offscreen python tests/bench/bench_live_window.py
    PYTHONPATH=$PWD        QT_QPA_PLATFORM=offscreen python tests/bench/bench_live_window.py

A session of N committed utterances (1,800 = 2 hours at one line per 4 s) is loaded into a shown
LiveWindow, then the updates of a few more utterances are delivered the way the engine worker
delivers them (the old worker re-sent the whole committed list with every update; the new one
sends a CaptionEvent with only the new segments). Each update is timed on the UI thread: the slot
call plus processEvents, so Qt's layout and paint of the change are counted too. Also timed: one
tick of the window's 50 ms audio timer (the old one read the source, wrote the recording and fed
the stream on the UI thread; the new one moves the level meter only).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("QWEN3_ASR_DATA_DIR", tempfile.mkdtemp(prefix="bench-live-"))

import numpy as np  # noqa: E402
from PySide6.QtCore import QObject, Signal  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

WORDS = ("the meeting starts at nine and we will talk about the new plan for the team before lunch "
         "please send the report to everyone who asked about the numbers from last week").split()
LINE_SECONDS = 4.0


class StubWorker(QObject):
    """Both generations of the worker's live signals, so either LiveWindow can connect."""

    stream_update = Signal(int, object, str)
    stream_captions = Signal(int, object)
    stream_finished = Signal(int)
    stream_lag = Signal(int, float)
    stream_failed = Signal(int, str)


class StubClient:
    model_dir = "stub"

    def __init__(self):
        self.worker = StubWorker()
        self.fed = 0

    def feed_stream(self, stream_id, pcm):
        self.fed += len(pcm)


def session(lines: int):
    from engine.text.types import Segment

    rng = np.random.default_rng(0)
    return [Segment(i * LINE_SECONDS, i * LINE_SECONDS + 3.5,
                    " ".join(rng.choice(WORDS, size=int(rng.integers(7, 14)))).capitalize() + ".")
            for i in range(lines)]


class Delivery:
    """Hands a window caption updates the way its generation of the worker sends them."""

    def __init__(self, live, stream_id: int):
        self.live, self.stream_id = live, stream_id
        self.new_api = hasattr(live, "_stream_captions")
        self.committed: list = []

    def update(self, new_segments, tentative: str):
        first = len(self.committed)
        self.committed.extend(new_segments)
        if self.new_api:
            from app.backend.worker import CaptionEvent

            self.live._stream_captions(self.stream_id, CaptionEvent(first, tuple(new_segments), tentative))
        else:   # the old worker: list(stream.committed) with every update
            self.live._stream_update(self.stream_id, list(self.committed), tentative)


def time_updates(app, lines: int, utterances: int):
    from app.live.live_window import LiveWindow
    from app.settings import Settings

    segments = session(lines + utterances)
    live = LiveWindow(StubClient(), Settings())
    live.resize(760, 420)
    live.show()
    app.processEvents()
    live.stream_id = 1
    delivery = Delivery(live, 1)
    delivery.update(segments[:lines], "")        # the session so far, at once
    app.processEvents()
    tentative_ms, commit_ms = [], []
    for seg in segments[lines:]:
        words = seg.text.split()
        for k in range(1, 5):                     # the open utterance's updates, every 0.75 s live
            t0 = time.perf_counter()
            delivery.update([], " ".join(words[:max(1, k * len(words) // 4)]))
            app.processEvents()
            tentative_ms.append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        delivery.update([seg], "")                 # its final pass commits it
        app.processEvents()
        commit_ms.append(1000 * (time.perf_counter() - t0))
    shown = live.captions.toPlainText().splitlines()
    assert len([s for s in shown if s.strip()]) == lines + utterances, len(shown)
    live.close()
    live.deleteLater()
    app.processEvents()
    return tentative_ms, commit_ms


def time_audio_ticks(app, ticks: int):
    """One tick of the window's 50 ms timer while recording, as each generation does it."""
    from app.live.live_window import LiveWindow
    from app.settings import Settings
    from engine.audio.recorder import FileSource, SessionRecorder

    live = LiveWindow(StubClient(), Settings())
    audio = (0.1 * np.sin(np.arange(16000 * (ticks // 20 + 2)) / 5.0)).astype(np.float32)
    source = FileSource(audio, manual=True)
    source.start()
    recorder = SessionRecorder(os.path.join(os.environ["QWEN3_ASR_DATA_DIR"], "bench.wav"))
    live.stream_id = 1
    if hasattr(live, "_pump_audio"):
        live.source, live.recorder = source, recorder
        tick = live._pump_audio
    else:
        from app.live.audio_feeder import AudioFeeder

        live.source = source
        live.feeder = AudioFeeder(source, lambda pcm: None, recorder)   # its thread does the rest
        tick = live._watch_input
    times = []
    for _ in range(ticks):
        source.advance(0.05)
        t0 = time.perf_counter()
        tick()
        times.append(1000 * (time.perf_counter() - t0))
    recorder.close()
    live.source = None
    live.close()
    return times


def summary(ms: list[float]) -> str:
    return f"median {statistics.median(ms):7.2f} ms   max {max(ms):7.2f} ms   (n={len(ms)})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[60, 1800],
                        help="committed lines already shown (1,800 = 2 hours at a line per 4 s)")
    parser.add_argument("--utterances", type=int, default=5, help="utterances timed after them")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    try:   # thousands of void Qt calls: see app/none_refs.py (absent from older checkouts)
        from app.none_refs import keep_none_alive

        app._none_keeper = keep_none_alive(app)
    except ImportError:
        pass
    import app as app_package

    print(f"checkout: {os.path.dirname(os.path.dirname(os.path.abspath(app_package.__file__)))}")
    for lines in args.lines:
        tentative_ms, commit_ms = time_updates(app, lines, args.utterances)
        hours = lines * LINE_SECONDS / 3600
        print(f"{lines:5d} lines ({hours:4.2f} h)  tentative update: {summary(tentative_ms)}")
        print(f"{lines:5d} lines ({hours:4.2f} h)  commit update:    {summary(commit_ms)}")
    print(f"audio timer tick (50 ms of audio, recording on): {summary(time_audio_ticks(app, 100))}")


if __name__ == "__main__":
    main()
