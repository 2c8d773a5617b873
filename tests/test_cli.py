"""``qwen3-asr transcribe`` end to end: the files it writes, and how it fails."""
from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import srt
import webvtt
from checkpoints import build_checkpoint
from conftest import espeak_wav

from cli.main import main
from engine.text.cues import build_cues
from engine.text.exports import to_srt, to_txt, to_vtt
from engine.text.types import Transcript

SR = 16000
REPO = Path(__file__).resolve().parent.parent
FORMATS = ("srt", "vtt", "json", "txt")


def speech(folder: Path, texts: list[str], gaps: list[float]) -> np.ndarray:
    pieces = [np.zeros(SR // 2, np.float32)]
    for i, text in enumerate(texts):
        audio, rate = sf.read(espeak_wav(folder / f"part{i}.wav", text), dtype="float32")
        assert rate == SR
        pieces += [audio, np.zeros(int(gaps[i] * SR), np.float32)]
    return np.concatenate(pieces)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, tuple[Path, float]]:
    """Two spoken files, a WAV and a FLAC: name -> (path, duration)."""
    folder = tmp_path_factory.mktemp("cli-in")
    a = speech(folder, ["The quick brown fox jumps over the lazy dog.",
                        "One two three four five six seven eight nine ten.",
                        "Speech to text on your own computer, fast and private."], [1.0, 4.0, 1.0])
    b = speech(folder, ["Hello world, this is a test of speech recognition."], [0.7])
    sf.write(folder / "meeting.wav", a, SR, subtype="PCM_16")
    sf.write(folder / "memo.flac", b, SR, subtype="PCM_16")
    return {"meeting": (folder / "meeting.wav", len(a) / SR), "memo": (folder / "memo.flac", len(b) / SR)}


@pytest.fixture(scope="module")
def aligner_dir(tmp_path_factory) -> Path:
    """An aligner whose random guesses fall within a few seconds, so words spread over segments."""
    return build_checkpoint(tmp_path_factory.mktemp("cli-aligner"), seed=3, aligner=True, num_labels=48)


@pytest.fixture(scope="module")
def run(inputs, tiny_model_dir, aligner_dir, tmp_path_factory):
    """One real command-line run over both files, as a user types it."""
    out = tmp_path_factory.mktemp("cli-out")
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "transcribe", *(str(p) for p, _ in inputs.values()),
         "--model", str(tiny_model_dir), "--aligner", str(aligner_dir), "--language", "en",
         "--format", ",".join(FORMATS), "-o", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    return proc, out


def seconds(delta: datetime.timedelta) -> float:
    return round(delta.total_seconds(), 3)


def vtt_seconds(stamp: str) -> float:
    h, m, s = stamp.split(":")
    return round(int(h) * 3600 + int(m) * 60 + float(s), 3)


def check_timeline(times: list[tuple[float, float]], duration: float) -> None:
    assert times, "no cues"
    for start, end in times:
        assert 0.0 <= start <= end <= duration + 1e-3
    for (_, end), (start, _) in zip(times, times[1:]):
        assert end <= start, "cues overlap or go backwards"


def test_writes_every_format_for_both_files(run, inputs):
    proc, out = run
    assert proc.returncode == 0, proc.stderr
    for stem in inputs:
        for fmt in FORMATS:
            path = out / f"{stem}.{fmt}"
            assert path.is_file() and path.stat().st_size > 0, f"{path.name} missing"
            assert f"wrote {path}" in proc.stderr
    print("\n" + "\n".join(f"--- meeting.{fmt} ---\n" + (out / f"meeting.{fmt}").read_text()[:600]
                           for fmt in FORMATS))


@pytest.mark.parametrize("stem", ["meeting", "memo"])
def test_json_holds_segments_words_and_metadata(run, inputs, tiny_model_dir, stem):
    _, out = run
    data = json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))
    duration = inputs[stem][1]
    assert data["language"] == "English"
    assert data["duration"] == pytest.approx(duration, abs=1e-3)
    assert data["model"] == str(tiny_model_dir)
    assert data["words_note"] == ""
    assert data["segments"]
    assert data["text"] == " ".join(s["text"] for s in data["segments"])
    for seg in data["segments"]:
        assert 0.0 <= seg["start"] < seg["end"] <= duration
        # the random aligner's guesses may fail the checks: then the segment says its times are estimates
        assert seg["timing"] == ("aligned" if seg["words"] else "estimated")
        if not seg["words"]:
            assert any("could not be aligned" in n for n in data["notes"])
            continue
        times = [t for w in seg["words"] for t in (w["start"], w["end"])]
        assert times == sorted(times) and seg["start"] <= times[0] and times[-1] <= seg["end"]
        assert " ".join(" ".join(w["text"] for w in seg["words"]).split()) == " ".join(seg["text"].split())
    starts = [s["start"] for s in data["segments"]]
    assert starts == sorted(starts)


