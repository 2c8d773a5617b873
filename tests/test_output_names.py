"""Outputs never overwrite each other silently: unique names within a run (CLI and app
export), files that existed before refused without --overwrite, -o must be a folder."""
from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from PySide6.QtCore import QSettings

from cli.main import main
from engine.text.exports import OutputNames, unique_stems
from engine.text.types import Segment, Transcript

SR = 16000


def test_stems_stay_plain_unless_they_clash(tmp_path):
    assert unique_stems(["a/talk.wav", "b/memo.wav"]) == ["talk", "memo"]
    assert unique_stems(["a/talk.wav", "b/talk.wav"]) == ["talk", "talk"]   # different folders
    assert unique_stems(["a/talk.wav", "a/talk.flac"]) == ["talk.wav", "talk.flac"]
    out = [tmp_path] * 3
    assert unique_stems(["a/talk.wav", "b/talk.wav", "talk.flac"], out) == \
        ["talk.wav (a)", "talk.wav (b)", "talk.flac"]
    assert unique_stems(["x/talk.wav", "x/talk.wav"], out[:2]) == ["talk", "talk (2)"]
    assert unique_stems(["a/Talk.wav", "b/talk.MP3"], out[:2]) == ["Talk.wav", "talk.MP3"]


def test_a_path_is_never_handed_out_twice(tmp_path):
    names = OutputNames()
    assert names.claim(tmp_path / "talk.txt") == tmp_path / "talk.txt"
    assert names.claim(tmp_path / "talk.txt") == tmp_path / "talk (2).txt"
    assert names.claim(tmp_path / "talk.txt") == tmp_path / "talk (3).txt"
    assert names.claim(tmp_path / "other" / "talk.txt") == tmp_path / "other" / "talk.txt"


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """talk.wav and talk.flac with different audio, and a/talk.wav, b/talk.wav."""
    root = tmp_path_factory.mktemp("names-in")
    t = np.arange(SR) / SR
    for i, rel in enumerate(["talk.wav", "talk.flac", "a/talk.wav", "b/talk.wav"]):
        (root / rel).parent.mkdir(exist_ok=True)
        sf.write(root / rel, (0.2 * np.sin(2 * np.pi * (200 + 90 * i) * t)).astype(np.float32), SR)
    return root


def cli(model, *argv):
    return main(["transcribe", *map(str, argv), "--model", str(model), "--language", "en",
                 "--no-vad", "--quiet"])


def test_cli_same_stems_in_one_run_all_written(clips, tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli(tiny_model_dir, clips / "talk.wav", clips / "talk.flac", clips / "a/talk.wav",
               clips / "b/talk.wav", clips / "talk.wav", "-o", out)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "given more than once" in err
    assert sorted(p.name for p in out.iterdir()) == \
        ["talk.flac.txt", "talk.wav (a).txt", "talk.wav (b).txt", "talk.wav (names-in0).txt"]


def test_cli_refuses_existing_outputs_without_overwrite(clips, tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "talk.txt").write_text("my notes\n")
    code = cli(tiny_model_dir, clips / "talk.wav", "-o", out)
    err = capsys.readouterr().err
    assert code == 1
    assert "--overwrite" in err and str(out / "talk.txt") in err
    assert (out / "talk.txt").read_text() == "my notes\n"
    assert cli(tiny_model_dir, clips / "talk.wav", "-o", out, "--overwrite") == 0
    assert (out / "talk.txt").read_text() != "my notes\n"


def test_cli_output_dir_that_is_a_file_says_so(clips, tiny_model_dir, tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    assert cli(tiny_model_dir, clips / "talk.wav", "-o", target) == 1
    assert "-o must be a folder" in capsys.readouterr().err
    assert target.read_text() == "keep me"


def transcript(text):
    return Transcript(text=text, language="English", duration=1.0,
                      segments=[Segment(0.0, 1.0, text, language="English")])


def test_app_export_writes_one_file_per_transcript(clips, tmp_path):
    from app import settings as S
    from app.export.export_actions import CHOICES, export_many
    from app.settings import Settings

    settings = Settings(QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    settings.set(S.EXPORT_DIR, str(tmp_path / "exports"))
    items = [(str(clips / "a/talk.wav"), transcript("first")), (str(clips / "b/talk.wav"), transcript("second")),
             (str(clips / "talk.flac"), transcript("third"))]
    txt = next(c for c in CHOICES if c.fmt == "txt" and not c.timestamps)
    written, errors = export_many(settings, items, txt)
    assert not errors and len(written) == 3
    assert sorted(p.read_text().strip() for p in (tmp_path / "exports").iterdir()) == ["first", "second", "third"]
