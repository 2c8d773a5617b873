"""App settings and drops (issue 37): numbers out of the engine's ranges are ignored with a log line
(never a Qt int overflow), the KV cache budget reaches the engine, and a dropped FIFO or link to
/dev/zero is refused with the CLI's words."""
from __future__ import annotations

import logging
import os

from test_app_startup import data_dir, start  # noqa: F401  (a fixture)

from app import settings as S
from app.queue.file_collect import collect_audio_files
from app.settings import Settings
from app.backend.worker import EngineWorker


def test_out_of_range_numbers_are_ignored_with_a_log_line_each(qtbot, qapp, data_dir, caplog):  # noqa: F811
    (data_dir / "settings.ini").write_text(
        "[transcribe]\nmax_chunk_seconds=99999999999\nparallel_files=-3\n"
        "[model]\nkv_cache_mb=5\n[live]\nfont_size=4294967291\n[cues]\nmax_lines=0\nmin_gap=nan\n")
    caplog.set_level(logging.WARNING)
    window, client = start(qtbot, qapp)
    settings = window.settings
    assert settings.get(S.MAX_CHUNK_SECONDS) == 0 and settings.get(S.KV_CACHE_MB) == 0
    assert settings.get(S.PARALLEL_FILES) == 4 and settings.get(S.LIVE_FONT_SIZE) == 20
    assert settings.get(S.MAX_LINES) == 2 and settings.get(S.MIN_GAP) == 0.08
    assert window.queue.max_chunk_seconds == 0            # automatic, not -5 after a 32-bit wrap
    logged = caplog.text
    for name, shown in (("transcribe/max_chunk_seconds", "'99999999999'"), ("model/kv_cache_mb", "'5'"),
                        ("transcribe/parallel_files", "'-3'"), ("live/font_size", "'4294967291'"),
                        ("cues/max_lines", "'0'")):
        assert f"{name}={shown}" in logged, name
        assert logged.count(f"{name}={shown}") == 1      # once, not at every read
    assert "transcribe/max_chunk_seconds must be 0 (automatic) or between 1 and 1200 seconds" in logged
    from app.settings.settings_dialog import SettingsDialog

    dialog = SettingsDialog(settings)                     # no OverflowError filling the controls
    qtbot.addWidget(dialog)
    assert dialog.chunk_spin.value() == 0 and dialog.kv_cache_spin.value() == 0
    client.shutdown()


def test_values_in_range_pass_and_the_dialog_saves_a_budget(qtbot, qapp, tmp_path):
    from PySide6.QtCore import QSettings

    from app.settings.settings_dialog import SettingsDialog

    settings = Settings(QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    settings.set(S.MAX_CHUNK_SECONDS, 600)
    settings.set(S.KV_CACHE_MB, 2048)
    assert settings.get(S.MAX_CHUNK_SECONDS) == 600 and settings.get(S.KV_CACHE_MB) == 2048
    dialog = SettingsDialog(settings)
    qtbot.addWidget(dialog)
    dialog.kv_cache_spin.setValue(3)          # below the rule's 16 MiB: saved as the least budget
    dialog.save()
    assert settings.get(S.KV_CACHE_MB) == 16


def test_the_kv_cache_setting_reaches_the_engine_loader(qapp):
    seen = []

    def loader(*args, **options):
        seen.append(options)
        raise ValueError("not a model")     # the worker reports it; the test only wants the options
    worker = EngineWorker(loader=loader)
    worker.load_model("m", "cpu", "", "", 512)
    worker.load_model("m", "cpu", "", "")
    assert seen == [{"aligner": None, "kv_cache_bytes": 512 << 20}, {"aligner": None}]


def test_a_dropped_fifo_or_link_to_dev_zero_gets_the_clis_reason(tmp_path):
    fifo = tmp_path / "x.wav"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.wav"
    zero.symlink_to("/dev/zero")
    refused = dict(collect_audio_files([fifo, zero, tmp_path / "gone.wav"]).refused)
    assert refused == {fifo: "not a regular file (a FIFO)", zero: "not a regular file (a character device)",
                       tmp_path / "gone.wav": "no such file"}
