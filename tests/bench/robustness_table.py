"""Issue 18's cases, each run as a user would in its own process: message, exit status, time, memory.

    python tests/bench/robustness_table.py [--model DIR] [--aligner DIR] [--real-aligner]

Builds tiny random checkpoints when none are given (a random model writes gibberish,
but every case here is about what happens around the model). ``--real-aligner`` adds
a case with the real Qwen3-ForcedAligner-0.6B dimensions (random weights, ~2.4 GB
on disk, several minutes on a small CPU): one 180 s chunk of dense speech aligned.
Memory is the child's peak resident set (ru_maxrss).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
SR = 16000

API_PRELUDE = """
import os, sys, warnings, numpy as np, soundfile as sf
sys.path.insert(0, {repo!r})
import engine
eng = engine.load({model!r}, device="cpu", dtype="float32", use_vad=False)
tone = (0.3 * np.sin(2 * np.pi * 220 * np.arange(16000) / 16000)).astype(np.float32)
"""

API_CASES = {
    "submit(priority='high'), then 3 good requests": """
try:
    eng.submit(tone, priority="high")
except ValueError as e:
    msg = f"ValueError: {e}"
reqs = [eng.submit(tone, max_new_tokens=4) for _ in range(3)]
steps = 0
while eng.has_work():
    eng.step(); steps += 1
print(msg, f"| later: {sum(1 for r in reqs if r.finished and not r.error)}/3 served in {steps} steps")
""",
    "transcribe(int16 array)": """
pcm = np.round(tone * 32767).astype(np.int16)
same = eng.generate([pcm], max_new_tokens=8) == eng.generate([pcm.astype(np.float32) / 32768], max_new_tokens=8)
print(f"int16 scaled like soundfile: tokens equal to the float clip: {same}")
""",
    "generate(float array x32768)": """
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    eng.generate([tone * 32768], max_new_tokens=2)
print("warning:", str(w[0].message)[:110] if w else "none")
""",
    "generate(empty array)": """
eng.generate([np.zeros(0, np.float32)])
""",
    "generate(bytes path)": """
sf.write("/tmp/robust-bytes.wav", tone, 16000)
print("tokens:", len(eng.generate(os.fsencode("/tmp/robust-bytes.wav"), max_new_tokens=4)[0]))
""",
    "file truncated while read": """
t = np.arange(60 * 16000) / 16000
sf.write("/tmp/robust-long.wav", (0.2 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), 16000, subtype="PCM_16")
job = eng.submit_file("/tmp/robust-long.wav")
while job._decoded == 0:
    eng.step()
os.truncate("/tmp/robust-long.wav", 44 + 2 * 16000 * 35)
while not job.finished:
    eng.step()
print(job.state, "|", next(n for n in job.transcript.notes if "truncated" in n)[:110])
""",
}

ALIGNER_CASES = {
    "alignment fails (aligner step raises)": """
eng.aligner = engine.load_aligner({aligner!r}, device="cpu", dtype="float32")
def broken(rows):
    raise RuntimeError("aligner out of memory")
eng.aligner.runner.run = broken
t = eng.transcribe({speech!r}, language="en", word_timestamps=True)
print(f"{{len(t.segments)}} segments kept, text {{len(t.text)}} chars | words_note: {{t.words_note[:90]}}")
""",
    "180 s dense chunk, cache of one 2048 block": """
