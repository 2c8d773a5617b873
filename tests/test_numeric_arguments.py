"""Numeric arguments (issue 37): one rule per argument, the same bounds on every path, checked
before any model loads; chunks that a small KV cache cannot hold are cut to fit with a note;
one huge live ``feed()`` is worked off in bounded slices beside a file queue."""
from __future__ import annotations

import math

import numpy as np
import pytest

import engine
from cli.main import main as cli_main
from engine.arguments import KV_CACHE_MB, MAX_CHUNK_SECONDS, SETTING_RULES, check_cli_numbers
from engine.audio.chunking import split_at_quiet_points
from engine.pipelines.file_job import chunk_cache_tokens, chunk_seconds_for_cache

SR = 16000
BAD_CHUNKS = ["0", "-5", "nan", "inf", "1e-5", "0.001", "0.5", "1e308", "1e9"]


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32")


@pytest.fixture
def no_model_load(monkeypatch):
    """Any model load fails the test: the checks must come first."""
    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")
    monkeypatch.setattr(engine, "load", refuse)
    monkeypatch.setattr("cli.main._resolve_model", refuse)


@pytest.mark.parametrize("value", BAD_CHUNKS)
def test_cli_refuses_bad_chunk_lengths_by_flag_name_before_loading(value, speech_wav, tmp_path, no_model_load,
                                                                     capsys):
    code = cli_main(["transcribe", str(speech_wav), "--model", "M", "--max-chunk-seconds", value,
                     "-o", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: --max-chunk-seconds must be between 1 and 1200 seconds (got "), err
    assert "Traceback" not in err and "\n" == err[-1] and err.count("\n") == 1


def test_cli_kv_cache_flag_is_checked_then_passed_to_the_engine(speech_wav, tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_load(*a, **options):
        seen.update(options)
        raise ValueError("stop here")
    monkeypatch.setattr(engine, "load", fake_load)
    monkeypatch.setattr("cli.main._resolve_model", str)
    base = ["transcribe", str(speech_wav), "--model", "M", "-o", str(tmp_path), "--quiet"]
    assert cli_main(base + ["--kv-cache-mb", "5"]) == 2
    assert "error: --kv-cache-mb must be between 16 and 1048576 MiB (got 5)" in capsys.readouterr().err
    assert not seen
    assert cli_main(base + ["--kv-cache-mb", "64"]) == 2
    assert seen["config"].kv_cache_bytes == 64 << 20          # the CLI builds an EngineConfig
    seen.clear()
    assert cli_main(base) == 2
    assert seen["config"].kv_cache_bytes is None     # the engine's own default


@pytest.mark.parametrize("value", [0, -5, math.nan, math.inf, 1e-5, 0.001, 0.5, 1e308, 1e9, True, "30"])
def test_api_and_chunkers_share_the_lower_bound(eng, value):
    with pytest.raises(ValueError, match="max_chunk_seconds must be"):
        eng.submit_file(np.zeros(SR, np.float32), max_chunk_seconds=value)
    if isinstance(value, float) and not 1 <= value < math.inf:
        with pytest.raises(ValueError, match="at least 1 second"):
            split_at_quiet_points(np.zeros(SR, np.float32), value)
    elif isinstance(value, float):
        assert split_at_quiet_points(np.zeros(SR, np.float32), value) == [(0, SR)]
    assert not eng.has_work()


def test_rules_name_the_setting_and_let_automatic_through():
    assert MAX_CHUNK_SECONDS.check_setting(0) == 0
    assert MAX_CHUNK_SECONDS.check_setting(45) == 45.0
    with pytest.raises(ValueError, match=r"transcribe/max_chunk_seconds must be 0 \(automatic\) or between 1 "
                                         r"and 1200 seconds \(got 99999999999\)"):
        MAX_CHUNK_SECONDS.check_setting(99999999999)
    with pytest.raises(ValueError, match="kv_cache_mb"):
        KV_CACHE_MB.check(16.5)
    assert set(SETTING_RULES) >= {"transcribe/max_chunk_seconds", "model/kv_cache_mb", "transcribe/parallel_files"}
    assert check_cli_numbers(type("Args", (), {"max_chunk_seconds": 12.0})()) == {"max_chunk_seconds": 12.0}


def test_a_kv_budget_beyond_the_machine_fails_before_the_weights_load(tiny_model_dir, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("weights loaded before the budget was checked")
    monkeypatch.setattr("engine.serving.core.load_network", refuse)
    with pytest.raises(ValueError, match="KV cache budget .* is more than the CPU's memory"):
        engine.load(tiny_model_dir, device="cpu", kv_cache_bytes=1 << 50)
    with pytest.raises(ValueError, match="kv_cache_bytes must be"):
        engine.load(tiny_model_dir, device="cpu", kv_cache_bytes=-1)


def test_chunks_a_small_cache_cannot_hold_are_cut_to_fit_with_a_note(speech_wav):
    import soundfile as sf
    from real_speech import ASR_DIR   # trained: it ends its answers, so the small cache is not the test's cost

    eng = engine.load(ASR_DIR, device="cpu", dtype="float32")
    dec = eng.config.decoder
    per_token = 2 * dec.layers * dec.kv_heads * dec.head_dim * 4
    small = engine.load(ASR_DIR, device="cpu", dtype="float32",
                        kv_cache_bytes=chunk_cache_tokens(eng, 5.0) * per_token + 1)
    assert 1.0 <= chunk_seconds_for_cache(small, 1200.0) <= 5.0
    assert chunk_seconds_for_cache(eng, 1200.0) == 1200.0      # the default cache holds the longest chunk
    speech, _ = sf.read(str(speech_wav), dtype="float32")
    small.use_vad = False
    transcript = small.transcribe(np.concatenate([speech, speech]), max_chunk_seconds=1200)
    assert any("chunks were cut to at most" in note and "--kv-cache-mb" in note for note in transcript.notes)
    assert len(transcript.segments) >= 2
    tiny = engine.load(ASR_DIR, device="cpu", dtype="float32", kv_cache_bytes=per_token * 16)
    with pytest.raises(RuntimeError, match="too few for even a 1 s chunk"):
        tiny.transcribe(speech)


class _SilentDetector:
    """A VAD stand-in that hears nothing, at no cost: the test counts samples, not seconds."""

    class _Probs:
        def __init__(self):
            self.pending = 0

        def push(self, arr):
            self.pending += len(arr)
            n, self.pending = divmod(self.pending, 512)
            return np.zeros(n, np.float32)

        def flush(self):
            return np.zeros(0, np.float32)

    def _stream(self, group=None):
        return self._Probs()


def test_a_ten_minute_feed_is_taken_in_bounded_slices_beside_a_file_queue(eng, speech_wav, monkeypatch):
    import soundfile as sf

    speech, _ = sf.read(str(speech_wav), dtype="float32")
    stream = eng.open_stream(detector=_SilentDetector())
    taken = []
    real_feed = stream._tracker.feed
    monkeypatch.setattr(stream._tracker, "feed", lambda block: taken.append(len(block)) or real_feed(block))
    stream.feed(np.zeros(600 * SR, np.float32))      # ten minutes in one call
    job = eng.submit_file(speech, language="English")
    steps, per_step = 0, []
    while not job.finished:
        before = sum(taken)
        eng.step()
        per_step.append(sum(taken) - before)
        steps += 1
    assert job.state == "done" and job.transcript.text
    limit = round(stream.MAX_INGEST_S * SR)
    assert max(per_step) <= limit                    # no step takes in more than its slice
    assert stream.duration < 600                     # the file finished while the feed was still queued
    stream.close()
    while not stream.finished:
        eng.step()
    assert stream.duration == 600 and stream.state == "done"


def test_feed_none_says_what_to_pass(eng):
    stream = eng.open_stream()
    with pytest.raises(ValueError, match=r"feed\(\) needs audio samples .* got None; to end the stream call close"):
        stream.feed(None)
    stream.cancel()
    eng.step()


def test_cue_flags_are_checked_by_the_settings_rules_when_the_parser_has_them():
    args = type("Args", (), {"max_chunk_seconds": None, "max_line_chars": 5, "cue_gap_seconds": 0.1})()
    with pytest.raises(ValueError, match=r"--max-line-chars must be between 10 and 200 \(got 5\)"):
        check_cli_numbers(args)
    args.max_line_chars = 42
    assert check_cli_numbers(args) == {"max_chunk_seconds": None, "max_line_chars": 42, "cue_gap_seconds": 0.1}


@pytest.mark.parametrize("flag, value", [("--port", "0"), ("--max-upload-mb", "0"), ("--timeout", "nan"),
                                         ("--max-queue", "-1"), ("--max-live-sessions", "100000"),
                                         ("--decode-workers", "0")])
def test_serve_numbers_are_checked_by_their_rule_before_the_model_loads(flag, value, capsys, tmp_path):
    """The server's limits follow the same rules: the flag named, exit 2, no model loaded
    (the model folder here does not even exist)."""
    pytest.importorskip("fastapi")
    from cli.main import main as cli_main

    code = cli_main(["serve", "--model", str(tmp_path / "no-such-model"), flag, value])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: {flag} must be") and "no-such-model" not in err


def test_server_settings_use_the_same_rules():
    pytest.importorskip("fastapi")
    from server.settings import ServerSettings

    with pytest.raises(ValueError, match="max_queued_files must be between 1 and"):
        ServerSettings(max_queued_files=0).check()
    with pytest.raises(ValueError, match="request_timeout_s must be between"):
        ServerSettings(request_timeout_s=float("inf")).check()
    assert ServerSettings(max_queued_files=3, request_timeout_s=0.5).check().max_queued_files == 3
