"""Issue 37's cases, before and after: a markdown table. Not collected by pytest.

    python tests/bench/hostile_round3_table.py --before /tmp/i37-before [--after .] [--timeout 60]

Each case runs in its own subprocess with ``PYTHONPATH`` (and the working folder) set to one
checkout, under ``/usr/bin/time -v`` (peak memory = maximum resident set size) and a timeout;
the table shows the lines the user sees (``error:``/``note:``/``warning:`` lines, or what the
case's script prints), the exit status, peak memory and wall time. The model is the trained
tiny test model (``tests/models/qwen3-asr-tiny``). Make the "before" checkout with
``git worktree add /tmp/i37-before bcd9af6``.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests" / "models" / "qwen3-asr-tiny"
SHOWN = ("error:", "note:", "warning:", "Qwen3 ASR", "SHOW:")

# --- the cases that are scripts (they must run on both checkouts) ----------------------------

LIVE_FEED = r"""
import sys, time, numpy as np, soundfile as sf, engine
eng = engine.load(sys.argv[1], device="cpu", dtype="float32")
speech, _ = sf.read(sys.argv[2], dtype="float32")
stream = eng.open_stream(language="English")
stream.feed(np.zeros(600 * 16000, np.float32))          # ten minutes in one call
job = eng.submit_file(np.concatenate([speech] * 3), language="English")
steps, longest, most = 0, 0.0, 0.0
while not job.finished:
    before, t = stream.duration, time.monotonic()
    eng.step()
    longest, most = max(longest, time.monotonic() - t), max(most, stream.duration - before)
    steps += 1
print(f"SHOW: file done after {steps} steps; longest step {longest:.1f} s; most audio taken in by one step "
      f"{most:.0f} s; stream at {stream.duration:.0f} of 600 s when the file finished")
"""

FEED_NONE = r"""
import sys, engine
eng = engine.load(sys.argv[1], device="cpu", dtype="float32")
try:
    eng.open_stream().feed(None)
except Exception as e:
    print(f"SHOW: {type(e).__name__}: {e}")
"""

IMPOSTOR = r"""
import getpass, hashlib, io, socket, sys, tempfile, threading
from pathlib import Path
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.single_instance import start_or_hand_over
data = Path(sys.argv[1]); data.mkdir(exist_ok=True)
key = f"{getpass.getuser()}\0{data.resolve()}".encode()
path = Path(tempfile.gettempdir()) / ("qwen3-asr-desktop-" + hashlib.sha1(key).hexdigest()[:16])
path.unlink(missing_ok=True)
srv = socket.socket(socket.AF_UNIX); srv.bind(str(path)); srv.listen(1)   # another user's process, first
got = []
def serve():
    c, _ = srv.accept(); got.append(c.recv(65536)); c.sendall(b"ok\n"); got.append(c)
threading.Thread(target=serve, daemon=True).start()
out = io.StringIO()
try:
    guard = start_or_hand_over(data, ["/home/alice/interview.wav"], out=out)
    verdict = "this app starts (first instance)" if guard is not None else "this app exits 0"
except SystemExit as e:
    verdict = f"this app exits {e.code}"
print(f"SHOW: {verdict}; the impostor received {got[0].decode().strip() if got else 'nothing'!s}")
path.unlink(missing_ok=True)
"""

RACE = r"""
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.single_instance import start_or_hand_over
open(sys.argv[2], "a").close()
while open(sys.argv[3]).read() != "go":
    pass
guard = start_or_hand_over(sys.argv[1], [])
print("first" if guard is not None else "handed", flush=True)
if guard is not None:
    QTimer.singleShot(2000, app.quit)
    app.exec()
"""

RACE_STEPS = r"""
import sys
from PySide6.QtWidgets import QApplication
app = QApplication([])
from app.single_instance import SingleInstance
a, b = SingleInstance(sys.argv[1]), SingleInstance(sys.argv[1])
if hasattr(a, "take_lock"):        # what start_or_hand_over checks first now
    first_a, first_b = a.take_lock(), b.take_lock()
else:                              # what it checked before: is anyone answering?
    first_a, first_b = a.hand_over([]) == "none", b.hand_over([]) == "none"
