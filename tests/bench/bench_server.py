"""Load test of ``qwen3-asr serve`` on loopback: file clients and live sessions at once, then live sessions
on one shared engine against one engine process per session, and a session of bad requests.

    python tests/bench/bench_server.py [--model DIR | --widened] [--files 64] [--clients 16] [--live 8]
        [--live-seconds 60] [--dtype float32] [--separate-processes N]

Parts (each bounded): (1) one CLI process transcribes the files (the baseline); (2) one server takes
``--clients`` concurrent clients (the official ``openai`` package) sending the files while ``--live``
WebSocket sessions stream speech at real-time pace; (3) the same live sessions alone, on one server
and then on one server process each; (4) bad requests, each answer printed, the server still answering.
``--widened`` runs the trained test model widened to the 0.6B dimensions (tests/widened_model.py, as
bench_stream.py --widened): the servers and the CLI loop are started by a small launcher that puts the
widened position table in place after ``engine.load``. ``--separate-processes N`` spreads the live
sessions over N engine processes (round-robin) when one process per session does not fit in memory.
Live lag: from the moment the client sent an utterance's last audio to its ``completed`` event (it
includes the 0.5 s of silence the VAD waits for). Every figure is printed as a table.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
PY = sys.executable
SR = 16000
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.", "Why did you leave the office so early today?",
    "Please send me the report before the meeting.", "We will walk to the park after lunch.",
    "My sister bought a new car last week.", "The children are playing in the garden.",
    "Can you open the window, please?", "I think it will rain this afternoon.",
    "The train was late again this morning.", "She reads a book every night before bed.",
    "Turn left at the next corner.", "Our team finished the project on time.",
]


CLI_LOOP = """
import json, sys, time
import engine
files = json.load(open(sys.argv[2]))
t0 = time.monotonic()
eng = engine.load(sys.argv[1], dtype=sys.argv[4], quantize=sys.argv[6] if sys.argv[6] != "-" else None)
if sys.argv[5] == "widened":
    from widened_model import use_widened_positions
    use_widened_positions(eng)
t1, c1 = time.monotonic(), time.process_time()
jobs = []

def loop():
    jobs.extend(eng.submit_file(f) for f in files)
    while not all(j.finished for j in jobs):
        eng.step()

if sys.argv[3] == "thread":     # the engine stepped on a thread of its own, as the server steps it
    import threading
    worker = threading.Thread(target=loop)
    worker.start()
    worker.join()
else:
    loop()
print(json.dumps({"load": t1 - t0, "wall": time.monotonic() - t1, "cpu": time.process_time() - c1,
                  "texts": [j.transcript.text if j.transcript else None for j in jobs]}))
"""


# a server over the widened model: `qwen3-asr serve` cannot put the widened position table in place
SERVE_WIDENED = """
import sys
import engine
from server.serve import serve
from server.settings import ServerSettings
from widened_model import use_widened_positions
model, port, dtype, kv_mb, quantize = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
eng = engine.load(model, dtype=dtype, quantize=None if quantize == "-" else quantize,
                  **({"kv_cache_bytes": kv_mb << 20} if kv_mb else {}))
use_widened_positions(eng)
serve(eng, ServerSettings(port=port, max_queued_files=128, request_timeout_s=3600.0).check(), log_level="warning")
"""
SERVER = {"dtype": "float32", "widened": False, "quantize": None}    # set from the command line in main()


def percentile(values, q):
    return float(np.percentile(values, q)) if values else float("nan")


def sentence_audio(folder: Path) -> list[np.ndarray]:
    from conftest import espeak_wav

    return [sf.read(espeak_wav(folder / f"s{i}.wav", text), dtype="float32")[0] for i, text in enumerate(SENTENCES)]


def speech(sentences, seconds: float, rng) -> tuple[np.ndarray, int]:
    """Sentences with 0.8-2 s pauses up to ``seconds``; returns (audio, number of sentences)."""
    parts, total, n = [np.zeros(int(0.5 * SR), np.float32)], 0.5, 0
    while True:
        s = sentences[rng.randrange(len(sentences))]
        gap = np.zeros(int(rng.uniform(0.8, 2.0) * SR), np.float32)
        if total + (len(s) + len(gap)) / SR > seconds and n:
            break
        parts += [s, gap]
        total += (len(s) + len(gap)) / SR
        n += 1
    audio = np.concatenate(parts)
    return np.concatenate([audio, np.zeros(max(0, int(seconds * SR) - len(audio)), np.float32)]), n


def start_server(model: str, port: int, extra=()) -> subprocess.Popen:
    return wait_ready(launch_server(model, port, extra), port)


def launch_server(model: str, port: int, extra=(), kv_cache_mb: int = 0) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    if SERVER["widened"]:
        command = [PY, "-c", SERVE_WIDENED, model, str(port), SERVER["dtype"], str(kv_cache_mb),
                   SERVER["quantize"] or "-"]
    else:
        quantize = ["--quantize", SERVER["quantize"]] if SERVER["quantize"] else []
        command = [PY, "-m", "cli", "serve", "--model", model, "--port", str(port), "--dtype", SERVER["dtype"],
                   "--max-queue", "128", *quantize, *extra]
    # stderr to a file: a pipe nobody reads fills up and stalls the server
    log = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(command, env=env, stderr=log, text=True)
    proc.log = log
    return proc


def wait_ready(proc: subprocess.Popen, port: int, timeout_s: float = 600) -> subprocess.Popen:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    proc.log.seek(0)
    raise RuntimeError("server did not start: " + proc.log.read()[-2000:])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_gb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def step_seconds(url: str) -> float:
    """The server's qwen3_asr_step_seconds_total: how long its engine has spent stepping."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("qwen3_asr_step_seconds_total "):
                return float(line.split()[1])
    return 0.0


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    proc.log.seek(0)
    return proc.log.read()


