"""Screenshots of the live window under Xvfb (docs/screenshots/README.md, issue 35).

The trained tiny model hears espeak-ng speech played as the live input; a private PulseAudio
server with a second null sink ("Calls") gives the input list its sound-server sources. Works on
older checkouts too (then it skips what they lack), for before/after pairs.

    Xvfb :99 -screen 0 1000x620x24 &  DISPLAY=:99 QT_QPA_PLATFORM=xcb QWEN3_ASR_DATA_DIR=$(mktemp -d) \
        python tools/screenshot_live_window.py REPO OUT_PREFIX
"""
import os
import subprocess
import sys
import time
from pathlib import Path

repo, prefix = sys.argv[1], sys.argv[2]
sys.path[:0] = [repo, os.path.join(repo, "tests")]
os.chdir(repo)
from pulse_helpers import pulse_null_sink
import numpy as np, soundfile as sf

def speech(path, out_dir):
    from conftest import espeak_wav
    parts = []
    for i, text in enumerate(["Where is the story?", "Can you take the cat, please?",
                              "Kate, please give my bag.", "I think they opened my tree before dinner."]):
        a, sr = sf.read(espeak_wav(Path(out_dir) / f"s{i}.wav", text), dtype="float32")
        parts += [a, np.zeros(int(1.3 * sr), np.float32)]
    sf.write(path, np.concatenate([np.zeros(8000, np.float32)] + parts), 16000)

with pulse_null_sink() as pulse:
    pulse.pactl("load-module", "module-null-sink", "sink_name=calls", "sink_properties=device.description=Calls")
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from app.backend.engine_client import EngineClient
    from app.live.live_window import LiveWindow
    from app.settings import Settings
    from engine.audio.recorder import FileSource
    client = EngineClient()
    client.load_model(os.path.join(repo, "tests/models/qwen3-asr-tiny"))
    deadline = time.time() + 120
    while not client.model_dir and time.time() < deadline:
        app.processEvents(); time.sleep(0.05)
    live = LiveWindow(client, Settings())
    live.move(0, 0); live.resize(760, 440); live.show()
    talk = str(Path(prefix).parent / "talk.wav")
    speech(talk, Path(prefix).parent)
    live.start_source(FileSource(talk, speed=1.5), "talk.wav")
    deadline = time.time() + 120
    while (live.source is not None or live.stream_id is not None) and time.time() < deadline:
        app.processEvents(); time.sleep(0.02)
    for _ in range(20):
        app.processEvents(); time.sleep(0.05)
    subprocess.run(["import", "-window", "root", "-crop", "760x440+0+0", prefix + "-captions.png"], check=True)
    live.device_combo.showPopup()
    for _ in range(20):
        app.processEvents(); time.sleep(0.05)
    subprocess.run(["import", "-window", "root", "-crop", "760x440+0+0", prefix + "-inputs.png"], check=True)
    live.device_combo.hidePopup()
    combo = live.device_combo
    pick = next((i for i in range(combo.count()) if "Calls" in combo.itemText(i)),
                next(i for i in range(combo.count()) if "System audio" in combo.itemText(i)))
    combo.setCurrentIndex(pick)
    live.close()
    live2 = LiveWindow(client, Settings())
    live2.move(0, 0); live2.resize(760, 440); live2.show()
    for _ in range(20):
        app.processEvents(); time.sleep(0.05)
    print("chosen before reopening:", combo.itemText(pick), "; after:", live2.device_combo.currentText())
    subprocess.run(["import", "-window", "root", "-crop", "760x440+0+0", prefix + "-reopened.png"], check=True)
    live2.close()
    try:
        from app.settings.settings_dialog import SettingsDialog
        from app import settings as S
        st = Settings(); st.set(S.WATCH_DIR, "/home/me/Recordings/inbox"); st.set(S.WATCH_OUTPUT_DIR, "/home/me/Transcripts")
        st.set(S.WATCH_FORMATS, "srt,vtt-karaoke,txt"); st.sync()
        d = SettingsDialog(Settings()); d.tabs.setCurrentWidget(d.watch_page); d.move(0, 0); d.show()
        for _ in range(20):
            app.processEvents(); time.sleep(0.05)
        g = d.frameGeometry()
        subprocess.run(["import", "-window", "root", "-crop", f"{g.width()}x{g.height()}+0+0", prefix + "-watch-settings.png"], check=True)
    except (ImportError, AttributeError) as exc:
        print("no watch folder page:", exc)
    print("committed:", [s.text for s in live.committed_segments])
    client.shutdown()
