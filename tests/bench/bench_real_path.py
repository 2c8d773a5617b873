"""The path users run: our CLI on long speech files against the official qwen-asr package.

    python tests/bench/bench_real_path.py --qwenasr-python /path/to/venv/bin/python \\
        [--lengths 5,30] [--dtypes float32,bfloat16,int8] [--model DIR] [--threads 2] [--cli "qwen3-asr"]

Files: espeak-ng speech (sentences with 0.3-1.5 s pauses, 16 kHz mono via sox), 5 and 30
minutes by default (``--lengths`` in minutes, e.g. ``--lengths 1`` for a quick run), built
once under the bench cache.

Ours: the real CLI as a subprocess, ``qwen3-asr transcribe FILE --model DIR --device cpu
--dtype X --language en --format json`` (VAD on; ``--quantize int8`` when the CLI has it), so
file decoding, VAD, chunking, thread settings and writing the output are all in the time.
Peer: the official ``qwen-asr`` package (transformers backend) in its own venv
(``--qwenasr-python``), ``Qwen3ASRModel.from_pretrained(DIR, dtype=X).transcribe(FILE,
language="English")``, also as a subprocess. Skipped with a message when not given.

Equal work: the checkpoint (``peer_checkpoint.py``) never emits an end token, so each side
generates up to its cap on every chunk, and each generated token is one " w<6 digits>abcdefghijklmn"
word (longer than any pattern the repetition cleanup collapses), counted in the output.
Our CLI's chunks of at most 30 s stop at its own cap (or earlier where its repetition guard
stops a random-weight loop; printed); we count the tokens in its output and
give the official package the same total as its ``max_new_tokens`` (it cuts a file only
beyond 20 minutes, so one chunk gets it all; with k chunks each gets total/k, and the
totals then differ by less than k, printed). Printed per side: end-to-end seconds (process
start to exit), seconds after the model is loaded, audio-seconds per second of both, the
token counts, and our/official ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CACHE, ROOT

SENTENCES = [
    "The meeting started a little later than planned because the projector would not turn on.",
    "We reviewed the numbers from last quarter and agreed that the trend looks encouraging.",
    "Please send the final version of the report to everyone on the list before Friday.",
    "The train to the airport leaves every twenty minutes from the second platform.",
    "She said the new library opens at nine in the morning and closes at eight in the evening.",
    "Our team will focus on reliability first, and on new features after that.",
    "The weather tomorrow should be dry, with a light wind from the north.",
    "If you have any questions about the budget, ask Maria or send me a short note.",
    "He cooked a simple dinner of rice, beans and roasted vegetables for the whole family.",
    "The museum has a small collection of old maps and a large garden behind it.",
    "Remember to save your work often, especially when the network is unstable.",
    "Three of the five tests passed on the first try, and the other two needed small fixes.",
    "The river was high after a week of rain, so the ferry did not run on Sunday.",
    "We will publish the recording and the slides on the website later this week.",
    "Most people in the survey preferred shorter meetings with a clear agenda.",
    "A good night of sleep does more for your memory than an extra hour of study.",
    "The shop on the corner sells fresh bread every morning until it runs out.",
    "Could you repeat the last number, please? I think I wrote it down wrong.",
    "The software update fixed the crash, but the battery still drains too quickly.",
    "Next year the conference will move to a larger hall near the city centre.",
]


def espeak_file(minutes: float, seed: int = 0) -> Path:
    """An espeak-ng speech file of ``minutes`` with 0.3-1.5 s pauses, built once and cached."""
    path = CACHE / f"espeak-{minutes:g}min.wav"
    if path.is_file():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    print(f"synthesising {path} with espeak-ng and sox (once)...", flush=True)
    rng = np.random.default_rng(seed)
    pool = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(SENTENCES):
            raw, conv = Path(tmp) / f"{i}.wav", Path(tmp) / f"{i}_16k.wav"
            subprocess.run(["espeak-ng", "-s", str(150 + 10 * (i % 4)), "-w", str(raw), text], check=True)
            subprocess.run(["sox", "-R", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(conv)], check=True)
            with wave.open(str(conv)) as w:
                pool.append(np.frombuffer(w.readframes(w.getnframes()), np.int16))
    total = int(minutes * 60 * 16000)
    parts, n = [], 0
    while n < total:
        speech = pool[rng.integers(len(pool))]
        pause = np.zeros(int(rng.uniform(0.3, 1.5) * 16000), np.int16)
        parts += [speech, pause]
        n += len(speech) + len(pause)
    audio = np.concatenate(parts)[:total]
    tmp_path = path.with_suffix(".tmp.wav")
    with wave.open(str(tmp_path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(audio.tobytes())
    tmp_path.replace(path)
    return path


def cli_command(cli: str | None) -> list[str]:
    """The installed ``qwen3-asr`` when it runs, else ``python -m cli`` from this checkout."""
    if cli:
        return shlex.split(cli)
    try:
        if subprocess.run(["qwen3-asr", "transcribe", "--help"], capture_output=True, check=False).returncode == 0:
            return ["qwen3-asr"]
    except FileNotFoundError:
        pass
    print("note: the installed qwen3-asr script does not run; using python -m cli from this checkout")
    return [sys.executable, "-m", "cli"]


class SideFailed(RuntimeError):
    """A side's process ended badly; ``wall`` and ``peak_gb`` say how far it got."""

    def __init__(self, message: str, wall: float, peak_gb: float, killed: bool):
        super().__init__(message)
        self.wall, self.peak_gb, self.killed = wall, peak_gb, killed