# ------------------------------------------------------------------ clients
def file_clients(url: str, files: list[Path], clients: int) -> dict:
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=3600)
    todo, lock, results = list(enumerate(files)), threading.Lock(), {}

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i, path = todo.pop(0)
            started = time.monotonic()
            try:
                with open(path, "rb") as f:
                    text = client.audio.transcriptions.create(model="qwen3-asr", file=f).text
                results[i] = (time.monotonic() - started, text, None)
            except Exception as e:   # counted as lost
                results[i] = (time.monotonic() - started, None, f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.monotonic()
    [t.start() for t in threads]
    [t.join() for t in threads]
    return {"wall": time.monotonic() - started, "results": results}


LIVE_GRACE_S = [120.0]   # how long a session waits after its last audio for the utterances still open


async def live_session(url: str, audio: np.ndarray, out: dict, chunk_s: float = 0.1) -> None:
    import websockets

    sent_end: list[float] = []      # wall time when the audio up to each chunk end was sent
    pcm = (audio * 32767).astype("<i2").tobytes()
    step = int(chunk_s * SR) * 2
    events, lags = [], []
    async with websockets.connect(url.replace("http", "ws") + "/v1/realtime", max_size=None) as ws:
        await ws.send(json.dumps({"type": "transcription_session.update", "session": {"input_audio_rate": 16000}}))
        t0 = time.monotonic()

        async def reader():
            async for message in ws:
                event = json.loads(message)
                event["_t"] = time.monotonic()
                events.append(event)
                if event["type"].endswith(".completed"):
                    lags.append(event["_t"] - (t0 + event["end"]))

        task = asyncio.ensure_future(reader())
        for k, i in enumerate(range(0, len(pcm), step)):
            await asyncio.sleep(max(0.0, t0 + k * chunk_s - time.monotonic()))
            await ws.send(json.dumps({"type": "input_audio_buffer.append",
                                      "audio": base64.b64encode(pcm[i:i + step]).decode()}))
            sent_end.append(time.monotonic())
        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        deadline = time.monotonic() + LIVE_GRACE_S[0]
        while time.monotonic() < deadline:
            started = {e["item_id"] for e in events if e["type"] == "input_audio_buffer.speech_started"}
            done = {e["item_id"] for e in events if e["type"].endswith(".completed")}
            if started and started <= done and time.monotonic() - events[-1]["_t"] > 1.0:
                break
            await asyncio.sleep(0.2)
        task.cancel()
    out.update(started=len(started), completed=len(done), lags=lags,
               errors=[e for e in events if e["type"] == "error"])


def live_sessions(urls: list[str], audios: list[np.ndarray]) -> list[dict]:
    outs = [{} for _ in audios]

    async def all_sessions():
        await asyncio.gather(*(live_session(u, a, o) for u, a, o in zip(urls, audios, outs)))

    thread = threading.Thread(target=lambda: asyncio.run(all_sessions()))
    thread.start()
    return outs, thread


def live_summary(name: str, outs: list[dict], sentences: list[int]) -> None:
    lags = [x for o in outs for x in o.get("lags", [])]
    print(f"  {name}: utterances spoken {sum(sentences)}, started {sum(o['started'] for o in outs)}, "
          f"completed {sum(o['completed'] for o in outs)}, errors {sum(len(o['errors']) for o in outs)}; "
          f"lag p50 {percentile(lags, 50):.2f} s, p95 {percentile(lags, 95):.2f} s")


# ------------------------------------------------------------------- parts
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(ROOT / "tests/models/qwen3-asr-tiny"))
    parser.add_argument("--widened", action="store_true",
                        help="the trained test model widened to the 0.6B dimensions (tests/widened_model.py)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"],
                        help="default float32 (token-exact against the CLI); bfloat16 halves the 0.6B's memory")
    parser.add_argument("--quantize", choices=["int8"], help="int8 decoder weights everywhere (faster on CPU)")
    parser.add_argument("--only-files", action="store_true", help="only parts (1) and (2): the files")
    parser.add_argument("--separate-processes", type=int, default=0,
                        help="engine processes for the live sessions in part (3) (default: one per session)")
    parser.add_argument("--live-grace", type=float, default=120.0,
                        help="seconds a session waits after its last audio for its last utterances (default 120)")
    parser.add_argument("--separate-kv-cache-mb", type=int, default=512,
                        help="KV cache of each separate live process (default 512 MiB: one or two streams)")
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--live", type=int, default=8)
    parser.add_argument("--live-seconds", type=float, default=60.0)
    parser.add_argument("--min-seconds", type=float, default=5.0, help="shortest file")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="longest file")
    parser.add_argument("--port", type=int, default=8811)
    parser.add_argument("--skip-separate", action="store_true")
    parser.add_argument("--skip-files-alone", action="store_true",
                        help="in part (2), skip the second pass of the files without live sessions")
    parser.add_argument("--cli-ways", default="main,thread",
                        help="where the CLI loop steps its engine: main (as the CLI does), thread (as the server)")
    parser.add_argument("--only-live", action="store_true", help="only part (3): live sessions, shared vs separate")
    args = parser.parse_args()
    if args.widened:
        from common import widened_checkpoint

        args.model = str(widened_checkpoint())
    SERVER.update(dtype=args.dtype or "float32", widened=args.widened, quantize=args.quantize)
    LIVE_GRACE_S[0] = args.live_grace
    rng = random.Random(7)
    work = Path(tempfile.mkdtemp(prefix="bench-server-"))
    sentences = sentence_audio(work)
    files, total = [], 0.0
    for i in range(args.files):
        audio, _ = speech(sentences, rng.uniform(args.min_seconds, args.max_seconds), rng)
        path = work / f"f{i:02d}.wav"
        sf.write(path, audio, SR, subtype="PCM_16")
        files.append(path)
        total += len(audio) / SR
    live = [speech(sentences, args.live_seconds, rng) for _ in range(args.live)]
    live_audio, live_counts = [a for a, _ in live], [n for _, n in live]
    print(f"{args.files} files, {total / 60:.1f} min of audio ({args.min_seconds:g}-{args.max_seconds:g} s each); "
          f"{args.live} live sessions of "
          f"{args.live_seconds:g} s; model {Path(args.model).name}, {SERVER['dtype']}"
          f"{', int8 decoder' if args.quantize else ''}; CPU: {os.cpu_count()} cores (shared)")

    if not args.only_live:
        files_parts(args, work, files, total, live_audio, live_counts)
    if not args.only_files:
        live_parts(args, live_audio, live_counts)


