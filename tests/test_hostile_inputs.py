"""Hostile inputs: every broken file fails alone with a clear reason, the rest of the queue finishes.

A corpus of damaged, empty, odd and valid-but-unusual files goes through the
command line (in-process) and through the app's queue (the real window, the
real engine with the tiny checkpoint). Broken files must fail with a message
naming the file and the reason; unusual-but-valid files must succeed; export
failures (read-only folder, full disk) must name the path and the reason and
leave files written earlier intact. Each surface prints a result table
(``pytest -s`` shows it).

Not fuzzed here: the audio loader on random bytes (tests/test_audio.py) and the
exporters (tests/test_exports.py). Fuzzed here: random bytes queued as files
through ``Engine.submit_file``, next to a good clip that must still come out
exactly as it does alone.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pytest
import soundfile as sf
import soxr
from conftest import espeak_wav
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main as cli_main
from engine.text.exports import render_filename

SR = 16000
WAIT_MS = 120_000
UNICODE_NAME = 'my "talk" – café ü.wav'
# tests/bench/corpus_table.py sets this: each result table is also appended here as a JSON
# line, with messages in full instead of cut to one short line.
REPORT = os.environ.get("QWEN3_HOSTILE_REPORT")


@dataclass(frozen=True)
class Case:
    label: str           # what the table calls it
    path: Path
    reason: str | None   # None: must succeed; else a phrase the error must contain
    empty: bool = False  # a success whose transcript must be empty


# --- the corpus -----------------------------------------------------------------------------

def _video_without_audio(path: Path) -> Path:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(5):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), i * 40, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _hour_of_silence(path: Path) -> Path:
    """One hour of 16 kHz 16-bit mono zeros as FLAC: ~180 kB on disk, written in about a second."""
    minute = np.zeros(60 * SR, np.int16)
    with sf.SoundFile(str(path), "w", SR, 1, subtype="PCM_16", format="FLAC") as f:
        for _ in range(60):
            f.write(minute)
    return path


def build_corpus(root: Path) -> dict[str, object]:
    """Write the corpus under ``root`` (tests/bench/corpus_table.py builds the same one)."""
    root = Path(root)
    src = root / "in"
    src.mkdir()
    speech_path = espeak_wav(root / "speech-src.wav", "Hello world. This is a test of local speech recognition.")
    speech, rate = sf.read(str(speech_path), dtype="float32")
    assert rate == SR

    (src / "empty.wav").write_bytes(b"")
    (src / "truncated_header.wav").write_bytes(speech_path.read_bytes()[:30])
    (src / "random_bytes.mp3").write_bytes(np.random.default_rng(7).bytes(20_000))
    _video_without_audio(src / "video_no_audio.mp4")
    sf.write(str(src / "one_sample.wav"), np.array([0.1], np.float32), SR)
    bad = speech.copy()
    bad[100], bad[200], bad[300] = np.nan, np.inf, -np.inf
    sf.write(str(src / "nan_inf_float.wav"), bad, SR, subtype="FLOAT")
    sf.write(str(src / "low_8khz_8bit.wav"), soxr.resample(speech, SR, 8000), 8000, subtype="PCM_U8")
    hi = soxr.resample(speech, SR, 96000)
    sf.write(str(src / "six_channels_96khz.wav"), hi[:, None] * np.linspace(0.2, 1.0, 6, dtype=np.float32),
             96000, subtype="PCM_16")
    _hour_of_silence(src / "hour_of_silence.flac")
    shutil.copy(speech_path, src / UNICODE_NAME)
    shutil.copy(speech_path, src / "good_speech.wav")

    cases = [
        Case("0-byte file", src / "empty.wav", "file is empty (0 bytes)"),
        Case("truncated WAV header", src / "truncated_header.wav", "is not an audio file"),
        Case("random bytes named .mp3", src / "random_bytes.mp3", "is not an audio file"),
        Case("video without an audio track", src / "video_no_audio.mp4", "contains no audio track"),
        Case("float WAV with NaN and Inf", src / "nan_inf_float.wav", "contains NaN or infinite samples"),
        Case("1-sample WAV", src / "one_sample.wav", None, empty=True),
        Case("8 kHz 8-bit WAV", src / "low_8khz_8bit.wav", None),
        Case("6-channel 96 kHz WAV", src / "six_channels_96khz.wav", None),
        Case("1 h of silence (FLAC)", src / "hour_of_silence.flac", None, empty=True),
        Case("spaces, quotes, unicode in the name", src / UNICODE_NAME, None),
        Case("good speech", src / "good_speech.wav", None),
    ]
    return {"root": root, "src": src, "speech": speech_path, "cases": cases}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, object]:
    return build_corpus(tmp_path_factory.mktemp("hostile"))


def _outputs(source: Path, folder: Path | None = None, formats=("txt", "json")) -> list[Path]:
    folder = folder or source.parent
    return [folder / render_filename("{stem}.{ext}", stem=source.stem, fmt=fmt) for fmt in formats]


def _table(title: str, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    out = [f"\n{title}", line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows]
    if REPORT:
        with open(REPORT, "a", encoding="utf-8") as f:
            f.write(json.dumps({"title": title, "header": header, "rows": rows}, ensure_ascii=False) + "\n")
    return "\n".join(out)


def _short(text: str, limit: int = 110, **roots: Path) -> str:
    """One line of at most ``limit`` characters, with long tmp folders shown as <name>."""
    for name, root in roots.items():
        text = text.replace(str(root), f"<{name}>")
    text = " ".join(text.split())
    if REPORT:  # the full message for tests/bench/corpus_table.py
        return text
    return text if len(text) <= limit else text[:limit - 1] + "…"


# --- simulated export failures --------------------------------------------------------------

def _fd_path(fd) -> str:
    fd = fd if isinstance(fd, int) else fd.fileno()
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


def _disk_full_for(monkeypatch, marker: str) -> None:
    """fsync of any file whose path contains ``marker`` fails with ENOSPC (the disk filled up)."""
    real_fsync = os.fsync

    def fsync(fd):
        if marker in _fd_path(fd):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def _read_only_folder(monkeypatch, folder: Path) -> None:
    """Creating a file directly in ``folder`` fails with EROFS. We run as root, where chmod
    stops nothing, so the read-only mount is simulated at os.open, which write_atomic uses."""
    real_open = os.open
    folder = Path(folder).resolve()

    def fake_open(path, flags, mode=0o777, *, dir_fd=None):
        if dir_fd is None and flags & os.O_CREAT and Path(os.fsdecode(path)).resolve().parent == folder:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", fake_open)


def _no_temp_files(*folders: Path) -> None:
    for folder in folders:
        left = [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
        assert not left, f"temp files left in {folder}: {left}"


# --- command line ---------------------------------------------------------------------------

def test_cli_corpus_fails_alone_and_keeps_finished_work(corpus, tiny_model_dir, monkeypatch, capsys):
    cases: list[Case] = corpus["cases"]
    root: Path = corpus["root"]
    # Export victims: both transcribe fine, then writing their outputs fails.
    ro_share = root / "read-only share"
    ro_share.mkdir()
    ro_victim = Path(shutil.copy(corpus["speech"], ro_share / "readonly_victim.wav"))
    full_victim = Path(shutil.copy(corpus["speech"], corpus["src"] / "diskfull_victim.wav"))
    old_txt = _outputs(full_victim, formats=("txt",))[0]
    old_txt.write_text("an earlier transcript that must survive\n", "utf-8")
    _read_only_folder(monkeypatch, ro_share)
    _disk_full_for(monkeypatch, "diskfull_victim")

    files = [c.path for c in cases] + [ro_victim, full_victim]
    # --overwrite: the earlier transcript is to be replaced, and the disk-full write must not lose it
    rc = cli_main(["transcribe", *map(str, files), "--model", str(tiny_model_dir),
                   "--format", "txt,json", "--overwrite"])
    err = capsys.readouterr().err
    monkeypatch.undo()
    lines = err.splitlines()
    assert rc == 1, err
    assert "Traceback" not in err

    rows = []
    for case in cases:
        mine = [line for line in lines if line.startswith("error:") and str(case.path) in line]
        if case.reason is None:
            assert not mine, mine
            outs = _outputs(case.path)
            assert all(p.is_file() for p in outs), (case.label, outs, err)
            text = outs[0].read_text("utf-8")
            if case.empty:
                assert text == "", (case.label, text)
            else:
                assert text.strip(), f"{case.label}: no transcript text"
            note = "ok (empty transcript): " if case.empty else "ok: "
            rows.append((case.label, note + ", ".join(p.name for p in outs), "yes"))
        else:
            assert len(mine) == 1, (case.label, err)
            assert case.reason in mine[0], (case.label, mine[0])
            assert not any(p.exists() for p in _outputs(case.path)), case.label
            rows.append((case.label, _short(mine[0], corpus=root), "yes"))

    # Read-only folder: the error names the output path and says why; nothing is left behind.
    ro_err = [line for line in lines if line.startswith("error:") and str(ro_share) in line]
    assert len(ro_err) == 2 and all("read-only" in line for line in ro_err), err
    assert all(f"cannot write {p}" in err for p in _outputs(ro_victim)), err
    assert sorted(p.name for p in ro_share.iterdir()) == ["readonly_victim.wav"]
    rows.append(("export to a read-only folder (EROFS)", _short(ro_err[0], corpus=root), "yes"))

    # Disk full: both formats fail naming their path; the earlier file is untouched.
    full_err = [line for line in lines if line.startswith("error:") and "diskfull_victim" in line]
    assert len(full_err) == 2 and all("disk full" in line for line in full_err), err
    assert old_txt.read_text("utf-8") == "an earlier transcript that must survive\n"
    assert not _outputs(full_victim)[1].exists()
    _no_temp_files(corpus["src"], ro_share)
    rows.append(("export with the disk full (ENOSPC)", _short(full_err[0], corpus=root), "yes"))

    # Outputs written before a failure are all still there at the end.
    wrote = [line.removeprefix("wrote ") for line in lines if line.startswith("wrote ")]
    assert wrote and all(Path(p).is_file() for p in wrote)
    print(_table("Hostile inputs, command line (qwen3-asr transcribe, one call for all files)",
                 ("input", "error shown", "queue continued"), rows))


def test_cli_output_folder_under_a_file_names_the_path(corpus, tiny_model_dir, capsys):
    root: Path = corpus["root"]
    blocker = root / "not-a-folder"
    blocker.write_text("a regular file where the output folder should go\n")
    out = blocker / "out"
    empty, good = corpus["src"] / "empty.wav", corpus["speech"]
    rc = cli_main(["transcribe", str(empty), str(good), "--model", str(tiny_model_dir),
                   "-o", str(out), "--format", "txt,srt"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert sum(str(empty) in line and "file is empty" in line for line in lines) == 1, err
    export_errors = [line for line in lines if f"cannot write {out}" in line]
    assert len(export_errors) == 2, err      # one per format: the queue went on after the first
    assert all("Not a directory" in line for line in export_errors), err
    assert blocker.read_text() == "a regular file where the output folder should go\n"
    print(_table("Export folder under a regular file (-o FILE/out)", ("input", "error shown", "queue continued"),
                 [("-o under a regular file (ENOTDIR)", _short(export_errors[0], corpus=root), "yes")]))


# --- the app's queue ------------------------------------------------------------------------

@pytest.fixture
def window(qtbot, tiny_model_dir, tmp_path, monkeypatch):
    pytest.importorskip("pytestqt")
    from app import settings as S
    from app_fixtures import real_engine_window

    monkeypatch.setenv("QWEN3_ASR_DATA_DIR", str(tmp_path / "data"))
    with real_engine_window(qtbot, {S.MODEL: str(tiny_model_dir)}, wait_ms=WAIT_MS) as w:
        yield w


def _drop(window, paths):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime,
                                Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))


def test_app_queue_corpus_fails_alone_with_visible_reasons(window, corpus, qtbot, tmp_path, monkeypatch):
    from PySide6.QtCore import Qt

    from app import settings as S
    from app.export.export_actions import CHOICES
    from app.queue.queue_model import COL_PROGRESS, COL_STATUS

    cases: list[Case] = corpus["cases"]
    model = window.queue.model
    _drop(window, [c.path for c in cases])
    assert len(model.items) == len(cases)
    qtbot.waitUntil(lambda: all(i.state in ("done", "failed") for i in model.items), timeout=WAIT_MS)
    assert window.isVisible()

    by_path = {Path(i.path): i for i in model.items}
    rows = []
    for case in cases:
        item = by_path[case.path.resolve()]
        row = model.row_of(item.job_id)
        status = model.data(model.index(row, COL_STATUS), Qt.ItemDataRole.DisplayRole)
        tooltip = model.data(model.index(row, COL_PROGRESS), Qt.ItemDataRole.ToolTipRole)
        if case.reason is None:
            assert item.state == "done", (case.label, item.error)
            assert status == ("No speech" if case.empty else "Done")
            assert (item.transcript.text == "") == case.empty, (case.label, item.transcript.text)
            assert window.history.get_transcript(item.job_id) is not None
            rows.append((case.label, "done (empty transcript)" if case.empty else "done", "yes"))
        else:
            assert item.state == "failed", case.label
            assert status == "Failed"
            assert case.path.name in item.error and case.reason in item.error, (case.label, item.error)
            assert tooltip == item.error   # hovering the row shows the reason
            window.queue_panel.table.selectRow(row)
            assert window.transcript_view.details.text() == item.error   # so does selecting it
            rows.append((case.label, "failed: " + _short(item.error, corpus=corpus["root"]), "yes"))

    # Exports from the app: first a good run, then a full disk, a read-only folder and a
    # folder under a regular file. Each reports the path and the reason; nothing written
    # earlier is lost.
    warnings = []
    monkeypatch.setattr("app.main_window.QMessageBox.warning",
                        lambda parent, title, text: warnings.append(text))
    out = tmp_path / "exports"
    window.settings.set(S.EXPORT_DIR, str(out))
    window.tabs.setCurrentWidget(window.queue_panel)
    window.queue_panel.table.selectAll()
    txt = CHOICES[4]
    assert txt.fmt == "txt" and not txt.timestamps
    first = window.export_selected(txt)
    done = [c for c in cases if c.reason is None]
    assert len(first) == len(done) and not warnings
    before = {p: p.read_bytes() for p in first}

    window.ask_replace = lambda paths: True  # the user agrees to replace the first export
    with monkeypatch.context() as m:
        _disk_full_for(m, "café")
        again = window.export_selected(txt)
    assert len(again) == len(done) - 1
    assert len(warnings) == 1 and "disk full" in warnings[0] and "café" in warnings[0], warnings
    rows.append(("app export with the disk full (ENOSPC)", _short(warnings[-1].splitlines()[0], tmp=tmp_path), "yes"))

    with monkeypatch.context() as m:
        _read_only_folder(m, out)
        assert window.export_selected(txt) == []
    assert len(warnings) == 2 and warnings[1].count("read-only") == len(done), warnings[1]
    rows.append(("app export to a read-only folder (EROFS)", _short(warnings[-1].splitlines()[0], tmp=tmp_path), "yes"))

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    window.settings.set(S.EXPORT_DIR, str(blocker / "out"))
    assert window.export_selected(txt) == []
    assert len(warnings) == 3 and f"cannot write {blocker / 'out'}" in warnings[2], warnings[2]
    assert "Not a directory" in warnings[2]
    rows.append(("app export folder under a regular file", _short(warnings[-1].splitlines()[0], tmp=tmp_path), "yes"))

    assert {p: p.read_bytes() for p in first} == before   # nothing earlier was lost
    _no_temp_files(out)
    assert window.isVisible()

    # And the queue still takes work.
    later = Path(shutil.copy(corpus["speech"], tmp_path / "later.wav"))
    _drop(window, [later])
    qtbot.waitUntil(lambda: model.item(model.items[-1].job_id).state in ("done", "failed"), timeout=WAIT_MS)
    assert model.items[-1].state == "done", model.items[-1].error
    print(_table("Hostile inputs, app queue (dropped on the real window)",
                 ("input", "error shown", "queue continued"), rows))


# --- fuzz: random files through the engine's file queue -------------------------------------

AUDIO_SUFFIXES = (".wav", ".mp3", ".flac", ".ogg", ".opus", ".m4a", ".mp4", ".webm", ".aiff", ".au",
                  ".caf", ".amr", ".ac3", ".w64")
HEADERS = (b"", b"RIFF\x24\x08\x00\x00WAVEfmt ", b"fLaC\x00\x00\x00\x22", b"OggS\x00\x02", b"ID3\x03\x00",
           b"\xff\xfb\x90\x64", b"\x00\x00\x00\x20ftypisom", b"\x1aE\xdf\xa3", b".snd\x00\x00\x00\x18",
           b"FORM\x00\x00\x10\x00AIFF", b"#!AMR\n")


@pytest.fixture(scope="module")
def fuzz_engine(tiny_model_dir, corpus):
    import engine

    eng = engine.load(tiny_model_dir)
    clip, _ = sf.read(str(corpus["speech"]), dtype="float32")
    clip = clip[: int(1.5 * SR)]
    job = eng.submit_file(clip)
    while eng.has_work():
        eng.step()
    assert job.state == "done", job.error
    return eng, clip, job.transcript.text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.sampled_from(HEADERS), body=st.binary(max_size=3000), suffix=st.sampled_from(AUDIO_SUFFIXES))
def test_fuzz_random_files_through_the_file_queue(fuzz_engine, tmp_path, header, body, suffix):
    eng, clip, expected = fuzz_engine
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(header + body)
    job = eng.submit_file(str(path))
    good = eng.submit_file(clip)          # shares every step with the hostile file
    for _ in range(5000):
        if not eng.has_work():
            break
        eng.step()
    assert not eng.has_work(), "the engine never went idle"
    assert job.state in ("done", "failed"), job.state
    if job.state == "failed":
        assert isinstance(job.error, str) and str(path) in job.error and len(job.error) > len(str(path)) + 2
        assert "Traceback" not in job.error
    else:
        assert job.transcript is not None
    assert good.state == "done", good.error
    assert good.transcript.text == expected
    assert eng.cache.allocator.num_free == eng.cache.allocator.num_blocks
