"""Screenshots of speaker labels in the app under Xvfb: the transcript with its speaker column
and colours, and the same after renaming a speaker.

    python tests/bench/speaker_screenshots.py WAV --speakers N --weights PRETRAINED_PT [--out docs/screenshots]

Transcribes WAV with the trained tiny test model (word times, speakers), shows it in the app's
TranscriptView and saves ``speakers-transcript.png`` and ``speakers-renamed.png``.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "bench")]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("wav")
    p.add_argument("--speakers", default="auto")
    p.add_argument("--weights", required=True)
    p.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    args = p.parse_args()
    from screenshots import ensure_display

    xvfb = ensure_display()
    import engine
    from PySide6.QtWidgets import QApplication

    from app.transcript.transcript_view import TranscriptView

    models = REPO / "tests" / "models"
    eng = engine.load(models / "qwen3-asr-tiny", aligner=models / "forced-aligner-tiny")
    eng.speaker_model = args.weights
    transcript = eng.transcribe(args.wav, word_timestamps=True, max_chunk_seconds=8,
                                speakers=None if args.speakers == "none" else args.speakers)
    app = QApplication.instance() or QApplication([])
    view = TranscriptView()
    view.resize(1100, 820)
    view.move(0, 0)
    view.show_transcript(1, transcript, args.wav, Path(args.wav).name)
    view.show()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def shot(name):
        for _ in range(30):
            app.processEvents()
        view.table.resizeRowsToContents()
        app.processEvents()
        path = out / name
        if subprocess.run(["import", "-window", "root", "-crop", "1100x820+0+0", str(path)]).returncode:
            view.grab().save(str(path))
        print("wrote", path)

    shot("speakers-transcript.png")
    view.speakers.list.setCurrentRow(0)
    view.speakers.rename("Alice")
    view.speakers.list.setCurrentRow(1)
    view.speakers.rename("Bob")
    view.search.setText("Alice")
    shot("speakers-renamed.png")
    if xvfb:
        xvfb.terminate()


if __name__ == "__main__":
    main()