up = bool(first_a and a.listen()) + bool(first_b and b.listen())
print(f"SHOW: A checks, B checks, A listens, B listens: {up} instance(s) up")
"""

RACE_DRIVER = r"""
import subprocess, sys, os, time
from pathlib import Path
work = Path(sys.argv[1]); work.mkdir(exist_ok=True)
firsts = 0
for trial in range(int(sys.argv[2])):
    go = work / f"go{trial}"; go.write_text("")
    procs = [subprocess.Popen([sys.executable, "-c", sys.argv[3], str(work / f"data{trial}"),
                               str(work / f"ready{trial}-{i}"), str(go)], stdout=subprocess.PIPE, text=True)
             for i in range(2)]
    while not all((work / f"ready{trial}-{i}").exists() for i in range(2)):
        time.sleep(0.01)
    go.write_text("go")
    outs = [p.communicate(timeout=60)[0].split() for p in procs]
    firsts += sum(o[:1] == ["first"] for o in outs) == 2
print(f"SHOW: two apps came up together in {firsts} of {sys.argv[2]} simultaneous double starts")
"""

FROZEN = r"""
import io, sys, time
from PySide6.QtWidgets import QApplication, QMessageBox
app = QApplication([])
from app import single_instance as si
shown = []
QMessageBox.warning = staticmethod(lambda parent, title, text, *a: shown.append(text))
if sys.argv[2] == "first":
    guard = si.start_or_hand_over(sys.argv[1], [])
    print("listening", flush=True)
    time.sleep(120)                                    # frozen: its event loop never runs
try:
    si.start_or_hand_over(sys.argv[1], ["a.wav"], out=sys.stdout)
except SystemExit as e:
    print(f"SHOW: exit {e.code}; dialog: {'yes' if shown else 'none'}")
    sys.exit(e.code)
"""

FROZEN_DRIVER = r"""
import subprocess, sys, os
first = subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[1], "first"], stdout=subprocess.PIPE, text=True)
assert first.stdout.readline().strip() == "listening"
second = subprocess.run(["xvfb-run", "-a", sys.executable, "-c", sys.argv[2], sys.argv[1], "second"],
                        capture_output=True, text=True, env=dict(os.environ, QT_QPA_PLATFORM="xcb"))
first.kill()
print(second.stdout.strip().splitlines()[-1] if second.stdout.strip() else second.stderr[-300:])
sys.exit(second.returncode)
"""

INT8 = r"""
import os, shutil, sys, warnings, numpy as np, soundfile as sf, torch
from pathlib import Path
import engine
from engine.network import int8_cache
warnings.simplefilter("always")
case, work, model0 = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
os.environ[int8_cache.CACHE_DIR_ENV] = str(work / "cache")
model = work / "model"; shutil.rmtree(model, ignore_errors=True); shutil.copytree(model0, model)
speech, _ = sf.read(sys.argv[4], dtype="float32")
def text():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = engine.load(model, device="cpu", dtype="float32", quantize="int8").transcribe(speech).text
    return t, [str(w.message) for w in caught if "int8" in str(w.message)]
first, _ = text()
path = int8_cache.cache_file(model, torch.float32)
if case == "zeroed":
    raw = bytearray(path.read_bytes()); head = 8 + int.from_bytes(raw[:8], "little")
    raw[head:] = bytes(len(raw) - head); path.write_bytes(bytes(raw))
    again, warned = text()
    print(f"SHOW: warnings: {warned or 'none'}; transcript {'unchanged' if again == first else 'CHANGED: ' + repr(again[:40])}")
elif case == "same-size":
    from safetensors.torch import load_file, save_file
    weights = next(model.glob("*.safetensors")); st = weights.stat()
    other = {k: (t * 0.5 if t.is_floating_point() else t) for k, t in load_file(str(weights)).items()}
    save_file(other, str(work / "o.bin"), metadata={"format": "pt"}); data = (work / "o.bin").read_bytes()
    with open(weights, "r+b") as f:
        f.write(data)
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    same_key = int8_cache.cache_file(model, torch.float32) == path
    print(f"SHOW: same size {len(data) == st.st_size}, mtime kept; cache entry {'REUSED (old int8 decoder)' if same_key else 'not reused (quantized again)'}")
elif case == "partial":
    dead = path.parent / f".{path.name}.4194305.partial"; dead.write_bytes(b"x" * 1000)
    text()
    print(f"SHOW: partial file of a killed writer after the next start: {'still there' if dead.exists() else 'removed'}")
