"""Playback speed through a real sound server: the app's player plays a 3 s 1 kHz tone at each speed
into a private PulseAudio null sink, its monitor is recorded, and the heard tone's length and FFT
peak are printed (pitch kept: 1000 Hz at every speed; length 3 s / speed).

    python tests/bench/playback_speed_check.py 0.5 1.0 1.5 2.0

Not a unit test: on a loaded machine the sound server can underrun, which shortens what is heard.
Needs pulseaudio, pactl, paplay and PortAudio's ALSA pulse plugin (tests/pulse_helpers.py).
"""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from pulse_helpers import pulse_null_sink  # noqa: E402


def main(speeds) -> None:
    with pulse_null_sink():
        import sounddevice as sd

        import app.transcript.player as pm

        qt = QApplication.instance() or QApplication([])
        t = np.arange(3 * 16000) / 16000
        wav = Path("/tmp/playback-speed-tone.wav")
        sf.write(wav, (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), 16000, subtype="PCM_16")
        for speed in speeds:
            rec = []
            stream = sd.InputStream(device="pulse", samplerate=16000, channels=1, dtype="float32",
                                    callback=lambda d, f, ti, st: rec.append(d[:, 0].copy()))
            stream.start()
            time.sleep(0.5)
            player = pm.Player()
            player.set_rate(speed)
            player.play(str(wav), 0.0)
            t0 = time.monotonic()
            while time.monotonic() - t0 < 3.0 / speed + 1.5:
                qt.processEvents()
                time.sleep(0.01)
            player.stop()
            stream.stop()
            stream.close()
            x = np.concatenate(rec)
            loud = np.flatnonzero(np.abs(x) > 0.05)
            heard = x[loud[0]:loud[-1]]
            mid = heard[len(heard) // 10:-len(heard) // 10]
            spec = np.abs(np.fft.rfft(mid * np.hanning(len(mid))))
            print(f"{player.backend} player at {speed}x: heard {len(heard) / 16000:.2f} s of tone "
                  f"(file 3.00 s, expected {3.0 / speed:.2f} s), FFT peak "
                  f"{np.fft.rfftfreq(len(mid), 1 / 16000)[spec.argmax()]:.0f} Hz", flush=True)


if __name__ == "__main__":
    main([float(a) for a in sys.argv[1:]] or [0.5, 1.0, 1.5, 2.0])
