"""Screenshot of the live captions window with speaker labels, under Xvfb.

    python tests/bench/live_speaker_screenshot.py --weights PRETRAINED_PT [--out docs/screenshots]

Streams a 2-voice espeak conversation through a real live stream (trained tiny test model,
``open_stream(speakers=True)``, fed in 0.5 s blocks), then shows its committed lines in the app's
LiveWindow (Times and Speakers on) and saves ``live-speakers.png``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "tests" / "bench")]


def _client():
    """A stand-in for the app's engine client: the window only connects to its worker's signals."""
    from PySide6.QtCore import QObject, Signal

    class Worker(QObject):
        stream_update = Signal(int, object, str)
        stream_finished = Signal(int)
        stream_failed = Signal(int, str)
        live_speakers = False

    class Client:
        model_dir = ""        # nothing is started from the window here
        worker = Worker()

    return Client()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--weights", required=True)
    p.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    args = p.parse_args()
    from screenshots import ensure_display

    xvfb = ensure_display()
    from conversations import make_conversation

    import engine

    conv = make_conversation(2, 0.6, seed=11, turn_range=(1.0, 6.0))
    eng = engine.load(REPO / "tests" / "models" / "qwen3-asr-tiny", device="cpu", dtype="float32")
    eng.speaker_model = args.weights
    stream = eng.open_stream(speakers=True, min_silence_s=0.3, word_timestamps=False)
    for pos in range(0, len(conv.samples), 8000):
        stream.feed(conv.samples[pos:pos + 8000])
        eng.step()
    stream.close()
    while not stream.finished:
        eng.step()
    print("labels", [s.speaker for s in stream.committed], "corrections", stream.speakers.changes)

    from PySide6.QtWidgets import QApplication

    from app.live.live_window import LiveWindow
    from app.settings import Settings

    app = QApplication.instance() or QApplication([])
    live = LiveWindow(_client(), Settings())
    live.times_check.setChecked(True)
    live.speakers_check.setChecked(True)
    live.resize(900, 560)
    live.move(0, 0)
    live.show()
    for _ in range(30):
        app.processEvents()
    live.committed_segments = list(stream.committed)
    live.committed = [s.text for s in stream.committed]
    live._render()
    for _ in range(30):
        app.processEvents()
    print(live.captions.toPlainText())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "live-speakers.png"
    live.grab().save(str(path))
    print("wrote", path)
    if xvfb:
        xvfb.terminate()


if __name__ == "__main__":
    main()
