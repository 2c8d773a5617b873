"""Screenshots of every view of the desktop app, taken on a real X server (Xvfb).

    python tests/bench/screenshots.py --model DIR [--out FOLDER] [--dark] [FILE FILE]

Starts ``Xvfb :99`` when no DISPLAY is set, drops two files on the main
window (spoken with espeak-ng when none are given), waits for their
transcripts, opens the live-captions window fed from a WAV through
FileSource, and saves PNGs of: the empty window, the queue, the transcript
view (plain and searched), the history, the live window (idle, captioning,
stopped), every settings tab, the model manager and the about box. Each shot is the whole
X screen (``import -window root``), so it shows what a user would see,
window decorations aside; without ImageMagick it falls back to Qt's grab().
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SCREEN = "1400x900x24"


def ensure_display() -> subprocess.Popen | None:
    if os.environ.get("DISPLAY"):
        return None
    display = ":99"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", SCREEN, "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if Path(f"/tmp/.X11-unix/X{display[1:]}").exists():
            break
        time.sleep(0.05)
    os.environ["DISPLAY"] = display
    return xvfb


def speak(path: Path, text: str) -> Path:
    raw = path.with_suffix(".raw.wav")
    subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["sox", "-R", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(path)], check=True)
    raw.unlink()
    return path


def _repeat(source: Path, dest: Path, minutes: float) -> Path:
    import numpy as np
    import soundfile as sf

    audio, rate = sf.read(str(source), dtype="float32")
    reps = int(minutes * 60 * rate / len(audio)) + 1
    sf.write(str(dest), np.tile(audio, reps), rate)
    return dest


class Shooter:
    def __init__(self, app, out: Path):
        self.app, self.out = app, out
        out.mkdir(parents=True, exist_ok=True)

    def settle(self, seconds: float = 0.6):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.app.processEvents()
            time.sleep(0.02)

    def wait(self, condition, timeout: float = 120.0, what: str = ""):
        # SHOTS_TIMEOUT_SCALE stretches every wait on a busy machine (the 30 min file's VAD).
        end = time.monotonic() + timeout * float(os.environ.get("SHOTS_TIMEOUT_SCALE", "1"))
        while not condition():
            if time.monotonic() > end:
                raise TimeoutError(f"timed out waiting for {what}")
            self.app.processEvents()
            time.sleep(0.02)

    def shot(self, name: str, widget) -> Path:
        widget.raise_()
        widget.activateWindow()
        self.settle()
        path = self.out / f"{name}.png"
        geometry = widget.frameGeometry()
        crop = f"{geometry.width()}x{geometry.height()}+{geometry.x()}+{geometry.y()}"
        if shutil.which("import"):
            subprocess.run(["import", "-window", "root", "-crop", crop, "+repage", str(path)],
                           check=True)
        else:
            widget.grab().save(str(path))
        print(f"saved {path}")
        return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="model folder to load")
    parser.add_argument("--out", default="screenshots", help="folder for the PNGs")
    parser.add_argument("--dark", action="store_true", help="use the dark theme")
    parser.add_argument("--search", help="word to search in the transcript shot (default: its first word)")
    parser.add_argument("--chunk-seconds", type=int, default=0, metavar="N",
                        help="the Longest chunk setting in seconds (default: 0, automatic); "
                             "short chunks suit a small test model")
    parser.add_argument("files", nargs="*", help="two audio files to drop (default: spoken)")
    args = parser.parse_args(argv)
    if not 0 <= args.chunk_seconds <= 180:
        parser.error("--chunk-seconds must be 0 (automatic) to 180")
    xvfb = ensure_display()
    os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    work = Path(tempfile.mkdtemp(prefix="qwen3-asr-shots-"))
    os.environ["QWEN3_ASR_DATA_DIR"] = str(work / "data")  # fresh history and settings
    try:
        return take_screenshots(args, work)
    finally:
        if xvfb is not None:
            xvfb.terminate()
        shutil.rmtree(work, ignore_errors=True)


def take_screenshots(args, work: Path) -> int:
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent
    from PySide6.QtWidgets import QApplication

    from app import settings as S
    from app.main import build_app, parse_args

    files = [Path(f) for f in args.files] or [
        speak(work / "welcome.wav", "Welcome to the meeting. Today we talk about local speech "
                                    "recognition on your own computer."),
        speak(work / "notes.wav", "Remember to export the subtitles before Friday."),
    ]
    # A long third file keeps the queue busy long enough to show progress bars with ETAs.
    minutes = float(os.environ.get("SHOTS_LECTURE_MINUTES", "30"))  # shorter on a busy machine
    files.append(_repeat(files[0], work / "lecture.wav", minutes=minutes))
    app = QApplication.instance() or QApplication(sys.argv[:1])
    if args.chunk_seconds:   # stored before build_app reads the settings (fresh data dir)
        from app.settings import Settings

        stored = Settings()
        stored.set(S.MAX_CHUNK_SECONDS, args.chunk_seconds)
        stored.sync()
    window, client = build_app(app, parse_args(["--model", args.model]))
    if args.dark:
        window.settings.set(S.THEME, "dark")
        window.apply_settings()
    shooter = Shooter(app, Path(args.out))
    window.resize(1320, 780)
    window.move(40, 40)
    window.show()
    window.start()
    shooter.wait(lambda: client.model_dir != "", what="the model to load")
    shooter.shot("0-main-empty", window)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(f)) for f in files])
    window.dropEvent(QDropEvent(QPointF(20, 20), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
    shooter.wait(lambda: any(i.state == "running" and i.eta > 0 for i in window.queue.model.items),
                 what="a running file")
    window.queue_panel.table.selectRow(2)
    shooter.shot("1-main-queue-running", window)
    model = window.queue.model
    shooter.wait(lambda: all(i.state in ("done", "failed") for i in model.items), what="transcripts")
    window.queue_panel.table.selectRow(0)
    shooter.shot("2-transcript-view", window)
    first_word = (window.transcript_view.model.segments[0].text.split() or [""])[0] \
        if window.transcript_view.model.segments else ""
    window.transcript_view.search.setText(args.search or first_word)
    window.transcript_view.model.set_playhead(0.5)
    shooter.shot("3-transcript-search", window)
    window.transcript_view.search.clear()
    window.transcript_view.model.set_playhead(None)
    window.tabs.setCurrentWidget(window.history_panel)
    window.history_panel.list.setCurrentRow(0)
    shooter.shot("4-history", window)
    window.tabs.setCurrentWidget(window.queue_panel)

    from engine.audio.recorder import FileSource

    live = window.open_live_window()
    live.move(120, 160)
    live.record_check.setChecked(False)
    shooter.shot("5-live-window-idle", live)
    try:
        # The long file, so the shot shows committed lines and a tentative tail together.
        live.start_source(FileSource(str(files[-1]), speed=2.0), files[-1].name)
        try:
            shooter.wait(lambda: live.committed and live.tentative, timeout=30,
                         what="committed and tentative live text")
        except TimeoutError as exc:
            print(f"note: {exc}")
    except Exception as exc:  # the engine's streaming may be missing: still show the window
        live.status.setText(f"Live captions unavailable: {exc}")
    shooter.shot("6-live-window", live)
    if live.source is not None:
        live.stop()
    shooter.wait(lambda: live.stream_id is None, timeout=60, what="the live stream")
    shooter.shot("7-live-window-finished", live)
    live.close()

    settings_dialog = _open_settings(window)
    settings_dialog.move(200, 120)
    for tab in range(settings_dialog.tabs.count()):
        settings_dialog.tabs.setCurrentIndex(tab)
        name = settings_dialog.tabs.tabText(tab).lower()
        shooter.shot(f"8-settings-{tab + 1}-{name}", settings_dialog)
    settings_dialog.reject()
    manager = window.open_model_manager(first_run=True)
    manager.move(220, 140)
    shooter.shot("9-model-manager", manager)
    manager.reject()
    about = window.open_about()
    about.move(300, 200)
    shooter.shot("10-about", about)
    about.reject()
    window.close()
    client.shutdown()
    return 0


def _open_settings(window):
    from app.settings.settings_dialog import SettingsDialog

    dialog = SettingsDialog(window.settings, window)
    dialog.show()
    return dialog


if __name__ == "__main__":
    sys.exit(main())
