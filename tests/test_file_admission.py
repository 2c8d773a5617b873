"""Queued files start decoding only as the engine can take their chunks; a process-wide failure
(too many open files, no memory) sends a file back to the queue instead of failing it."""
from __future__ import annotations

import errno

import numpy as np
import pytest
import soundfile as sf

import engine
from engine.errors import AudioLoadError
from engine.pipelines.admission import FileAdmission


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32", use_vad=False, max_prefill_rows=2)


@pytest.fixture(scope="module")
def wavs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("wavs")
    rng = np.random.default_rng(0)
    paths = []
    for i in range(12):
        path = folder / f"f{i:02d}.wav"
        sf.write(path, (0.1 * rng.standard_normal(16000 + 800 * i)).astype(np.float32), 16000)
        paths.append(path)
    return paths


def _run(eng, jobs, watch=None):
    while eng.has_work():
        eng.step()
        if watch:
            watch()
    return jobs


def test_only_a_few_files_are_open_at_once_and_all_finish(eng, wavs, monkeypatch):
    import engine.audio.decode as decode

    open_now, most = set(), [0]
    real = decode.stream_audio

    def counted(path, *args, **kwargs):   # an open decoder from the first block to the close
        open_now.add(str(path))
        most[0] = max(most[0], len(open_now))
        try:
            yield from real(path, *args, **kwargs)
        finally:
            open_now.discard(str(path))

    monkeypatch.setattr(decode, "stream_audio", counted)
    jobs = [eng.submit_file(p) for p in wavs]
    eng.step()
    assert sum(job.state != "queued" for job in jobs) <= eng.admission.max_decoding
    _run(eng, jobs)
    assert [job.state for job in jobs] == ["done"] * len(jobs)
    assert 0 < most[0] <= eng.admission.max_decoding < len(wavs)
    assert not open_now     # every file closed once its chunks were cut


def test_higher_priority_files_start_first(eng, wavs):
    jobs = [eng.submit_file(p) for p in wavs[:6]] + [eng.submit_file(wavs[6], priority=5)]
    eng.step()
    assert jobs[-1].state != "queued"
    _run(eng, jobs)
    assert all(job.state == "done" for job in jobs)


def test_too_many_open_files_retries_instead_of_failing(eng, wavs, monkeypatch):
    import engine.audio.decode as decode

    real, refusals = decode.audio_info, []

    def flaky(path):   # the way PyAV reports EMFILE: an AudioLoadError caused by an OSError
        if str(path) == str(wavs[3]) and len(refusals) < 3:
            refusals.append(path)
            try:
                raise OSError(errno.EMFILE, "Too many open files")
            except OSError as exc:
                raise AudioLoadError(path, "is not an audio file (Too many open files)") from exc
        return real(path)

    monkeypatch.setattr(decode, "audio_info", flaky)
    jobs = _run(eng, [eng.submit_file(p) for p in wavs])
    assert len(refusals) == 3
    assert [job.state for job in jobs] == ["done"] * len(jobs), [job.error for job in jobs]


def test_out_of_files_alone_says_it_is_the_process_not_the_file(eng, wavs, monkeypatch):
    import engine.audio.decode as decode

    def refuse(path):
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(decode, "audio_info", refuse)
    job = _run(eng, [eng.submit_file(wavs[0])])[0]
    assert job.state == "failed"
    assert "ran out of open files" in job.error and "the file itself may be fine" in job.error


def test_admission_arguments_are_checked():
    with pytest.raises(ValueError, match="max_decoding"):
        FileAdmission(max_decoding=0)
    with pytest.raises(ValueError, match="max_waiting_tokens"):
        FileAdmission(max_waiting_tokens=-1)


def test_each_finished_file_gives_its_freed_memory_back(eng, wavs, monkeypatch):
    """glibc keeps freed blocks: without a trim the resident size grew ~4 MB per 35 s file (engine/serving/heap.py)."""
    import sys

    import engine.pipelines.file_job as file_job
    from engine.serving.heap import release_freed_memory

    if sys.platform.startswith("linux"):
        assert release_freed_memory() is True          # glibc's malloc_trim found and run
    calls = []
    monkeypatch.setattr(file_job, "release_freed_memory", lambda: calls.append(1) or True)
    jobs = [eng.submit_file(str(w)) for w in wavs[:3]]
    while not all(j.finished for j in jobs):
        eng.step()
    assert [j.state for j in jobs] == ["done"] * 3
    assert len(calls) == 3 and all(j._reader is None for j in jobs)
