"""Bad models and odd audio (issue 16) through the real CLI: a markdown table. Not collected by pytest.

    python tests/bench/bad_inputs_table.py [--model DIR] [--aligner DIR] [--keep DIR] [--timeout 300]

Each case runs ``python -m cli.main transcribe ...`` in its own subprocess under
``/usr/bin/time -v`` (peak memory = its maximum resident set size) and a timeout, with
a good speech file; the table shows the lines the user sees (``error:`` / ``note:``),
the exit status, peak memory and wall time. Tiny random checkpoints are built when no
folders are given. The looping-model row patches the runner to repeat three tokens
(a checkpoint cannot be made to loop on demand); it is marked so.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bad_model_cases import CASES, make_case  # noqa: E402
from odd_audio_files import absurd_level_wav, fifo, long_name, surround, symlink, two_track  # noqa: E402

LOOPING_CLI = r"""
import sys
from engine.serving.runner import ModelRunner
real, loop = ModelRunner.run, [101, 102, 103]
def run(self, rows):
    out = real(self, rows)
    for row in rows:
        r = row.request
        if r.score_token_id is None and r.id in out:
            v = out[r.id]
            fake = [loop[(len(r.token_ids) + i) % 3] for i in range(len(v) if isinstance(v, list) else 1)]
            out[r.id] = fake if isinstance(v, list) else fake[0]
    return out
ModelRunner.run = run
from cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def run_cli(args: list[str], timeout: float, patched: str | None = None) -> dict:
    cli = [sys.executable, "-c", patched, *args] if patched else [sys.executable, "-m", "cli.main", *args]
    started = time.monotonic()
    try:
        proc = subprocess.run(["/usr/bin/time", "-v", *cli], capture_output=True, text=True, cwd=ROOT,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(code="timeout", shown=f"(killed after {timeout:.0f} s)", rss_mb=None,
                    seconds=time.monotonic() - started, traceback=False)
    seconds = time.monotonic() - started
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    shown = [line for line in proc.stderr.splitlines() if line.startswith(("error:", "note:"))]
    return dict(code=proc.returncode, shown=" / ".join(shown) or "(no error or note)",
                rss_mb=int(rss.group(1)) / 1024 if rss else None, seconds=seconds,
                traceback="Traceback" in proc.stderr)


def build_models(root: Path, model: str | None, aligner: str | None) -> tuple[Path, Path]:
    from checkpoints import build_checkpoint

    asr = Path(model) if model else build_checkpoint(root / "tiny-asr", seed=0)
    al = Path(aligner) if aligner else build_checkpoint(root / "tiny-aligner", seed=1, aligner=True)
    return asr, al


def speech_file(root: Path) -> Path:
    from conftest import espeak_wav

    return espeak_wav(root / "speech.wav", "Hello world. This is a test of local speech recognition.")


def model_rows(root: Path, good: Path, speech: Path, timeout: float):
    yield "good model (baseline)", run_cli(_args(speech, good, root / "out-good"), timeout)
    for i, (label, edit, _) in enumerate(CASES):
        folder = make_case(good, root / "models" / f"case{i}", edit)
        yield label, run_cli(_args(speech, folder, root / f"out{i}"), timeout)


def aligner_rows(root: Path, good: Path, aligner: Path, speech: Path, timeout: float):
    folder = Path(shutil.copytree(aligner, root / "aligner-no-timestamps"))
    (folder / "chat_template.jinja").write_text(
        "{%- for message in messages -%}{%- for item in message.content -%}"
        "{%- if item.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
        "{%- elif item.type == 'text' -%}{{ item.text }} {%- endif -%}{%- endfor -%}{%- endfor -%}")
    out = root / "out-aligner"
    result = run_cli(_args(speech, good, out, "json") + ["--aligner", str(folder)], timeout)
    data = json.loads((out / f"{speech.stem}.json").read_text()) if (out / f"{speech.stem}.json").is_file() else {}
    words = sum(len(s["words"]) for s in data.get("segments", []))
    timed = sum(1 for s in data.get("segments", []) for w in s["words"] if w["start"] is not None)
    result["shown"] += f" (JSON: {timed} of {words} words timed)"
    yield "aligner template renders no <timestamp>", result


def audio_rows(root: Path, good: Path, speech: Path, timeout: float):
    import soundfile as sf

    samples, _ = sf.read(str(speech), dtype="float32")
    folder = root / "audio"
    folder.mkdir()
    cases = [
        ("FIFO named x.wav", fifo(folder / "x.wav"), "txt"),
        ("symlink to /dev/zero named zero.wav", symlink(folder / "zero.wav", "/dev/zero"), "txt"),
        ("symlink to /dev/urandom named rand.wav", symlink(folder / "rand.wav", "/dev/urandom"), "txt"),
        ("MKV: silent track 1, speech on default track 2",
         two_track(folder / "film.mkv", samples, "matroska", "pcm_s16le"), "json"),
        ("MP4: silent track 1, speech on track 2, no default flag",
         two_track(folder / "clip.mp4", samples, "mp4", "aac", default_second=False), "json"),
        ("MKV: a 7.1 track (8 channels; crashed the process before 445e3db)",
         surround(folder / "surround.mkv", samples, 8), "json"),
        ("float WAV, speech x 1e30", absurd_level_wav(folder / "loud.wav", samples), "json"),
        ("255-byte file name (UTF-8)", long_name(folder, speech, "日"), "json"),
    ]
    for label, path, fmt in cases:
        out = root / f"out-{path.suffix[1:]}-{len(label)}"
        result = run_cli(_args(path, good, out, fmt), timeout)
        if fmt == "json" and result["code"] == 0:
            data = json.loads(next(out.glob("*.json")).read_text())
            result["shown"] += f" (JSON audio_track={data['audio_track']}, text {len(data['text'])} chars)"
        yield label, result
    out = root / "out-loop"
    yield "model that loops (runner patched)", run_cli(_args(speech, good, out, "json"), timeout, LOOPING_CLI)


def _args(audio: Path, model: Path, out: Path, fmt: str = "txt") -> list[str]:
    return ["transcribe", str(audio), "--model", str(model), "--device", "cpu", "--format", fmt, "-o", str(out),
            "--quiet"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--aligner")
    parser.add_argument("--keep", type=Path, help="build the cases here and keep them")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="bad-inputs-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        good, aligner = build_models(root, args.model, args.aligner)
        speech = speech_file(root)
        print("| case | message shown | exit status | peak memory | time |")
        print("| --- | --- | --- | --- | --- |")
        for rows in (model_rows(root, good, speech, args.timeout), aligner_rows(root, good, aligner, speech, args.timeout),
                     audio_rows(root, good, speech, args.timeout)):
            for label, r in rows:
                shown = r["shown"].replace(str(root), "<tmp>").replace("|", "\\|")
                if r["traceback"]:
                    shown += " **TRACEBACK**"
                rss = f"{r['rss_mb']:.0f} MB" if r["rss_mb"] is not None else "?"
                print(f"| {label} | {shown} | {r['code']} | {rss} | {r['seconds']:.1f} s |", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
