"""Screenshot of per-file speaker counts and remembered voices under Xvfb (docs/screenshots/README.md,
issue 34).

The engine is the tests' stand-in whose speakers come from the real diarizer (GE2E) over espeak-ng
conversations (tests/test_app_speaker_files.py); the words are stand-ins. "Alice" is renamed and
remembered in the first file; the second file names her by itself, and its other speaker, just
renamed "Bob", is selected, so "Remember this voice" is offered.

    Xvfb :99 -screen 0 1180x720x24 &  DISPLAY=:99 QT_QPA_PLATFORM=xcb QWEN3_ASR_DATA_DIR=$(mktemp -d) \
        python tools/screenshot_speaker_files.py OUT.png
"""
import subprocess
import sys
import tempfile
import time
from pathlib import Path

repo = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(repo), str(repo / "tests")]
out = sys.argv[1]

from PySide6.QtWidgets import QApplication

app = QApplication([])

import test_app_speaker_files as double
from conversations import make_conversation, write_wav
from speaker_weights import ge2e_weights

from app import settings as S
from app.backend.engine_client import EngineClient
from app.history import History
from app.main_window import MainWindow
from app.paths import history_file
from app.queue.queue_model import COL_SPEAKERS
from app.settings import Settings
from engine.pipelines.diarize import GE2EEmbedder


def pump(until=lambda: False, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline and not until():
        app.processEvents()
        time.sleep(0.02)


double._EMBEDDER.append(GE2EEmbedder(str(ge2e_weights())))
folder = Path(tempfile.mkdtemp())
files = []
for name, seed in (("interview.wav", 31), ("podcast.wav", 37), ("lecture.wav", 41), ("voice-note.wav", 43)):
    write_wav(folder / name, make_conversation(2, 0.35, seed=seed, turn_range=(2.0, 6.0)).samples)
    files.append(folder / name)

settings = Settings()
for key, value in ((S.MODEL, str(folder)), (S.SPEAKERS, "2"), (S.PARALLEL_FILES, 1)):
    settings.set(key, value)
client = EngineClient(double._load)
w = MainWindow(client, History(history_file()), settings)
w.move(0, 0)
w.resize(1180, 720)
w.show()
w.start()
pump(lambda: client.model_dir != "")
model = w.queue.model
panel = w.transcript_view.speakers


def done(job):
    pump(lambda: model.item(job).state == "done")


def rename(job, row, name):
    w.queue_panel.table.selectRow(model.row_of(job))
    pump(timeout=0.3)
    panel.list.setCurrentRow(row)
    panel.rename(name)


(first,) = w.add_paths(files[:1])
done(first)
rename(first, 0, "Alice")
panel.remember_voice()
second, third, fourth = w.add_paths(files[1:])
model.setData(model.index(model.row_of(third), COL_SPEAKERS), "auto")
model.setData(model.index(model.row_of(fourth), COL_SPEAKERS), "off")
for job in (second, third, fourth):
    done(job)
alice = next(k for k, v in model.item(second).transcript.speaker_names.items() if v == "Alice")
other = "S2" if alice == "S1" else "S1"
rename(second, [panel.list.item(r).data(256) for r in range(panel.list.count())].index(other), "Bob")
pump(timeout=1.0)
print("second file's names:", model.item(second).transcript.speaker_names)
subprocess.run(["import", "-window", "root", "-crop", "1180x720+0+0", out], check=True)
client.shutdown()