def run_timed(cmd, *, env, cwd=None, load_marker: re.Pattern):
    """Run ``cmd``; returns (wall seconds, seconds after the stderr line matching load_marker or None,
    stdout, stderr, peak resident memory in GB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, text=True)
    err_lines, marked = [], []

    def read_err():
        for line in proc.stderr:
            if not marked and load_marker.search(line):
                marked.append(time.perf_counter())
            err_lines.append(line)

    reader = threading.Thread(target=read_err)
    reader.start()
    out = proc.stdout.read()
    # wait4 rather than wait: the child's own peak memory (ru_maxrss, KiB on Linux).
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    end = time.perf_counter()
    peak_gb = usage.ru_maxrss / 2**20
    if proc.returncode != 0:
        raise SideFailed(f"{cmd[0]} failed (rc {proc.returncode}): {''.join(err_lines)[-2000:]}", end - t0,
                         peak_gb, killed=proc.returncode < 0)
    return end - t0, (end - marked[0]) if marked else None, out, "".join(err_lines), peak_gb


TOKEN_WORD = re.compile(r"w\d{6}abcdefghijklmn")     # every generated token is one such word


def count_tokens(text: str) -> int:
    return len(TOKEN_WORD.findall(text))


OURS_LOADED = re.compile(r"^model .* on \w+, \w+")


# Our CLI with the bug that 9a60a36 fixed put back: loading Silero VAD pinned torch to one thread
# for the rest of the process (silero_vad's import calls torch.set_num_threads(1)).
THREAD_BUG_CLI = r'''
import sys, torch
import engine.audio.silero as silero
_load = silero._load_silero
def _load_and_pin():
    model = _load()
    torch.set_num_threads(1)
    return model
silero._load_silero = _load_and_pin
from cli.main import main
sys.exit(main(sys.argv[1:]))
'''


def run_ours(cli, wav: Path, model: Path, precision: str, help_text: str, threads: int):
    out_dir = Path(tempfile.mkdtemp(prefix="bench_real_"))
    cmd = cli + ["transcribe", str(wav), "--model", str(model), "--device", "cpu", "--language", "en",
                 "--format", "json", "-o", str(out_dir)]
    if precision == "int8":
        cmd += ["--quantize", "int8"]
    else:
        cmd += ["--dtype", precision]
    if "--overwrite" in help_text:
        cmd.append("--overwrite")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    wall, after_load, _, err, peak_gb = run_timed(cmd, env=env, cwd=ROOT, load_marker=OURS_LOADED)
    data = json.loads(next(out_dir.glob("*.json")).read_text())
    said = [line.strip() for line in err.splitlines() if OURS_LOADED.search(line)]
    tokens = sum(count_tokens(s["text"]) for s in data["segments"]) if data["segments"] else count_tokens(data["text"])
    # What the chunks would give at the engine's length cap (48 + 15 per second), from the segment spans.
    cap = sum(48 + int(15 * (s["end"] - s["start"])) for s in data["segments"] if s["end"] is not None)
    return {"wall": wall, "after_load": after_load, "tokens": tokens, "segments": len(data["segments"]), "cap": cap,
            "peak_gb": peak_gb,
            "said": said[0] if said else "(the CLI did not print its device/dtype/threads line)"}


OFFICIAL_SCRIPT = r'''
import json, re, sys, time
cfg = json.load(open(sys.argv[1]))
import torch
torch.set_num_threads(cfg["threads"])
from qwen_asr import Qwen3ASRModel
from qwen_asr.inference.utils import MAX_ASR_INPUT_SECONDS, normalize_audios, split_audio_into_chunks

t = time.perf_counter()
m = Qwen3ASRModel.from_pretrained(cfg["model"], dtype=getattr(torch, cfg["dtype"]), device_map="cpu")
load = time.perf_counter() - t
th = m.model.thinker
tied = bool(torch.equal(th.lm_head.weight, th.model.embed_tokens.weight))
k = len(split_audio_into_chunks(wav=normalize_audios(cfg["audio"])[0], sr=16000, max_chunk_sec=MAX_ASR_INPUT_SECONDS))
m.max_new_tokens = max(1, round(cfg["total_tokens"] / k))
generated = []
orig = m.model.generate
def counted(*args, **kwargs):
    out = orig(*args, **kwargs)
    rows, length = out.sequences.shape
    generated.append(rows * (length - kwargs["input_ids"].shape[1]))
    return out
m.model.generate = counted
t = time.perf_counter()
res = m.transcribe(audio=cfg["audio"], language="English")
run = time.perf_counter() - t
print("JSON:" + json.dumps(dict(load_s=load, transcribe_s=run, chunks=k, max_new_tokens=m.max_new_tokens,
                                 generated=sum(generated), tied=tied,
                                 text_tokens=len(re.findall(r"w\d{6}abcdefghijklmn", res[0].text)),
                                 threads=torch.get_num_threads(), dtype=str(th.dtype))), flush=True)
'''


def run_official(python: Path, wav: Path, model: Path, precision: str, total_tokens: int, threads: int):
    work = Path(tempfile.mkdtemp(prefix="bench_official_"))
    (work / "official.py").write_text(OFFICIAL_SCRIPT)
    (work / "cfg.json").write_text(json.dumps({"model": str(model), "audio": str(wav), "dtype": precision,
                                               "total_tokens": total_tokens, "threads": threads}))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="false")
    wall, _, out, _, peak_gb = run_timed([str(python), str(work / "official.py"), str(work / "cfg.json")],
                                         env=env, load_marker=re.compile(r"^$^"))
    line = next(l for l in out.splitlines() if l.startswith("JSON:"))
    r = json.loads(line[5:])
    r["wall"], r["peak_gb"] = wall, peak_gb
    return r


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="checkpoint (default: peer_checkpoint.py's, built once)")
    parser.add_argument("--lengths", "--minutes", dest="lengths", default="5,30", help="file lengths in minutes")
    parser.add_argument("--dtypes", default="float32,bfloat16,int8")
    parser.add_argument("--qwenasr-python", type=Path, help="python of a venv with qwen-asr==0.0.6 installed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cli", help='our CLI command (default: "qwen3-asr", else "python -m cli")')
    parser.add_argument("--before-thread-fix", action="store_true",
                        help="also run our CLI with the VAD's one-thread pin put back (the bug 9a60a36 fixed)")
    args = parser.parse_args()

    if args.model is None:
        from peer_checkpoint import peer_checkpoint

        args.model = peer_checkpoint()
    from bench_peers import cpu_summary

    print(cpu_summary())
    cli = cli_command(args.cli)
    help_text = subprocess.run(cli + ["transcribe", "--help"], capture_output=True, text=True, cwd=ROOT,
                               check=False).stdout
    print(f"our CLI: {' '.join(cli)}; checkpoint {args.model}; OMP_NUM_THREADS={args.threads} for both sides")
    if args.qwenasr_python is None:
        print("official qwen-asr: skipped (give --qwenasr-python)")
    rows, failures = [], []
    for minutes in [float(m) for m in args.lengths.split(",")]:
        wav = espeak_file(minutes)
        for precision in args.dtypes.split(","):
            if precision == "int8" and "--quantize" not in help_text:
                print("int8: not available (the CLI has no --quantize)")
                continue
            ours = run_ours(cli, wav, args.model, precision, help_text, args.threads)
            print(f"\n{minutes:g} min, {precision}: our CLI said: {ours['said']}")
            print(f"  ours: {ours['wall']:.1f} s end to end, {ours['after_load']:.1f} s after load, "
                  f"{ours['tokens']} tokens in {ours['segments']} segments, peak memory {ours['peak_gb']:.1f} GB",
                  flush=True)
            if ours["tokens"] < 0.9 * ours["cap"]:
                print(f"  note: the segments' length caps add up to about {ours['cap']} tokens; fewer came out, so "
                      "our repetition guard stopped random-weight loops early (the official package, given the "
                      "same total, then generates as many tokens as we output; we generated a few more)")
            rows.append((minutes, precision, "ours (CLI)", ours["wall"], ours["after_load"], ours["tokens"],
                         ours["peak_gb"]))
            if args.before_thread_fix:
                bug = run_ours([sys.executable, "-c", THREAD_BUG_CLI], wav, args.model, precision, help_text,
                               args.threads)
                print(f"  ours, VAD pins 1 thread (before the fix): {bug['wall']:.1f} s end to end, "
                      f"{bug['after_load']:.1f} s after load, {bug['tokens']} tokens", flush=True)
                rows.append((minutes, precision, "ours, 1-thread bug", bug["wall"], bug["after_load"], bug["tokens"],
                             bug["peak_gb"]))
            if args.qwenasr_python is None or precision == "int8":
                continue
            try:
                off = run_official(args.qwenasr_python, wav, args.model, precision, ours["tokens"], args.threads)
            except SideFailed as e:   # e.g. killed by the kernel's OOM killer on a long file: a result too
                why = "killed (signal 9: out of memory?)" if e.killed else "failed"
                print(f"  official: {why} after {e.wall:.1f} s, peak memory {e.peak_gb:.1f} GB; "
                      f"{str(e).splitlines()[-1][-300:]}", flush=True)
                failures.append(f"{minutes:g} min {precision}: official qwen-asr {why} after {e.wall:.0f} s "
                                f"at {e.peak_gb:.1f} GB; ours finished in {ours['wall']:.0f} s at "
                                f"{ours['peak_gb']:.1f} GB")
                continue
            print(f"  official: {off['wall']:.1f} s end to end, load {off['load_s']:.1f} s, transcribe "
                  f"{off['transcribe_s']:.1f} s; {off['chunks']} chunk(s) x max_new_tokens {off['max_new_tokens']}"
                  f" = {off['generated']} tokens generated ({off['text_tokens']} in its text); threads "
                  f"{off['threads']}, {off['dtype']}, head tied {off['tied']}; peak memory {off['peak_gb']:.1f} GB",
                  flush=True)
            if off["generated"] != ours["tokens"]:
                print(f"  note: token totals differ by {off['generated'] - ours['tokens']} "
                      f"({off['chunks']} chunks cannot split {ours['tokens']} evenly)")
            rows.append((minutes, precision, "official qwen-asr", off["wall"], off["transcribe_s"], off["generated"],
                         off["peak_gb"]))

    print(f"\n{'minutes':>7s} {'precision':10s} {'side':18s} {'e2e s':>8s} {'e2e a-s/s':>10s} "
          f"{'post-load s':>11s} {'a-s/s':>7s} {'tokens':>7s} {'peak GB':>7s}")
    for minutes, prec, side, wall, after, tok, peak in rows:
        print(f"{minutes:7g} {prec:10s} {side:18s} {wall:8.1f} {minutes * 60 / wall:10.2f} "
              f"{after:11.1f} {minutes * 60 / after:7.2f} {tok:7d} {peak:7.1f}")
    by_key = {(r[0], r[1], r[2]): r for r in rows}
    for minutes, prec, side, wall, after, *_ in rows:
        off = by_key.get((minutes, prec, "official qwen-asr"))
        if side == "ours (CLI)" and (bug := by_key.get((minutes, prec, "ours, 1-thread bug"))):
            print(f"{minutes:g} min {prec}: the thread fix: end to end {bug[3] / wall:.2f}x, "
                  f"after load {bug[4] / after:.2f}x")
        if side.startswith("ours") and off:
            print(f"{minutes:g} min {prec}: {side} / official speed: end to end {off[3] / wall:.2f}x, "
                  f"after load {off[4] / after:.2f}x")
    for failure in failures:
        print(failure)


if __name__ == "__main__":
    main()
