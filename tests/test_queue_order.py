"""The engine's queue of files follows the order its user gives (Engine.reorder_files), its admission
limit can change on a loaded engine, and the aligner pushes every finished request to its owner."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.pipelines.admission import FileAdmission
from engine.pipelines.jobs import JobLayer


class _Job:
    def __init__(self, name):
        self.name = name


def test_reorder_moves_the_given_jobs_among_their_own_places():
    layer = JobLayer(port=None, admission=FileAdmission())
    a, b, c, d, e = (layer.add(_Job(n)) for n in "abcde")
    layer.reorder([d, b, _Job("gone"), d])           # unknown and repeated jobs are skipped
    assert [j.name for j in layer.jobs] == ["a", "d", "c", "b", "e"]
    layer.reorder([e, a])
    assert [j.name for j in layer.jobs] == ["e", "d", "c", "b", "a"]


def test_the_admission_limit_changes_on_a_running_engine_and_is_checked():
    admission = FileAdmission(max_decoding=4)
    admission.set_max_decoding(1)
    assert admission.max_decoding == 1
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="max_decoding"):
            admission.set_max_decoding(bad)
    assert admission.max_decoding == 1


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, max_decoding_files=1, file_read_ahead=0)


def test_waiting_files_start_in_the_order_given(eng):
    rng = np.random.default_rng(0)
    clips = [(0.1 * rng.standard_normal(16000 * 2)).astype(np.float32) for _ in range(3)]
    jobs = [eng.submit_file(clip, language="English") for clip in clips]
    eng.reorder_files([jobs[2], jobs[0], jobs[1]])
    started = []
    for _ in range(2000):
        if all(job.finished for job in jobs):
            break
        eng.step()
        started += [job for job in jobs if not job.waiting and job not in started]
        assert sum(job.decoding for job in jobs) <= 1
    assert [job.state for job in jobs] == ["done"] * 3
    assert started == [jobs[2], jobs[0], jobs[1]]


def test_the_aligner_pushes_done_and_cancelled_requests_to_their_owner(tiny_aligner_dir):
    aligner = engine.load_aligner(tiny_aligner_dir)
    audio = (0.1 * np.random.default_rng(1).standard_normal(16000 * 2)).astype(np.float32)
    pushed = []
    done = aligner.submit(audio, ["hello", "world"], pushed.append)
    dropped = aligner.submit(audio, ["again"], pushed.append)
    dropped.cancel()
    while aligner.has_work():
        aligner.step()
    assert {out.request.id: out.finished for out in pushed} == {done.id: True, dropped.id: True}
    assert len(pushed) == 2, "one push per request, with its end"
    assert dropped.finish_reason == "cancelled" and len(done.result) == 4
    assert len(aligner.align(audio, "hello world")) == 2     # align() waits for its own push