def files_parts(args, work, files, total, live_audio, live_counts) -> None:
    # (1) one CLI process, same files: what `qwen3-asr transcribe` runs (load, submit_file each, step), timed
    # apart from the model load; CPU seconds too, since wall time on a shared machine follows its load
    listing = work / "files.json"
    listing.write_text(json.dumps([str(f) for f in files]))
    for where in args.cli_ways.split(","):
        run = subprocess.run([PY, "-c", CLI_LOOP, args.model, str(listing), where, SERVER["dtype"],
                              "widened" if SERVER["widened"] else "-", SERVER["quantize"] or "-"], check=True, capture_output=True,
                             text=True, env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"})
        cli = json.loads(run.stdout.strip().splitlines()[-1])
        print(f"(1) one CLI process, engine on its {where} thread: load {cli['load']:.1f} s, then {cli['wall']:.1f} s "
              f"wall = {total / cli['wall']:.1f}x real time, CPU {cli['cpu']:.0f} s "
              f"({total / cli['cpu']:.1f} audio s per CPU s)", flush=True)
    # the server steps its engine on a thread of its own: compare with the CLI loop stepped the same way
    cli_wall, cli_text = cli["wall"], {i: t for i, t in enumerate(cli["texts"])}

    # (2) the server: file clients and live sessions at once
    url = f"http://127.0.0.1:{args.port}"
    proc = start_server(args.model, args.port)
    cpu0, busy0 = cpu_seconds(proc.pid), step_seconds(url)
    outs, live_thread = live_sessions([url] * args.live, live_audio)
    result = file_clients(url, files, args.clients)
    live_thread.join()
    cpu = cpu_seconds(proc.pid) - cpu0
    busy = (step_seconds(url) - busy0) / result["wall"]
    print(f"  (server resident memory after files and live: {rss_gb(proc.pid):.1f} GB; its engine stepped "
          f"{busy:.0%} of the files' time)", flush=True)
    lat = [r[0] for r in result["results"].values() if r[1] is not None]
    lost = [i for i in range(len(files)) if result["results"].get(i, (0, None))[1] is None]
    same = sum(result["results"][i][1] == cli_text[i] for i in range(len(files)) if i not in lost)
    print(f"(2) server, {args.clients} file clients + {args.live} live sessions at once:")
    print(f"  files: answered {len(files) - len(lost)}/{len(files)}, equal to the CLI's text {same}/{len(files)}; "
          f"latency p50 {percentile(lat, 50):.1f} s, p95 {percentile(lat, 95):.1f} s; all files done in "
          f"{result['wall']:.1f} s = {total / result['wall']:.1f}x real time "
          f"({cli_wall / result['wall']:.2f}x the CLI's speed, while also serving the live sessions); server CPU "
          f"{cpu:.0f} s (files and live together)")
    for i in lost:
        print(f"  lost f{i:02d}: {result['results'].get(i)}")
    live_summary("live", outs, live_counts)
    if args.skip_files_alone:
        stop(proc)
        return
    cpu0, busy0 = cpu_seconds(proc.pid), step_seconds(url)
    alone = file_clients(url, files, args.clients)
    cpu = cpu_seconds(proc.pid) - cpu0
    print(f"  (its engine stepped {(step_seconds(url) - busy0) / alone['wall']:.0%} of the time of the files alone)")
    lat = [r[0] for r in alone["results"].values() if r[1] is not None]
    print(f"  the same files alone: answered {len(lat)}/{len(files)}, latency p50 {percentile(lat, 50):.1f} s, "
          f"p95 {percentile(lat, 95):.1f} s; {alone['wall']:.1f} s = {total / alone['wall']:.1f}x real time = "
          f"{cli_wall / alone['wall']:.2f}x the CLI's speed; server CPU {cpu:.0f} s ({total / cpu:.1f} audio s per CPU s)")
    stop(proc)



def live_parts(args, live_audio, live_counts) -> None:
    # (3) live alone: one shared engine vs one engine process per session
    url = f"http://127.0.0.1:{args.port}"
    proc = start_server(args.model, args.port)
    cpu0, wall0, busy0 = cpu_seconds(proc.pid), time.monotonic(), step_seconds(url)
    outs, thread = live_sessions([url] * args.live, live_audio)
    thread.join()
    shared_cpu = cpu_seconds(proc.pid) - cpu0
    busy = (step_seconds(url) - busy0) / (time.monotonic() - wall0)
    print(f"  (the shared engine stepped {busy:.0%} of the time: the rest it waited for audio or for the CPU; "
          f"resident memory {rss_gb(proc.pid):.1f} GB)", flush=True)
    stop(proc)
    print(f"(3) {args.live} live sessions alone ({sum(len(a) for a in live_audio) / SR:.0f} s of audio):")
    live_summary(f"one shared engine (CPU {shared_cpu:.0f} s)", outs, live_counts)
    if not args.skip_separate:
        n = args.separate_processes or args.live
        kv = args.separate_kv_cache_mb
        procs = [launch_server(args.model, args.port + 1 + i, kv_cache_mb=kv) for i in range(n)]   # together
        procs = [wait_ready(p, args.port + 1 + i) for i, p in enumerate(procs)]
        memory = sum(rss_gb(p.pid) for p in procs)
        cpu0 = [cpu_seconds(p.pid) for p in procs]
        urls = [f"http://127.0.0.1:{args.port + 1 + i % n}" for i in range(args.live)]   # round-robin
        outs, thread = live_sessions(urls, live_audio)
        thread.join()
        memory = max(memory, sum(rss_gb(p.pid) for p in procs))
        sep_cpu = sum(cpu_seconds(p.pid) - c for p, c in zip(procs, cpu0))
        [stop(p) for p in procs]
        live_summary(f"{n} engine processes for {args.live} sessions (CPU {sep_cpu:.0f} s, resident memory "
                     f"{memory:.1f} GB in all)", outs, live_counts)


if __name__ == "__main__":
    main()