"""

SETTINGS = r"""
import logging, sys
from pathlib import Path
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
logging.basicConfig(level=logging.WARNING, format="SHOW: log: %(message)s")
from app import settings as S
from app.settings import Settings
ini = Path(sys.argv[1]); ini.write_text(f"[transcribe]\nmax_chunk_seconds={sys.argv[2]}\n")
settings = Settings(QSettings(str(ini), QSettings.Format.IniFormat))
value = settings.get(S.MAX_CHUNK_SECONDS)
import engine
try:
    engine.load(sys.argv[3], device="cpu").submit_file(sys.argv[4], max_chunk_seconds=value or None)
    print(f"SHOW: engine gets max_chunk_seconds={value or None}: file queued")
except Exception as e:
    print(f"SHOW: engine gets {value}: every file fails: {type(e).__name__}: {' '.join(str(e).split())[:90]}")
from app.settings.settings_dialog import SettingsDialog
try:
    SettingsDialog(settings)
    print("SHOW: Settings dialog opens")
except Exception as e:
    print(f"SHOW: Settings dialog: {type(e).__name__}: {e}")
"""

DROP = r"""
import os, sys
from pathlib import Path
from app.queue.file_collect import collect_audio_files
work = Path(sys.argv[1]); work.mkdir(exist_ok=True)
fifo, zero = work / "x.wav", work / "zero.wav"
fifo.exists() or os.mkfifo(fifo)
zero.is_symlink() or zero.symlink_to("/dev/zero")
for path, reason in collect_audio_files([fifo, zero]).refused:
    print(f"SHOW: {path.name}: {reason}")
