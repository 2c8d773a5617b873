"""Entry point: ``qwen3-asr-desktop`` / ``python -m app [--model DIR] [FILE ...]``."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from app import APP_NAME, __version__

EXIT_OK, EXIT_FAILED = 0, 1


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="qwen3-asr-desktop",
                                     description=f"{APP_NAME}: local speech-to-text with Qwen3-ASR.")
    parser.add_argument("files", nargs="*", help="audio or video files (or folders) to queue")
    parser.add_argument("--model", metavar="DIR", help="model folder to use (saved in the settings)")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--self-test", action="store_true",
                        help="load --model (or the model saved in Settings), transcribe a "
                             "generated 2 s clip, print it and exit")
    return parser.parse_args(argv)


def self_test(model_dir: str | None, out=sys.stdout) -> int:
    """Load the engine and transcribe a synthetic clip, without any window."""
    if not model_dir:
        model_dir = saved_model()
    if not model_dir:
        print("self-test failed: no model given and none saved in Settings; "
              "pass --model DIR", file=sys.stderr)
        return EXIT_FAILED
    try:
        import numpy as np
        import soundfile as sf

        import engine

        started = time.monotonic()
        eng = engine.load(model_dir)
        loaded = time.monotonic() - started
        rng = np.random.default_rng(0)
        t = np.arange(32000) / 16000.0
        clip = (0.3 * np.sin(2 * np.pi * 220.0 * t) + 0.02 * rng.standard_normal(t.size))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "self-test.wav"
            sf.write(str(path), clip.astype(np.float32), 16000)
            job = eng.submit_file(str(path))
            while eng.has_work():
                eng.step()
            if job.state != "done":
                raise RuntimeError(job.error or f"the job ended as {job.state}")
            transcript = job.transcript
        print(f"{APP_NAME} {__version__} self-test", file=out)
        print(f"model: {eng.model_dir} on {eng.device} ({eng.dtype}), loaded in {loaded:.1f} s",
              file=out)
        print(f"transcript: {transcript.text!r} (language: {transcript.language})", file=out)
        print("self-test passed", file=out)
        return EXIT_OK
    except Exception as exc:
        print(f"self-test failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


def saved_model() -> str:
    """The model folder saved in Settings by the app ("" when none)."""
    from app import settings as S
    from app.settings import Settings

    return Settings().get(S.MODEL)


def no_display_message(environ=None, platform: str = sys.platform) -> str | None:
    """Why no window can open here, in words, or None when a display is there.

    Without this check Qt aborts with a misleading "xcb-cursor0 is needed" message.
    """
    env = os.environ if environ is None else environ
    if not platform.startswith("linux"):
        return None
    qpa = env.get("QT_QPA_PLATFORM", "")
    if qpa and not qpa.startswith(("xcb", "wayland")):
        return None  # offscreen, vnc, eglfs...: the user chose a platform without a display
    if env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return ("No display found (neither DISPLAY nor WAYLAND_DISPLAY is set), so the window cannot "
            "open.\nTo transcribe without a screen use the command line:\n"
            "    .venv/bin/qwen3-asr transcribe FILE --model DIR\n"
            "or check a model with: bash scripts/run_app.sh --self-test")


def run_gui(args: argparse.Namespace, loader=None) -> int:
    problem = no_display_message()
    if not problem and sys.platform.startswith("linux") and os.environ.get("DISPLAY") \
            and os.environ.get("QT_QPA_PLATFORM", "xcb").startswith("xcb") and not os.environ.get("WAYLAND_DISPLAY"):
        from app.qt_libraries import missing_libraries_message

        problem = missing_libraries_message()   # else Qt aborts naming the wrong library
    if problem:
        print(problem, file=sys.stderr)
        return EXIT_FAILED
    from PySide6.QtWidgets import QApplication

    from app.logging_setup import setup_logging

    setup_logging()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    from app.paths import data_dir
    from app.single_instance import start_or_hand_over

    guard = start_or_hand_over(data_dir(), args.files)
    if guard is None:   # the running app has the files now
        return EXIT_OK
    window, client = build_app(app, args, loader)
    guard.files_received.connect(window.receive_files)
    window.show()
    window.start()
    if args.files:
        window.add_paths(args.files)
    code = app.exec()
    client.shutdown()
    return code


def build_app(app, args, loader=None):
    """Create settings, history, the engine thread and the main window (tests call this too)."""
    from app import settings as S
    from app.backend.engine_client import EngineClient
    from app.history.history_open import open_history
    from app.main_window import MainWindow
    from app.none_refs import keep_none_alive
    from app.paths import history_file
    from app.settings import Settings
    from app.startup_notices import show_startup_notices
    from app.widgets.theme import apply_theme, follow_system_scheme

    app._none_keeper = keep_none_alive(app)   # PySide6 6.12.0 on Python 3.11 (app/none_refs.py)
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setOrganizationName("Qwen3ASR")
    try:
        import resources

        app.setWindowIcon(resources.app_icon())
        app.setDesktopFileName(resources.APP_ID)
    except Exception:  # icons are cosmetic: a missing resources package must not stop the app
        pass
    settings = Settings()
    if getattr(args, "model", None):
        settings.set(S.MODEL, str(Path(args.model).resolve()))
        settings.sync()
    apply_theme(app, settings.get(S.THEME))
    follow_system_scheme(app, lambda: settings.get(S.THEME))
    client = EngineClient(loader)
    opening = open_history(history_file())   # damaged, locked or unwritable: a working history and a message
    window = MainWindow(client, opening.history, settings)
    window.restore_geometry()
    show_startup_notices(window, opening)
    app.aboutToQuit.connect(lambda: client.shutdown())
    return window, client


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.version:
        print(f"qwen3-asr-desktop {__version__}")
        return EXIT_OK
    if args.self_test:
        return self_test(args.model)
    return run_gui(args)


if __name__ == "__main__":
    sys.exit(main())
