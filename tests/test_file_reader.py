"""A file's decoding, VAD and log-mel run on a reader thread, a few blocks ahead of the engine:
the same chunks and tokens as reading on the engine thread, steps that go on for others while
a file is read, a bounded read-ahead, and a cancel that stops the reader and closes the file."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import soundfile as sf
import torch
from conftest import espeak_wav, read_trimmed, with_pauses

import engine
from engine.pipelines.file_job import FileJob

SR = 16000
SENTENCES = ["The quick brown fox jumps over the lazy dog.", "One two three four five six seven eight nine ten.",
             "Hello world, this is a test of speech recognition.", "Speech to text on your own computer."]


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32", kv_cache_bytes=64 << 20)


@pytest.fixture(scope="module")
def talk(tmp_path_factory):
    """About 20 s of espeak sentences with pauses: several VAD chunks over several 2 s blocks."""
    folder = tmp_path_factory.mktemp("reader")
    spoken = [read_trimmed(espeak_wav(folder / f"s{i}.wav", text)) for i, text in enumerate(SENTENCES)]
    audio, _ = with_pauses(spoken)
    path = folder / "talk.wav"
    sf.write(path, audio, SR, subtype="PCM_16")
    return path


def _run(eng, job, limit=20000):
    for _ in range(limit):
        if job.finished:
            return job
        eng.step()
    raise AssertionError("the job never finished")


def _spied(eng, monkeypatch):
    """Record every request the engine makes: (samples, features, request)."""
    made, real = [], eng.make_request

    def spy(audio, **kwargs):
        req = real(audio, **kwargs)
        made.append((np.asarray(audio).copy(), req.features.clone(), req))
        return req

    monkeypatch.setattr(eng, "make_request", spy)
    return made


def test_reader_thread_gives_the_same_chunks_tokens_and_transcript_as_reading_inline(eng, talk, monkeypatch):
    results, made = {}, _spied(eng, monkeypatch)
    for read_ahead in (0, 2):
        job = eng.job_layer.add(FileJob(eng, talk, block_seconds=2.0, max_chunk_seconds=4.0, read_ahead=read_ahead,
                                        wake=eng.job_layer.wake))
        assert _run(eng, job).state == "done", job.error
        results[read_ahead] = (job, list(made))
        made.clear()
    (inline, inline_made), (threaded, threaded_made) = results[0], results[2]
    assert len(inline_made) >= 4                         # several chunks, cut across several blocks
    assert [len(a) for a, _, _ in threaded_made] == [len(a) for a, _, _ in inline_made]
    for (a, fa, ra), (b, fb, rb) in zip(inline_made, threaded_made):
        assert np.array_equal(a, b) and torch.equal(fa, fb)     # same samples, same log-mel
        assert ra.token_ids == rb.token_ids
    assert [(s.start, s.end, s.text) for s in threaded.transcript.segments] == \
        [(s.start, s.end, s.text) for s in inline.transcript.segments]
    assert threaded.transcript.text == inline.transcript.text and threaded.duration == inline.duration


def test_steps_run_for_another_request_while_a_file_is_being_read(eng, talk, monkeypatch):
    import engine.audio.decode as decode

    real, entered, gate = decode.stream_audio, threading.Event(), threading.Event()

    def slow(path, *args, **kwargs):     # a decoder stuck in its first read (a slow disk, a network share)
        entered.set()
        if not gate.wait(timeout=60):
            raise OSError("the test never opened the gate")
        yield from real(path, *args, **kwargs)

    monkeypatch.setattr(decode, "stream_audio", slow)
    job = eng.submit_file(talk)
    clip = sf.read(str(talk), dtype="float32")[0][:2 * SR]
    req = eng.submit(clip, max_new_tokens=8)
    for _ in range(500):
        if req.finished:
            break
        eng.step()
    assert req.finished and req.finish_reason in ("stop", "length") and req.token_ids
    assert entered.wait(timeout=60)                      # the reader was inside the file all along
    assert job.decoding and job.segments_done == 0 and job.progress == 0.0
    gate.set()
    assert _run(eng, job).state == "done", job.error
    assert job.transcript.segments


def test_read_ahead_is_bounded_and_cancel_stops_the_reader_and_closes_the_file(eng, talk, monkeypatch):
    import engine.audio.decode as decode

    real, state = decode.stream_audio, {"yielded": 0, "closed": False}
    three = threading.Event()

    def counted(path, *args, **kwargs):
        try:
            for block in real(path, *args, **kwargs):
                state["yielded"] += 1
                if state["yielded"] == 3:
                    three.set()
                yield block
        finally:
            state["closed"] = True

    monkeypatch.setattr(decode, "stream_audio", counted)
    job = eng.job_layer.add(FileJob(eng, talk, block_seconds=1.0, read_ahead=2))
    job.advance()                 # starts the reader; the engine then takes nothing
    assert three.wait(timeout=60)
    reader = job._reader
    assert not reader.join(timeout=0.5)                  # blocked on its full queue, not reading on
    assert state["yielded"] == 3 and not state["closed"]   # two blocks queued, one waiting to be queued
    job.cancel()
    assert reader.join(timeout=60) and state["closed"]
    assert job.state == "cancelled"
    eng.step()
    assert job not in eng.jobs


def test_read_ahead_setting_is_checked_and_reaches_file_jobs(eng, tiny_model_dir):
    with pytest.raises(ValueError, match="file_read_ahead"):
        engine.EngineConfig(file_read_ahead=-1)
    with pytest.raises(ValueError, match="file_read_ahead"):
        engine.EngineConfig(file_read_ahead=True)
    job = eng.submit_file(np.zeros(SR, np.float32))
    assert job.read_ahead == eng.settings.file_read_ahead == 2
    job.cancel()
    eng.step()


def test_features_made_elsewhere_must_fit_the_clip(eng):
    from engine.network.features import log_mel

    clip = np.zeros(2 * SR, np.float32)
    req = eng.make_request(clip, features=log_mel(clip))
    assert torch.equal(req.features, log_mel(clip))
    with pytest.raises(ValueError, match="do not fit"):
        eng.make_request(clip, features=log_mel(clip[:SR]))