"""


def run(tree: Path, argv: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               QT_QPA_PLATFORM=os.environ.get("QT_QPA_PLATFORM", "offscreen"))
    started = time.monotonic()
    # time outside timeout: its peak memory and CPU include the killed command's
    proc = subprocess.run(["/usr/bin/time", "-v", "timeout", "-k", "5", str(int(timeout)), *argv],
                          capture_output=True, text=True, cwd=tree, env=env)
    seconds = time.monotonic() - started
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    cpu = sum(float(m) for m in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr))
    if proc.returncode in (124, 137):
        return dict(code="timeout", shown=f"(killed after {timeout:.0f} s)", seconds=seconds, cpu=cpu,
                    rss_mb=int(rss.group(1)) / 1024 if rss else None)
    text = proc.stdout + "\n" + proc.stderr
    raw = text.splitlines()
    lines = [line.removeprefix("SHOW: ") for line in raw if line.startswith(SHOWN)]
    for i, line in enumerate(raw):        # a raw Python warning: its line and the source line under it
        if "Warning: " in line and not line.startswith(SHOWN):
            lines += [line.strip(), raw[i + 1].strip()] if i + 1 < len(raw) else [line.strip()]
    if not lines and proc.returncode != 0:
        tail = [line for line in proc.stderr.splitlines()
                if line.strip() and not line.startswith(("\t", "Command exited", "Command terminated"))]
        lines = tail[-1:]
    if "Traceback" in proc.stderr:
        lines.append("(traceback)")
    return dict(code=proc.returncode, shown=" / ".join(lines) or "(nothing shown)",
                rss_mb=int(rss.group(1)) / 1024 if rss else None, seconds=seconds, cpu=cpu)


def cases(work: Path, speech: Path, long_file: Path):
    py = sys.executable
    cli = [py, "-m", "cli.main", "transcribe", "--model", str(MODEL), "--device", "cpu", "--quiet",
           "-o", str(work / "out"), "--overwrite"]
    for label, extra in [("--no-vad --max-chunk-seconds 1e-5", ["--no-vad", "--max-chunk-seconds", "1e-5"]),
                         ("--no-vad --max-chunk-seconds 0.001", ["--no-vad", "--max-chunk-seconds", "0.001"]),
                         ("--max-chunk-seconds 0", ["--max-chunk-seconds", "0"]),
                         ("--max-chunk-seconds -5", ["--max-chunk-seconds=-5"]),
                         ("--max-chunk-seconds nan", ["--max-chunk-seconds", "nan"]),
                         ("--max-chunk-seconds inf", ["--max-chunk-seconds", "inf"]),
                         ("--max-chunk-seconds 0.5", ["--max-chunk-seconds", "0.5"]),
                         ("--max-chunk-seconds 1e308", ["--max-chunk-seconds", "1e308"])]:
        yield "chunk length", label, cli + [str(speech)] + extra, "1e-5" in label or "0.001" in label
    yield ("chunk length", "3-hour file, --no-vad --max-chunk-seconds 1e9",
           cli + [str(long_file), "--no-vad", "--max-chunk-seconds", "1e9"], True)
    yield "KV cache", "--kv-cache-mb 4096 (a 7 s file)", cli + [str(speech), "--kv-cache-mb", "4096"], False
    yield ("KV cache", "--kv-cache-mb 200000 (more than the machine)",
           cli + [str(speech), "--kv-cache-mb", "200000"], False)
    yield "live", "one 10-minute feed() beside a file queue", [py, "-c", LIVE_FEED, str(MODEL), str(speech)], True
    yield "live", "feed(None)", [py, "-c", FEED_NONE, str(MODEL)], False
    yield ("socket", "impostor bound to the old socket path first", [py, "-c", IMPOSTOR, str(work / "data-imp")],
           False)
    yield ("socket", "two starts interleaved step by step (one process)",
           [py, "-c", RACE_STEPS, str(work / "data-steps")], False)
    yield ("socket", "two starts at the same moment (4 tries)",
           [py, "-c", RACE_DRIVER, str(work / "race"), "4", RACE], False)
    yield ("socket", "frozen first instance, second start (under Xvfb)",
           [py, "-c", FROZEN_DRIVER, str(work / "data-frozen"), FROZEN], False)
    for case, label in [("zeroed", "entry with zeroed tensor bytes"),
                        ("same-size", "same-size weights copied in, mtime kept (cp -p)"),
                        ("partial", "partial file of a kill -9'd writer")]:
        yield ("int8 cache", label, [py, "-c", INT8, case, str(work / f"int8-{case}"), str(MODEL), str(speech)],
               False)
    blocker = work / "a-file"
    blocker.write_text("")
    yield ("int8 cache", "warning format (cache folder unwritable)",
           ["env", f"QWEN3_ASR_CACHE_DIR={blocker}/cache", *cli, str(speech), "--quantize", "int8"], False)
    for value in ("-5", "99999999999"):
        yield ("app", f"settings.ini max_chunk_seconds={value}",
               [py, "-c", SETTINGS, str(work / f"s{value}.ini"), value, str(MODEL), str(speech)], False)
    yield "app", "dropped FIFO / symlink to /dev/zero", [py, "-c", DROP, str(work / "drop")], False


def make_audio(work: Path) -> tuple[Path, Path]:
    speech = work / "speech.wav"
    subprocess.run(["espeak-ng", "-w", str(work / "raw.wav"), "hello world this is a test of the speech model"],
                   check=True)
    subprocess.run(["sox", str(work / "raw.wav"), "-r", "16000", "-c", "1", "-b", "16", str(speech),
                    "pad", "0.5", "0.5", "repeat", "1"], check=True)
    long_file = work / "three-hours.wav"
    subprocess.run(["sox", str(speech), str(long_file), "pad", "0", "0.3",
                    "repeat", str(int(3 * 3600 / (_seconds(speech) + 0.3)))], check=True)
    return speech, long_file


def _seconds(path: Path) -> float:
    return float(subprocess.run(["soxi", "-D", str(path)], capture_output=True, text=True).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="checkout of the code before (bcd9af6)")
    parser.add_argument("--after", type=Path, default=ROOT)
    parser.add_argument("--timeout", type=float, default=60.0, help="for the cases that hung before")
    parser.add_argument("--slow-timeout", type=float, default=400.0,
                        help="for the others (a model load takes minutes of wall time on a loaded machine)")
    parser.add_argument("--only", help="run only cases whose label contains this")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hostile3-"))
    speech, long_file = make_audio(work)
    print(f"speech {_seconds(speech):.1f} s, long file {_seconds(long_file) / 3600:.2f} h; timeout {args.timeout:.0f} s "
          f"for the cases that hung, {args.slow_timeout:.0f} s for the others\n")
    print("| area | case | before: shown | exit | peak MB | wall s | CPU s | after: shown | exit | peak MB | wall s | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for area, label, argv, hung in cases(work, speech, long_file):
        if args.only and args.only not in label:
            continue
        row = [area, label]
        for tree in (args.before, args.after):
            r = run(tree.resolve(), argv, args.timeout if hung else args.slow_timeout)
            shown = r["shown"].replace("|", "\\|").replace(str(work), "…")
            row += [shown[:260], str(r["code"]), f"{r['rss_mb']:.0f}" if r["rss_mb"] else "-", f"{r['seconds']:.1f}",
                    f"{r['cpu']:.1f}" if r["cpu"] is not None else "-"]
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