from engine.pipelines.aligner import Aligner
d = Aligner({aligner!r}, device="cpu", dtype="float32").config.decoder
al = Aligner({aligner!r}, device="cpu", dtype="float32", kv_cache_bytes=2048 * 2 * d.layers * d.kv_heads * d.head_dim * 4)
audio = (0.1 * np.random.default_rng(0).standard_normal(180 * 16000)).astype(np.float32)
words = " ".join(["hello", "world", "speech", "to", "text"] * 144)
n = al.make_request(audio, words.split()).num_tokens
out = al.align(audio, words, language="English")
print(f"request {{n}} tokens > cache 2048: cache grew to {{al.cache_tokens}}; {{len(out)}} words timed")
""",
}

REAL_ALIGNER_CASE = """
import time
from engine.pipelines.aligner import Aligner
started = time.monotonic()
al = Aligner({aligner!r}, device="cpu", dtype="float32")
before = al.cache_tokens
audio = (0.1 * np.random.default_rng(0).standard_normal(180 * 16000)).astype(np.float32)
words = " ".join(["hello", "world", "speech", "to", "text", "and", "more"] * 100)
n = al.make_request(audio, words.split()).num_tokens
out = al.align(audio, words, language="English")
print(f"real 0.6B dims: request {{n}} tokens, cache {{before}} -> {{al.cache_tokens}}, {{len(out)}} words timed")
"""


def run(argv, timeout=900):
    """(exit status, stdout+stderr, seconds, peak RSS MiB) of one child process (os.wait4 gives
    the child's own peak, not the maximum over all children)."""
    import threading

    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = log.read()
    return proc.returncode, out, time.monotonic() - started, usage.ru_maxrss / 1024


def message(out: str) -> str:
    lines = [ln.strip() for ln in out.splitlines() if ln.strip() and "Writing model" not in ln
             and not ln.startswith(("model ", "  File", "Traceback", "warnings.warn"))]
    interesting = [ln for ln in lines if ln.startswith(("error", "note", "wrote", "ValueError", "engine.errors"))]
    picked = interesting or lines[-1:]
    return " / ".join(picked)[:200]


def cli_cases(model: str, work: Path) -> list[tuple[str, list[str], Path | None]]:
    t = np.arange(SR) / SR
    for i, rel in enumerate(["talk.wav", "talk.flac", "a/talk.wav", "b/talk.wav"]):
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        sf.write(work / rel, (0.2 * np.sin(2 * np.pi * (200 + 90 * i) * t)).astype(np.float32), SR)
    (work / "existing").mkdir(exist_ok=True)
    (work / "existing" / "talk.txt").write_text("notes written before\n")
    (work / "a-file.txt").write_text("not a folder\n")
    base = [sys.executable, "-m", "cli.main", "transcribe", "--model", model, "--language", "en", "--no-vad",
            "--quiet"]
    w = lambda rel: str(work / rel)  # noqa: E731
    return [
        ("CLI talk.wav + talk.flac -o out", base + [w("talk.wav"), w("talk.flac"), "-o", w("out1")], work / "out1"),
        ("CLI a/talk.wav + b/talk.wav -o out", base + [w("a/talk.wav"), w("b/talk.wav"), "-o", w("out2")],
         work / "out2"),
        ("CLI same input twice -o out", base + [w("talk.wav"), w("talk.wav"), "-o", w("out3")], work / "out3"),
        ("CLI output existed before", base + [w("talk.wav"), "-o", w("existing")], work / "existing"),
        ("CLI same, with --overwrite", base + [w("talk.wav"), "-o", w("existing"), "--overwrite"],
         work / "existing"),
        ("CLI -o naming a regular file", base + [w("talk.wav"), "-o", w("a-file.txt")], None),
    ]


def run_all(cli_jobs, other_jobs) -> list:
    """The CLI cases one after another (later ones read earlier outputs), the rest alongside;
    each row is printed as it ends (times are longer than alone: the cases share the CPU)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(name, argv, out_dir):
        code, out, seconds, rss = run(argv)
        msg = message(out)
        if out_dir is not None and out_dir.exists():
            msg += " | files: " + ", ".join(sorted(p.name for p in out_dir.iterdir()))
        print(f"done: {name}: exit {code}, {seconds:.0f} s: {msg}", flush=True)
        return name, msg, code, seconds, rss

    with ThreadPoolExecutor(max_workers=len(other_jobs) + 1) as pool:
        others = [pool.submit(one, *job) for job in other_jobs]
        cli_rows = [one(*job) for job in cli_jobs]
        return cli_rows + [f.result() for f in others]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--aligner")
    ap.add_argument("--real-aligner", action="store_true")
    args = ap.parse_args()
    from checkpoints import REAL_0_6B, build_checkpoint
    from conftest import espeak_wav

    work = Path(tempfile.mkdtemp(prefix="robustness18-"))
    model = args.model or str(build_checkpoint(work / "tiny-asr", seed=0))
    aligner = args.aligner or str(build_checkpoint(work / "tiny-aligner", seed=1, aligner=True))
    speech = str(espeak_wav(work / "speech.wav", "Hello world. This is a test of local speech recognition."))
    jobs = []   # (name, argv, folder whose files to list); all run at once (the CLI cases in order)
    prelude = API_PRELUDE.format(repo=str(REPO), model=model)
    cases = dict(API_CASES)
    cases.update({k: v.format(aligner=aligner, speech=speech) for k, v in ALIGNER_CASES.items()})
    for name, code_text in cases.items():
        jobs.append((f"API {name}", [sys.executable, "-c", prelude + textwrap.dedent(code_text)], None))
    hanging = work / "hanging-template"
    subprocess.run(["cp", "-r", model, str(hanging)], check=True)
    template = hanging / "chat_template.jinja"
    template.write_text("{% for i in range(99999) %}{% for j in range(99999) %}{{ '' }}{% endfor %}{% endfor %}"
                        + template.read_text())
    jobs.append(("API load: chat_template.jinja with a 10^10 loop",
                 [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r}); "
                  f"import engine; engine.load({str(hanging)!r}, device='cpu')"], None))
    rows = run_all(cli_cases(model, work), jobs)
    if args.real_aligner:
        real = build_checkpoint(work / "real-aligner", seed=1, aligner=True, dims=REAL_0_6B)
        code, out, seconds, rss = run([sys.executable, "-c", prelude.split("eng = ")[0]
                                       + textwrap.dedent(REAL_ALIGNER_CASE.format(aligner=str(real)))], 1800)
        rows.append(("API real ForcedAligner-0.6B dims, 180 s dense chunk", message(out), code, seconds, rss))
    print("| case | message | exit | time s | peak RSS MiB |")
    print("| --- | --- | --- | --- | --- |")
    for name, msg, code, seconds, rss in rows:
        print(f"| {name} | {msg.replace('|', '/')} | {code} | {seconds:.1f} | {rss:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