def test_meeting_is_cut_at_the_long_pause(run):
    _, out = run
    segments = json.loads((out / "meeting.json").read_text())["segments"]
    assert len(segments) >= 2, "a 4 s pause should end a segment"


@pytest.mark.parametrize("stem", ["meeting", "memo"])
def test_srt_parses_and_keeps_times_to_the_millisecond(run, inputs, stem):
    _, out = run
    text = (out / f"{stem}.srt").read_text(encoding="utf-8")
    subs = list(srt.parse(text))
    check_timeline([(seconds(s.start), seconds(s.end)) for s in subs], inputs[stem][1])
    assert all(s.content.strip() for s in subs)
    assert [s.index for s in subs] == list(range(1, len(subs) + 1))
    assert srt.compose(subs, reindex=False, strict=False).strip() == text.strip(), "SRT round trip changed it"
    # The file holds exactly the cues the transcript in the JSON gives, to the millisecond.
    transcript = Transcript.from_dict(json.loads((out / f"{stem}.json").read_text()))
    cues = build_cues(transcript)
    assert [(seconds(s.start), seconds(s.end)) for s in subs] == [(round(c.start, 3), round(c.end, 3))
                                                                  for c in cues]
    assert to_srt(transcript) == text


@pytest.mark.parametrize("stem", ["meeting", "memo"])
def test_vtt_parses_and_matches_the_srt(run, inputs, stem):
    _, out = run
    text = (out / f"{stem}.vtt").read_text(encoding="utf-8")
    assert text.startswith("WEBVTT")
    captions = list(webvtt.from_string(text))
    times = [(vtt_seconds(c.start), vtt_seconds(c.end)) for c in captions]
    check_timeline(times, inputs[stem][1])
    subs = list(srt.parse((out / f"{stem}.srt").read_text(encoding="utf-8")))
    assert times == [(seconds(s.start), seconds(s.end)) for s in subs]
    assert [c.text for c in captions] == [s.content for s in subs]
    transcript = Transcript.from_dict(json.loads((out / f"{stem}.json").read_text()))
    assert to_vtt(transcript) == text


def test_every_cue_stays_on_screen(run):
    _, out = run
    subs = list(srt.parse((out / "meeting.srt").read_text(encoding="utf-8")))
    assert all(s.end > s.start for s in subs), [f"{s.start} --> {s.end}" for s in subs]


def test_txt_is_the_segment_text(run):
    _, out = run
    text = (out / "meeting.txt").read_text(encoding="utf-8")
    transcript = Transcript.from_dict(json.loads((out / "meeting.json").read_text()))
    assert text == to_txt(transcript)
    assert len(text.splitlines()) == len(transcript.segments)


def test_missing_and_corrupt_files_fail_alone(inputs, tiny_model_dir, tmp_path, capsys):
    good = inputs["memo"][0]
    broken = tmp_path / "broken.mp3"
    broken.write_bytes(b"ID3\x04\x00\x00\x00\x00\x00\x00" + bytes(range(256)) * 20)
    missing = tmp_path / "no such file.wav"
    out = tmp_path / "out"
    code = main(["transcribe", str(missing), str(good), str(broken), "--model", str(tiny_model_dir),
                 "--format", "srt,txt", "-o", str(out), "--language", "en", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert str(missing) in err and "not found" in err
    assert str(broken) in err
    assert err.count("error:") == 2
    assert (out / "memo.srt").is_file() and (out / "memo.txt").read_text().strip()
    assert sorted(p.name for p in out.iterdir()) == ["memo.srt", "memo.txt"]


def test_unknown_format_is_a_usage_error(inputs, tiny_model_dir, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["transcribe", str(inputs["memo"][0]), "--model", str(tiny_model_dir), "--format", "srt,bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "bogus" in err and "usage:" in err


def test_missing_model_folder_says_so(inputs, tmp_path):
    missing = tmp_path / "models" / "Qwen3-ASR-0.6B"
    proc = subprocess.run([sys.executable, "-m", "cli.main", "transcribe", str(inputs["memo"][0]),
                           "--model", str(missing)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: no model folder at {missing}"


def test_folder_that_is_not_a_model_says_so(inputs, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a model")
    code = main(["transcribe", str(inputs["memo"][0]), "--model", str(tmp_path), "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and str(tmp_path) in err and "config.json" in err


def test_asr_checkpoint_as_aligner_says_so(inputs, tiny_model_dir, capsys):
    code = main(["transcribe", str(inputs["memo"][0]), "--model", str(tiny_model_dir),
                 "--aligner", str(tiny_model_dir), "--quiet"])
    assert code == 2
    assert "not a forced aligner (Qwen3-ForcedAligner)" in capsys.readouterr().err


def test_unknown_language_says_so(inputs, tiny_model_dir, capsys):
    code = main(["transcribe", str(inputs["memo"][0]), "--model", str(tiny_model_dir),
                 "--language", "klingon", "--quiet"])
    assert code == 2
    assert "unknown language 'klingon'" in capsys.readouterr().err
