"""Screenshots for issue 32's app half, on a real X server (Xvfb):

    python tests/bench/shots_history_edits.py --model tests/models/qwen3-asr-tiny [--out docs/screenshots]

Speaks three sentences with pauses (espeak-ng), transcribes them without an aligner (so the
times are estimated and carry "~"), then shows: a transcript whose notes say a stretch could
not be aligned (the engine's fallback note, put on a copy of the transcript), the Versions
dialog of an edited transcript, and the question History asks before deleting entries.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from screenshots import Shooter, ensure_display, speak  # noqa: E402

SENTENCES = ["Can you open the door for me.", "The teacher reads a long story slowly.",
             "We walk to the market together."]
FALLBACK_NOTE = "word times for 0:03-0:08 could not be aligned; times there are estimated"


def _with_pauses(work: Path) -> Path:
    import numpy as np
    import soundfile as sf

    parts = []
    for i, text in enumerate(SENTENCES):
        audio, rate = sf.read(str(speak(work / f"s{i}.wav", text)), dtype="float32")
        parts += [np.zeros(int(rate * (0.6 + 0.8 * i)), np.float32), audio]
    path = work / "meeting-notes.wav"
    sf.write(str(path), np.concatenate(parts + [np.zeros(8000, np.float32)]), 16000)
    return path


def take(args, work: Path) -> int:
    import copy

    from app.history import history_delete
    from app import settings as S
    from app.backend.engine_client import EngineClient
    from app.history import History
    from app.main_window import MainWindow
    from app.paths import history_file, recordings_dir
    from app.settings import Settings
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["shots"])
    shooter = Shooter(app, Path(args.out))
    audio = _with_pauses(work)
    settings = Settings()
    settings.set(S.MODEL, str(Path(args.model).resolve()))
    settings.set(S.MAX_CHUNK_SECONDS, 4)   # the tiny model hears short chunks best
    client = EngineClient()
    window = MainWindow(client, History(history_file()), settings)
    window.resize(1180, 700)
    window.move(40, 40)
    window.show()
    window.start()
    shooter.wait(lambda: client.model_dir != "", what="the model")
    [job] = window.add_paths([audio])
    shooter.wait(lambda: window.queue.model.item(job).state in ("done", "failed"), timeout=600,
                 what="the transcript")
    window.queue_panel.table.selectRow(0)
    window.transcript_view.table.selectRow(1)
    shooter.shot("32-1-estimated-times", window)

    # the engine's fallback note, as a chunk whose alignment was refused leaves it
    transcript = copy.deepcopy(window.history.get_transcript(job))
    transcript.notes = [FALLBACK_NOTE]
    noted = window.history.add_file(audio)
    window.history.save_transcript(noted, transcript)
    record = window.history.get_file(noted)
    window.history_panel.add(noted, record.path, record.finished_at, transcript)
    window.tabs.setCurrentWidget(window.history_panel)
    window.history_panel.select(noted)
    shooter.shot("32-2-fallback-note", window)

    # an edit, then the versions
    window.history_panel.select(job)
    model = window.transcript_view.model
    model.setData(model.index(0, 1), "Can you open the door for me, please?")
    dialog = window.history_actions.open_versions(job)
    dialog.move(120, 120)
    dialog.list.setCurrentRow(1)
    shooter.shot("32-3-versions", dialog)
    dialog.close()

    # the question before deleting: two entries, one a live session with its recording
    recordings_dir().mkdir(parents=True, exist_ok=True)
    recording = recordings_dir() / "live-20260512-101500.wav"
    shutil.copyfile(audio, recording)
    live = window.save_live_session(transcript.text, transcript.segments, recording, transcript.duration)
    plan = history_delete.plan_deletion(window.history, [job, live])
    box, _ = window.history_actions.delete_box(history_delete.describe(plan))
    box.show()
    box.move(300, 260)
    shooter.shot("32-4-delete-question", box)
    box.close()
    window.close()
    client.shutdown()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", default="docs/screenshots")
    args = parser.parse_args(argv)
    args.out = str(Path(args.out).resolve())
    xvfb = ensure_display()
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    work = Path(tempfile.mkdtemp(prefix="qwen3-asr-shots32-"))
    os.environ["QWEN3_ASR_DATA_DIR"] = str(work / "data")
    try:
        return take(args, work)
    finally:
        if xvfb is not None:
            xvfb.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
