"""Odd audio (issue 16): FIFOs and device symlinks, multi-track containers, absurd float levels,
255-byte file names. Each gives a clear message or a transcript that says what was done."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import engine
from engine.audio.decode import audio_info, load_audio, stream_audio
from engine.errors import AudioLoadError
from engine.text.exports import render_filename, safe_stem
from odd_audio_files import absurd_level_wav, fifo, long_name, symlink, two_track

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def speech(speech_wav) -> np.ndarray:
    samples, rate = sf.read(str(speech_wav), dtype="float32")
    assert rate == 16000
    return samples


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32")


# -- not regular files -----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom"])
def test_non_regular_files_are_named_without_opening(kind, tmp_path):
    path = fifo(tmp_path / "x.wav") if kind == "fifo" else symlink(tmp_path / "x.wav", kind)
    for read in (audio_info, load_audio, lambda p: next(stream_audio(p))):
        with pytest.raises(AudioLoadError, match="not a regular file") as err:
            read(path)   # a FIFO opened for reading would block here forever
        assert str(path) in str(err.value)
    assert "FIFO" in str(err.value) if kind == "fifo" else "character device" in str(err.value)


def test_cli_reports_fifo_and_device_and_goes_on(tmp_path, speech_wav):
    """In a real subprocess under a timeout: a blocked open would hang it."""
    odd = [fifo(tmp_path / "pipe.wav"), symlink(tmp_path / "zero.wav", "/dev/zero"),
           symlink(tmp_path / "random.wav", "/dev/urandom")]
    good = tmp_path / "good.wav"
    good.write_bytes(Path(speech_wav).read_bytes())
    proc = subprocess.run([sys.executable, "-m", "cli.main", "transcribe", *map(str, odd), str(good),
                           "--model", str(_tiny_model(tmp_path)), "--device", "cpu", "--format", "json",
                           "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=600)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 1, proc.stderr
    assert len(errors) == 3 and all("not a regular file" in e for e in errors), proc.stderr
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "good.json").is_file()


def _tiny_model(tmp_path: Path) -> Path:
    from checkpoints import build_checkpoint

    folder = tmp_path.parent / "odd-audio-model"
    if not (folder / "config.json").is_file():
        build_checkpoint(folder, seed=0)
    return folder


# -- multi-track containers ------------------------------------------------------------------

@pytest.mark.parametrize("fmt,codec,ext", [("matroska", "pcm_s16le", "mkv"), ("mp4", "aac", "mp4")])
def test_default_flagged_track_with_speech_is_used(fmt, codec, ext, tmp_path, speech):
    path = two_track(tmp_path / f"two.{ext}", speech, fmt, codec)
    info = audio_info(path)
    assert (info.track, info.tracks) == (2, 2)
    notes = []
    audio = load_audio(path, notes)
    assert np.abs(audio).max() > 0.3, "the silent first track was decoded"
    assert notes == ["audio track 2 of 2 used (flagged default)"]


def test_without_default_flag_the_first_track_with_sound_is_used(tmp_path, speech):
    path = two_track(tmp_path / "two.mkv", speech, "matroska", "pcm_s16le", default_second=False)
    notes = []
    audio = load_audio(path, notes)
    np.testing.assert_allclose(audio[:len(speech)], speech, atol=1e-4)
    assert audio_info(path).track == 2
    assert notes and notes[0].startswith("audio track 2 of 2 used (the first with sound")


@pytest.mark.parametrize("channels,tracks,codec", [(2, 1, "pcm_f32le"), (6, 1, "pcm_f32le"), (8, 1, "pcm_f32le"),
                                                  (10, 1, "pcm_f32le"), (8, 2, "pcm_f32le"), (8, 1, "aac"),
                                                  (8, 2, "aac")])
def test_surround_tracks_of_8_and_more_channels_load(channels, tracks, codec, tmp_path, speech):
    """A 7.1 track (8 channels) used to kill the process with a segmentation fault inside PyAV
    (engine.audio.frames), so it is loaded in a child process: a crash fails this test alone.
    AAC decodes to planar frames, as film tracks do; float32 PCM to packed ones."""
    from odd_audio_files import surround

    path = surround(tmp_path / f"s{channels}.mkv", speech[:16000 * 2], channels, tracks, codec)
    code = ("import json, sys; from engine.audio.decode import load_audio; notes = []; "
            "a = load_audio(sys.argv[1], notes); print(json.dumps({'audio': a.tolist(), 'notes': notes}))")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-1500:]}"
    result = json.loads(proc.stdout.splitlines()[-1])
    audio = np.array(result["audio"], np.float32)
    # the mono mix is the mean of the channels: speech * (channels + 1) / (2 * channels)
    expected = speech[:16000 * 2] * (channels + 1) / (2 * channels)
    if codec == "aac":    # lossy, and its encoder delay shifts the samples: the level and length
        assert abs(len(audio) - len(expected)) < 16000 * 0.2
        assert np.sqrt(np.mean(audio ** 2)) == pytest.approx(np.sqrt(np.mean(expected ** 2)), rel=0.2)
    else:
        assert len(audio) == len(expected)
        np.testing.assert_allclose(audio, expected, atol=1e-5)
    if tracks == 2:
        assert result["notes"] and result["notes"][0].startswith("audio track 2 of 2 used (the first with sound")


def test_json_export_says_which_track(tmp_path, speech, tiny_model_dir, capsys):
    from cli.main import main

    path = two_track(tmp_path / "film.mkv", speech, "matroska", "pcm_s16le")
    assert main(["transcribe", str(path), "--model", str(tiny_model_dir), "--device", "cpu", "--format", "json",
                 "--quiet"]) == 0
    data = json.loads((tmp_path / "film.json").read_text())
    assert data["audio_track"] == 2
    assert "audio track 2 of 2 used (flagged default)" in data["notes"]
    assert "note: " in capsys.readouterr().err


# -- absurd levels ---------------------------------------------------------------------------

def test_absurd_float_level_is_normalised_and_noted(tmp_path, speech, eng):
    loud = absurd_level_wav(tmp_path / "loud.wav", speech)
    notes = []
    audio = load_audio(loud, notes)
    assert np.isfinite(audio).all()
    assert abs(float(np.abs(audio).max()) - 0.9) < 1e-3
    np.testing.assert_allclose(audio, speech * (0.9 / np.abs(speech).max()), rtol=1e-4, atol=1e-6)
    assert len(notes) == 1 and notes[0].startswith("audio level out of range")
    t = eng.transcribe(loud)
    assert t.text, "speech at 1e30 gave an empty transcript"
    assert any(n.startswith("audio level out of range") for n in t.notes)
    same_speech = tmp_path / "normal.wav"
    sf.write(str(same_speech), speech * (0.9 / np.abs(speech).max()), 16000, subtype="FLOAT")
    assert eng.transcribe(same_speech).text == t.text


def test_ordinary_levels_are_left_alone(speech_wav, speech):
    notes = []
    np.testing.assert_array_equal(load_audio(speech_wav, notes), speech)
    assert notes == []


def test_normalising_without_notes_warns(tmp_path, speech):
    with pytest.warns(UserWarning, match="audio level out of range"):
        load_audio(absurd_level_wav(tmp_path / "loud.wav", speech, 1e6))


# -- 255-byte names --------------------------------------------------------------------------

@pytest.mark.parametrize("char", ["x", "日"])
def test_255_byte_file_name_exports(char, tmp_path, speech_wav, tiny_model_dir, capsys):
    from cli.main import main

    a = long_name(tmp_path, speech_wav, char, tail="a")
    b = long_name(tmp_path, speech_wav, char, tail="b")   # differs only in its last bytes
    code = main(["transcribe", str(a), str(b), "--model", str(tiny_model_dir), "--device", "cpu",
                 "--format", "json,srt", "--quiet"])
    assert code == 0, capsys.readouterr().err
    outputs = sorted(p for p in tmp_path.iterdir() if p.suffix in (".json", ".srt"))
    assert len(outputs) == 4, outputs
    assert all(len(p.name.encode()) <= 241 for p in outputs)


def test_safe_stem_keeps_short_names_and_distinguishes_long_ones():
    assert safe_stem("talk") == "talk"
    assert safe_stem("a" * 150) == "a" * 150
    one, two = safe_stem("a" * 300 + "1"), safe_stem("a" * 300 + "2")
    assert one != two and len(one.encode()) <= 150
    name = render_filename("{date}_{stem}_{lang}.{ext}", stem="日" * 200, fmt="json", language="en")
    assert len(name.encode()) <= 241 and name.endswith("_en.json")
