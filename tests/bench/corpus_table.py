"""The hostile-input corpus as a markdown result table (issue 7). Not collected by pytest.

    python tests/bench/corpus_table.py --model /tmp/tiny-asr [--keep DIR] [--simulate] [--no-app]

Builds the corpus of tests/test_hostile_inputs.py (plus one good espeak-ng speech file) and:

* CLI: runs the real ``qwen3-asr transcribe`` once, in a subprocess, over every file, and
  takes each file's ``error:`` line from its stderr. "Queue continued" means every file
  after it in the call that should succeed still got its outputs (the good speech file
  goes last).
  Export failures: as root with mount(8) working, a real read-only bind mount and a real
  full tmpfs; otherwise (or with ``--simulate``) the subprocess fakes them as the tests
  do (EROFS from os.open in the folder, ENOSPC from fsync).
* App: runs the app-queue test of tests/test_hostile_inputs.py under pytest-qt
  (offscreen, real window, real engine) with QWEN3_HOSTILE_REPORT set, and reads back the
  rows it asserted, with messages in full.

Prints one markdown table: input | CLI message | app queue message | queue continued.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from test_hostile_inputs import build_corpus  # noqa: E402

from engine.text.exports import render_filename  # noqa: E402

RO_LABEL = "export to a read-only folder (EROFS)"
FULL_LABEL = "export with the disk full (ENOSPC)"

# Runs cli.main with the export failures faked (no mounts): argv[1] is the read-only
# folder, argv[2] the marker in the path of files whose fsync hits a full disk.
SIMULATED_CLI = r"""
import errno, os, sys
from pathlib import Path
ro, marker = Path(sys.argv[1]).resolve(), sys.argv[2]
real_open, real_fsync = os.open, os.fsync
def fake_open(path, flags, mode=0o777, *, dir_fd=None):
    if dir_fd is None and flags & os.O_CREAT and Path(os.fsdecode(path)).resolve().parent == ro:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
    return real_open(path, flags, mode, dir_fd=dir_fd)
def fake_fsync(fd):
    try:
        where = os.readlink(f"/proc/self/fd/{fd if isinstance(fd, int) else fd.fileno()}")
    except OSError:
        where = ""
    if marker in where:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return real_fsync(fd)
