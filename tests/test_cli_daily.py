"""The CLI as a daily tool: typos caught before the model loads, folders, Ctrl+C, a clean progress
line, and the app's karaoke VTT, timestamped TXT and cue options."""
from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import espeak_wav
from real_speech import ALIGNER_DIR, ASR_DIR

import engine
from cli.main import build_parser, main

REPO = Path(__file__).resolve().parent.parent
SENTENCE = "The weather is nice today. We will meet at the station."


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A folder of recordings as people keep them: audio in a subfolder too, notes, a hidden file."""
    root = tmp_path_factory.mktemp("recordings")
    espeak_wav(root / "monday.wav", SENTENCE)
    (root / "week2").mkdir()
    espeak_wav(root / "week2" / "tuesday.wav", "Hello world. This is a test.")
    (root / "notes.txt").write_text("agenda")
    (root / ".partial.wav").write_bytes(b"RIFF")
    return root


@pytest.fixture
def no_model_load(monkeypatch):
    """engine.load replaced by a recorder: the checks below must stop before it is called."""
    calls = []

    def load(*args, **kwargs):
        calls.append(args)
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(engine, "load", load)
    return calls


def test_misspelled_language_is_caught_before_the_model_loads_with_a_suggestion(folder, no_model_load, capsys):
    code = main(["transcribe", str(folder / "monday.wav"), "--model", str(ASR_DIR), "--language", "englsh"])
    assert code == 2 and no_model_load == []
    assert capsys.readouterr().err.strip() == "error: unknown language 'englsh'; did you mean English?"


def test_only_missing_inputs_fail_before_the_model_loads(tmp_path, no_model_load, capsys):
    missing = tmp_path / "no such talk.wav"
    code = main(["transcribe", str(missing), "--model", str(ASR_DIR)])
    assert code == 1 and no_model_load == []
    assert capsys.readouterr().err.strip() == f"error: {missing}: not found"


def test_bad_cue_options_are_usage_errors_before_the_model_loads(folder, no_model_load, capsys):
    code = main(["transcribe", str(folder / "monday.wav"), "--model", str(ASR_DIR),
                 "--min-cue-seconds", "9", "--max-cue-seconds", "3"])
    assert code == 2 and no_model_load == []
    assert "min_duration" in capsys.readouterr().err


def test_max_chunk_seconds_help_states_the_real_defaults():
    transcribe = build_parser()._subparsers._group_actions[0].choices["transcribe"]
    text = " ".join(transcribe.format_help().split())
    assert "default: the model's own, the same with or without --aligner: 30 s unless its folder's " \
           "transcription_defaults.json says otherwise" in text
    assert "default 30)" not in text


def test_ctrl_c_in_process_is_one_line_and_status_130(folder, monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "load", interrupted)
    assert main(["transcribe", str(folder / "monday.wav"), "--model", str(ASR_DIR)]) == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip().splitlines() == [
        "interrupted (Ctrl+C): stopped; files written before stay"]


def test_a_folder_gives_every_format_with_the_cue_options(folder, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["transcribe", str(folder), "--model", str(ASR_DIR), "--aligner", str(ALIGNER_DIR),
                 "--language", "en", "-o", str(out), "--quiet", "--format", "srt,vtt-karaoke,txt-timestamps,vtt",
                 "--max-line-chars", "12", "--max-lines", "1"])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{stem}{ext}" for stem in ("monday", "tuesday")
        for ext in (".srt", ".karaoke.vtt", ".timestamps.txt", ".vtt"))
    karaoke = (out / "monday.karaoke.vtt").read_text()
    assert karaoke.startswith("WEBVTT") and re.search(r"<\d\d:\d\d:\d\d\.\d\d\d>", karaoke)
    assert "<" not in (out / "monday.vtt").read_text().replace("-->", "")
    assert re.match(r"\[\d+:\d\d", (out / "monday.timestamps.txt").read_text())
    cue_lines = [line for line in (out / "monday.srt").read_text().splitlines()
                 if line and not line.isdigit() and "-->" not in line]
    assert cue_lines and all(len(line) <= 12 or " " not in line for line in cue_lines)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen_lines(written: str) -> list[str]:
    """What a terminal shows: "\\r" returns to column 0 and overwrites, ESC[K erases to the end."""
    lines = []
    for raw in written.split("\n"):
        line, cursor = "", 0
        for part in re.split(r"(\r|\x1b\[K)", raw):
            if part == "\r":
                cursor = 0
            elif part == "\x1b[K":
                line = line[:cursor]
            elif part:
                line = line[:cursor] + part + line[cursor + len(part):]
                cursor += len(part)
        lines.append(line)
    return lines


def test_wrote_lines_never_share_the_progress_bars_line(folder, tmp_path, monkeypatch):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    code = main(["transcribe", str(folder / "monday.wav"), str(folder / "week2"), "--model", str(ASR_DIR),
                 "--language", "en", "-o", str(tmp_path), "--format", "txt,srt"])
    assert code == 0
    shown = screen_lines(terminal.getvalue())
    wrote = [line for line in shown if "wrote " in line]
    assert len(wrote) == 4
    assert all(line.startswith("wrote ") for line in wrote), wrote
    assert shown[-2].startswith("[") and "100.0%" in shown[-2], "the bar ends drawn at 100%"


# The CLI, with its engine held after its first step until a signal ends it: Ctrl+C then always
# lands mid-run (two short clips could be done before a signal sent at the "model" line arrived).
HELD_CLI = """
import sys, time
import engine.api
step = engine.api.Engine.step
def held_step(self, *args, **kwargs):
    out = step(self, *args, **kwargs)
    print("held after a step", file=sys.stderr, flush=True)
    while True:
        time.sleep(0.05)
engine.api.Engine.step = held_step
from cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_during_a_run_exits_cleanly(folder, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", HELD_CLI, "transcribe", str(folder), str(folder / "monday.wav"),
                             "--model", str(ASR_DIR), "--language", "en", "-o", str(tmp_path / "out")],
                            cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for _ in range(200):   # library warnings, the "model ..." line and the progress bar may come first
        line = proc.stderr.readline()
        if "held after a step" in line or not line:
            break
    assert "held after a step" in line, line
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130
    assert "Traceback" not in rest
    assert rest.strip().splitlines()[-1] == "interrupted (Ctrl+C): stopped; files written before stay"
