"""Screenshots of the app starting on broken data of its own (issue 18), on a real X server.

    python tests/bench/startup_screenshots.py --model DIR [--out /tmp/shots18]

Each case prepares a data folder (QWEN3_ASR_DATA_DIR), starts the real app
(``python -m app``) under Xvfb as a user would, waits for its window, saves the
whole screen with ImageMagick's ``import`` and stops the app. Cases: a history of
random bytes, a history row with truncated JSON, a history locked by another
process, hand-edited settings, a read-only data folder (a real read-only bind
mount, as root) and a second start handing its file to the running app. Prints
each case's exit status and what the app wrote on stderr.
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
sys.path.insert(0, str(REPO / "tests" / "bench"))

from screenshots import ensure_display  # noqa: E402

LOCK_HOLDER = ("import sqlite3, sys, time\n"
               "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
               "db.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
               "db.execute('BEGIN EXCLUSIVE')\n"
               "print('locked', flush=True)\n"
               "time.sleep(600)\n")


def settings_ini(folder: Path, model: str, extra: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "settings.ini").write_text(f"[model]\npath={model}\n{extra}")


def saved_history(path: Path, texts: list[str], truncate_id: int | None = None) -> None:
    from app.history import History
    from engine.text.types import Segment, Transcript

    history = History(path)
    for text in texts:
        file_id = history.add_file(f"/home/user/audio/{text.split()[0].lower()}.wav")
        history.save_transcript(file_id, Transcript(text, "English", 3.0, [Segment(0.0, 3.0, text)]))
    if truncate_id is not None:
        history._db.execute("UPDATE transcripts SET json = substr(json, 1, 25) WHERE file_id = ?", (truncate_id,))
    history.close()


def shoot(name: str, data: Path, out: Path, files=(), settle: float = 25.0, before_shot=None):
    """Start the app on ``data``, wait, save the screen; returns (the process, its output)."""
    env = dict(os.environ, QWEN3_ASR_DATA_DIR=str(data), QT_QPA_PLATFORM="xcb")
    log = tempfile.TemporaryFile("w+")
    app = subprocess.Popen([sys.executable, "-m", "app", *map(str, files)], cwd=REPO, env=env,
                           stdout=log, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline and app.poll() is None:
        time.sleep(0.5)
    if before_shot is not None:
        before_shot()
    path = out / f"{name}.png"
    subprocess.run(["import", "-window", "root", str(path)], check=True)
    status = app.poll()
    if status is None:
        app.terminate()
        try:
            app.wait(10)
        except subprocess.TimeoutExpired:
            app.kill()
    log.seek(0)
    text = log.read()
    print(f"== {name}: {path}\n   still running when shot: {status is None}\n   output: "
          + " / ".join(ln for ln in text.splitlines() if ln.strip() and "propagateSizeHints" not in ln)[:600])
    return app, text


def read_only_mount(folder: Path):
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
    return lambda: subprocess.run(["umount", str(folder)], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", default="/tmp/shots18")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    xvfb = ensure_display()
    work = Path(tempfile.mkdtemp(prefix="shots18-"))
    try:
        texts = ["Welcome to the weekly meeting.", "Budget numbers for the third quarter.",
                 "Remember to export the subtitles."]
        if "damaged" in args.only or not args.only:
            d = work / "damaged"
            settings_ini(d, args.model)
            (d / "history.sqlite3").write_bytes(os.urandom(64 * 1024))
            shoot("1-damaged-history", d, out)
        if "unreadable" in args.only or not args.only:
            d = work / "rows"
            settings_ini(d, args.model)
            saved_history(d / "history.sqlite3", texts, truncate_id=2)
            shoot("2-unreadable-row", d, out)
        if "locked" in args.only or not args.only:
            d = work / "locked"
            settings_ini(d, args.model)
            saved_history(d / "history.sqlite3", texts)
            holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(d / "history.sqlite3")],
                                      stdout=subprocess.PIPE, text=True)
            holder.stdout.readline()
            shoot("3-locked-history", d, out)
            holder.kill()
        if "settings" in args.only or not args.only:
            d = work / "settings"
            settings_ini(d, args.model, "[window]\ngeometry=garbage\nsplitter=@ByteArray(zz)\n"
                                        "[transcribe]\nparallel_files=lots\n")
            saved_history(d / "history.sqlite3", texts)
            shoot("4-bad-settings", d, out)
        if "read-only" in args.only or not args.only:
            d = work / "readonly"
            settings_ini(d, args.model)
            saved_history(d / "history.sqlite3", texts)
            undo = read_only_mount(d)
            try:
                shoot("5-read-only-data-folder", d, out)
            finally:
                undo()
        if args.only and "second" not in args.only:
            return 0
        d = work / "second"
        settings_ini(d, args.model)
        first_log = tempfile.TemporaryFile("w+")
        env = dict(os.environ, QWEN3_ASR_DATA_DIR=str(d), QT_QPA_PLATFORM="xcb")
        first = subprocess.Popen([sys.executable, "-m", "app"], cwd=REPO, env=env, stdout=first_log,
                                 stderr=subprocess.STDOUT, text=True)
        from app.single_instance import SingleInstance

        socket = Path(SingleInstance(d).path)   # the first instance's socket, in the user's private folder
        deadline = time.monotonic() + 120
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(5)   # its window shows
        clip = work / "handed-over.wav"
        subprocess.run(["espeak-ng", "-w", str(clip), "This file was handed over by a second start."],
                       check=True, capture_output=True)
        second, text = shoot("6-second-start-hands-over", d, out, files=[clip], settle=90,
                             before_shot=lambda: time.sleep(20))   # the running app queues it (slow on a busy CPU)
        print(f"   second start exit status: {second.returncode}")
        first.terminate()
        first.wait(10)
        for line in (d / "logs" / "qwen3-asr-desktop.log").read_text().splitlines():
            print("   log:", line[:200])
        first_log.seek(0)
        print("   running app's output: " + " / ".join(
            ln for ln in first_log.read().splitlines() if ln.strip() and "propagateSizeHints" not in ln)[:600])
    finally:
        if xvfb is not None:
            xvfb.terminate()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
