"""Screenshots of the live window two hours into a session (issue 30), on a real X server:

    xvfb-run -a -s "-screen 0 1400x900x24" python tests/bench/shots_live_two_hours.py [--out docs/screenshots]

The session is synthetic (bench_live_window.session: 1,800 committed lines, one per 4 s), delivered
as caption events; then a tentative line. Shots: following the newest line, and scrolled up to
read while 20 more lines arrive (the view stays where the reader is).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("QWEN3_ASR_DATA_DIR", tempfile.mkdtemp(prefix="shots-live-"))
os.environ.setdefault("QT_QPA_PLATFORM", "xcb")

from bench_live_window import StubClient, session  # noqa: E402
from screenshots import Shooter  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/screenshots")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication

    from app.backend.worker import CaptionEvent
    from app.live.live_window import LiveWindow
    from app.none_refs import keep_none_alive
    from app.settings import Settings

    app = QApplication.instance() or QApplication(sys.argv[:1])
    keeper = keep_none_alive(app)   # thousands of void Qt calls: see app/none_refs.py  # noqa: F841
    shooter = Shooter(app, Path(args.out))
    segments = session(1820)
    live = LiveWindow(StubClient(), Settings())
    live.move(0, 0)
    live.resize(760, 420)
    live.show()
    live.stream_id = 1
    live.status.setText("Listening…")
    for n, seg in enumerate(segments[:1800]):
        live._stream_captions(1, CaptionEvent(n, (seg,), ""))
    live._stream_captions(1, CaptionEvent(1800, (), "please send the report to"))
    shooter.shot("i30-live-2h-following", live)
    bar = live.captions.verticalScrollBar()
    bar.setValue(bar.maximum() - 40 * live.captions.fontMetrics().height())
    for n, seg in enumerate(segments[1800:], start=1800):
        live._stream_captions(1, CaptionEvent(n, (seg,), "and the numbers"))
    shooter.shot("i30-live-2h-scrolled-up", live)
    print(f"lines shown: {len(live.committed_segments)}; last: {live.captions.toPlainText().splitlines()[-2]}")
    live.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
