"""Screenshots for issue 35 ("a daily driver"), on a real X server (Xvfb), with the fake engine.

    PYTHONPATH=TREE python tests/bench/screenshots_daily.py --out FOLDER

Runs against whatever tree PYTHONPATH names, so one command shoots the app before and after
(`git archive BASE | tar -x -C /tmp/before`, then the same command with PYTHONPATH=/tmp/before).
Features the older tree lacks are skipped (getattr), so each scene shows what that tree does.
Uses tests/fake_engine.py (no model needed; transcripts are set on the view where a scene
needs more text than the fake gives). Each shot is the X screen (`import -window root`).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TREE = Path(os.environ.get("PYTHONPATH", ".").split(os.pathsep)[0]).resolve()
sys.path[:0] = [str(TREE), str(TREE / "tests")]
DISPLAY = ":135"     # away from the :99 other scripts use
SCREEN = "1280x800x24"


def ensure_display():
    if os.environ.get("DISPLAY"):
        return None
    xvfb = subprocess.Popen(["Xvfb", DISPLAY, "-screen", "0", SCREEN, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if Path(f"/tmp/.X11-unix/X{DISPLAY[1:]}").exists():
            break
        time.sleep(0.05)
    os.environ["DISPLAY"] = DISPLAY
    return xvfb


def meeting():
    from engine.text.types import Segment, Transcript, Word

    lines = [(7.2, 11.4, "Shall we start with the budget for the new studio?"),
             (11.4, 15.9, "Yes, the budget first, then the plan for the launch."),
             (15.9, 21.0, "The studio needs two more desks and the sound panels."),
             (21.0, 26.5, "We ordered the panels last week; the desks come in March."),
             (26.5, 31.2, "Then the launch: the date moves to the fourteenth."),
             (31.2, 36.0, "Who tells the team about the new date?"),
             (36.0, 41.5, "I will send the note this afternoon, after the call."),
             (41.5, 47.0, "Good. Last point: the recordings of the interviews.")]
    segments = []
    for start, end, text in lines:
        words, step = [], (end - start) / len(text.split())
        for i, w in enumerate(text.split()):
            words.append(Word(w, start + i * step, start + (i + 1) * step - 0.05))
        segments.append(Segment(start, end, text, words, "English"))
    return Transcript(" ".join(t for *_, t in lines), "English", 47.0, segments)


class Shooter:
    def __init__(self, app, out: Path):
        self.app, self.out = app, out

    def settle(self, seconds=0.4):
        end = time.time() + seconds
        while time.time() < end:
            self.app.processEvents()
            time.sleep(0.02)

    def shot(self, name: str):
        self.settle()
        path = self.out / f"{name}.png"
        subprocess.run(["import", "-window", "root", str(path)], check=True)
        print("wrote", path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    xvfb = ensure_display()
    data = Path(tempfile.mkdtemp(prefix="shots35-"))
    os.environ["QWEN3_ASR_DATA_DIR"] = str(data / "data")
    os.environ.pop("QT_QPA_PLATFORM", None)
    try:
        return shoot(args.out, data)
    finally:
        if xvfb is not None:
            xvfb.terminate()


def shoot(out: Path, data: Path) -> int:
    import numpy as np
    import soundfile as sf
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    import fake_engine
    from app import settings as S
    from app.backend.engine_client import EngineClient
    from app.history import History
    from app.main_window import MainWindow
    from app.settings import Settings

    app = QApplication(["shots"])
    s = Shooter(app, out)
    settings = Settings()
    settings.set(S.MODEL, str(data))
    audio = data / "audio"
    audio.mkdir()
    paths = []
    for name in ("standup-2026-12-02.wav", "interview-anna.wav", "meeting-with-anna.wav"):
        sf.write(str(audio / name), np.zeros(8000, np.float32), 16000)
        paths.append(str(audio / name))
    client = EngineClient(fake_engine.load)
    w = MainWindow(client, History(data / "h.db"), settings)
    w.resize(1260, 760)
    w.move(0, 0)
    w.show()
    w.start()
    while not client.model_dir:
        s.settle(0.05)
    ids = w.add_paths(paths[:2])
    while any(w.queue.model.item(j).state != "done" for j in ids):
        s.settle(0.05)
    table = w.queue_panel.table
    table.selectRow(0)
    s.settle()

    # 1: the transcript: one-line times, search with its count, the playing word in the
    # selected row, speed; a long status message.
    view = w.transcript_view
    view.show_transcript(ids[0], meeting(), paths[0], "standup-2026-12-02.wav")
    view.search.setText("the")
    view.next_match()
    view.next_match()
    view.table.selectRow(2)
    view.model.set_playhead(17.6)
    view.table.setFocus()
    w.statusBar().showMessage("Loaded the edited transcript of standup-2026-12-02.wav (version 2, "
                              "2024-06-12 10:41) with 8 segments, word timestamps from the aligner "
                              "and the speaker names you gave", 60000)
    s.shot("1-transcript")

    # 2: a file while it runs: its lines so far.
    engine = client.worker.engine
    engine.progress_per_step = 0.01
    step, held = engine.step, []

    def step_then_hold():   # in the engine's thread: hold the file half way for the picture
        out = step()
        job = next((j for j in engine.jobs if j.source == paths[2]), None)
        if job is not None and job.progress >= 0.55 and not held:
            held.append(job)
            time.sleep(6)
        return out

    engine.step = step_then_hold
    (running,) = w.add_paths([paths[2]])
    table.selectRow(w.queue.model.row_of(running))
    while not held:
        s.settle(0.05)
    s.settle(0.5)
    s.shot("2-while-running")
    while w.queue.model.item(running).state != "done":
        s.settle(0.05)

    # 3: the time left, from an absurd raw estimate (what the old code showed), through
    # the bound the new worker applies when it has one.
    from app.queue.queue_model import QueueItem

    raw = 80_366_522.0
    try:
        from app.queue.eta import MachineSpeed, bounded
        eta = bounded(raw, 240.0, 0.1, MachineSpeed())
    except ImportError:
        eta = raw
    w.queue.model.add(QueueItem(9001, str(audio / "lecture-week-3.wav"), state="running",
                                duration=240.0, progress=0.1, eta=eta))
    table.clearSelection()
    s.shot("3-time-left")
    print("rows in the queue:", w.queue.model.rowCount())

    # 4: the language of a finished file (editable now: it transcribes again).
    from app.queue.queue_model import COL_LANGUAGE

    table.selectRow(0)
    table.setFocus()
    table.edit(w.queue.model.index(0, COL_LANGUAGE))
    s.shot("4-language-of-a-finished-file")
    from PySide6.QtWidgets import QAbstractItemDelegate

    editor = table.indexWidget(w.queue.model.index(0, COL_LANGUAGE))
    if editor is not None:
        table.closeEditor(editor, QAbstractItemDelegate.EndEditHint.NoHint)
    table.setFocus()
    s.settle()

    # 5: Help > Keyboard shortcuts.
    def grab_and_close(name):
        def run():
            s.shot(name)
            modal = QApplication.activeModalWidget()
            if modal is not None:
                modal.close()
        QTimer.singleShot(600, run)

    grab_and_close("5-keyboard-shortcuts")
    w.open_shortcuts()
    s.settle()

    # 6: exporting: the Export dialog, or the old one-format menu.
    table.selectRow(0)
    if hasattr(w, "open_export_dialog"):
        dialog = w.open_export_dialog()
        dialog.move(300, 120)
        s.shot("6-export")
        dialog.reject()
    else:
        w.export_menu.popup(w.mapToGlobal(w.rect().topLeft()) + w.rect().center() / 3)
        s.shot("6-export")
        w.export_menu.close()
    s.settle()

    # 7: the Models dialog after choosing a local model folder.
    from app.models.model_manager import ModelManagerDialog

    local = TREE / "tests" / "models" / "qwen3-asr-tiny"
    dialog = ModelManagerDialog("", False, w)
    dialog.show()
    dialog.use_folder(str(local))
    if not dialog.isVisible():   # it closes after a choice now: this is it opened again
        dialog = ModelManagerDialog(str(local), False, w)
        dialog.show()
    dialog.move(150, 100)
    s.shot("7-models-local-folder")
    dialog.close()

    w.close()
    client.shutdown()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # The Models dialog's download-size lookup may still wait on the network (none here):
    # leave without joining its thread.
    os._exit(code)