os.open, os.fsync = fake_open, fake_fsync
from cli.main import main
sys.exit(main(sys.argv[3:]))
"""


def _outputs(source: Path, formats=("txt", "json")) -> list[Path]:
    return [source.parent / render_filename("{stem}.{ext}", stem=source.stem, fmt=f) for f in formats]


def _sh(*cmd: str) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


class Mounts:
    """A real read-only bind mount and a real full tmpfs; undone on exit."""

    def __init__(self):
        self.points: list[Path] = []

    def read_only(self, folder: Path) -> bool:
        if not (_sh("mount", "--bind", str(folder), str(folder))):
            return False
        self.points.append(folder)
        return _sh("mount", "-o", "remount,bind,ro", str(folder))

    def full_disk(self, victim: Path, source: Path, earlier: str) -> bool:
        """Mount a tmpfs on ``victim``'s folder, copy ``source`` to ``victim``, fill the rest."""
        folder = victim.parent
        size = source.stat().st_size + 64 * 1024
        if not _sh("mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)):
            return False
        self.points.append(folder)
        shutil.copy(source, victim)
        _outputs(victim, ("txt",))[0].write_text(earlier, "utf-8")
        try:  # fill what is left
            with open(folder / "filler", "wb") as f:
                while True:
                    f.write(b"\0" * 4096)
                    f.flush()
        except OSError:
            pass
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for point in reversed(self.points):
            subprocess.run(["umount", str(point)], capture_output=True)


def run_cli(corpus: dict, model: str, simulate: bool) -> tuple[dict[str, tuple[str, str]], str, list[str]]:
    root: Path = corpus["root"]
    cases = corpus["cases"]
    earlier = "an earlier transcript that must survive\n"
    ro_dir, full_dir = root / "read-only share", root / "full disk"
    ro_dir.mkdir()
    full_dir.mkdir()
    ro_victim = Path(shutil.copy(corpus["speech"], ro_dir / "readonly_victim.wav"))
    full_victim = full_dir / "diskfull_victim.wav"
    good = [c for c in cases if c.label == "good speech"][0]
    rest = [c for c in cases if c is not good]

    with Mounts() as mounts:
        real = not simulate and os.geteuid() == 0 and shutil.which("mount") is not None
        real = real and mounts.read_only(ro_dir)
        real = real and mounts.full_disk(full_victim, corpus["speech"], earlier)
        if not real:
            mounts.__exit__()
            mounts.points.clear()
            shutil.copy(corpus["speech"], full_victim)
            _outputs(full_victim, ("txt",))[0].write_text(earlier, "utf-8")
        files = [c.path for c in rest] + [ro_victim, full_victim, good.path]
        args = ["transcribe", *map(str, files), "--model", model, "--format", "txt,json"]
        exe = shutil.which("qwen3-asr")
        if real:
            cmd = [exe, *args] if exe else [sys.executable, "-m", "cli.main", *args]
        else:
            cmd = [sys.executable, "-c", SIMULATED_CLI, str(ro_dir), "diskfull_victim", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        survived = _outputs(full_victim, ("txt",))[0].read_text("utf-8") == earlier
        ro_left = sorted(p.name for p in ro_dir.iterdir())
    how = "real mounts (read-only bind mount, full tmpfs)" if real else "simulated (EROFS at os.open, ENOSPC at fsync)"
    prog = ("qwen3-asr" if exe else "python -m cli.main") if real else "python -c <cli.main, failures faked>"
    shown = [f"$ {prog} transcribe <{len(files)} files> {' '.join(args[-4:])}",
             f"exit status {proc.returncode}; export failures: {how}",
             f"earlier transcript next to the disk-full victim intact: {survived}; "
             f"read-only folder afterwards holds: {ro_left}"]
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    if "Traceback" in proc.stderr:
        shown.append("TRACEBACK in stderr:\n" + proc.stderr)

    def short(text: str) -> str:
        return text.replace(str(root), "<corpus>")

    def continued(index: int) -> str:
        later = [f for f, c in zip(files[index + 1:], [*rest, None, None, good][index + 1:])
                 if c is not None and c.reason is None]
        return "yes" if all(p.is_file() for f in later for p in _outputs(f)) else "NO"

    result: dict[str, tuple[str, str]] = {}
    for i, case in enumerate([*rest, None, None, good]):
        path = files[i]
        # A load error names the input; an export error names the output (same folder and stem).
        mine = [e for e in errors if str(path) in e or str(path.with_suffix("")) + "." in e]
        if case is None:
            label = RO_LABEL if path == ro_victim else FULL_LABEL
            result[label] = ("<br>".join(short(e) for e in mine) or "(no error!)", continued(i))
            continue
        if mine:
            msg = "<br>".join(short(e) for e in mine)
        else:
            outs = _outputs(path)
            ok = all(p.is_file() for p in outs)
            empty = ok and outs[0].read_text("utf-8") == ""
            msg = ("ok" + (" (empty transcript)" if empty else "") + ": " + ", ".join(p.name for p in outs)
                   if ok else "(no error, but no outputs!)")
        result[case.label] = (msg, continued(i))
    return result, proc.stderr, shown


def run_app(report: Path) -> tuple[dict[str, tuple[str, str]], str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QWEN3_HOSTILE_REPORT=str(report))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "tests/test_hostile_inputs.py", "-k", "app_queue"],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    rows: dict[str, tuple[str, str]] = {}
    if report.is_file():
        for line in report.read_text("utf-8").splitlines():
            table = json.loads(line)
            for label, message, cont in table["rows"]:
                rows[label.removeprefix("app ")] = (message, cont)
    summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    return rows, f"pytest app-queue test: exit status {proc.returncode}, {summary}"


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="/tmp/tiny-asr", help="model folder (default /tmp/tiny-asr)")
    ap.add_argument("--keep", type=Path, help="build the corpus here and keep it (default: a temp folder)")
    ap.add_argument("--simulate", action="store_true", help="fake the export failures even where mounts work")
    ap.add_argument("--no-app", action="store_true", help="only the command line")
    args = ap.parse_args()
    if not Path(args.model).is_dir():
        sys.exit(f"no model folder {args.model}; build one with: cd tests && python -c "
                 "\"from checkpoints import build_checkpoint; build_checkpoint('/tmp/tiny-asr', seed=0)\"")

    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        corpus = build_corpus(root)
        cli, stderr, notes = run_cli(corpus, args.model, args.simulate)
        app, app_note = ({}, "app queue: skipped") if args.no_app else run_app(Path(tmp) / "app-report.jsonl")

    labels = [c.label for c in corpus["cases"] if c.label != "good speech"] + [RO_LABEL, FULL_LABEL, "good speech"]
    print("\n".join(notes + [app_note, ""]))
    print("| input | CLI (`qwen3-asr transcribe`) | app queue | queue continued (CLI / app) |")
    print("|---|---|---|---|")
    for label in labels:
        c_msg, c_cont = cli.get(label, ("-", "-"))
        a_msg, a_cont = app.get(label, ("-", "-"))
        if label == "good speech" and label not in app:
            a_msg, a_cont = "done", "yes" if app else "-"
        print(f"| {cell(label)} | {cell(c_msg)} | {cell(a_msg)} | {c_cont} / {a_cont} |")
    extra = {k: v for k, v in app.items() if k not in labels}
    for label, (msg, cont) in extra.items():
        print(f"| {cell(label)} (app only) | - | {cell(msg)} | - / {cont} |")
    print("\nCLI stderr (paths under the corpus folder shown as <corpus>):\n```")
    print(stderr.replace(str(root), "<corpus>").rstrip() + "\n```")
    bad = any(v[1] == "NO" for v in cli.values()) or "Traceback" in stderr
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
