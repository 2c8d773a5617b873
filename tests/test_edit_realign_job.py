"""Re-aligning an edited line is a job beside the engine's other work, not a blocking call.

While one edited segment is aligned, a file being transcribed keeps getting decoded in the same
steps (counted in outputs, never timed), and the answer is what the blocking path gives: the shipped
tiny ASR model and tiny aligner, on espeak-ng speech whose sentence times are known.
"""
from __future__ import annotations

import pytest

import engine
from app.backend.segment_align import SegmentAlignRequest, align_segment, start_alignment
from engine.audio.stretch import read_stretch, speech_islands
from engine.text.stretch_alignment import align_stretch
from known_times import known_times_recording
from real_speech import ALIGNER_DIR, ASR_DIR

EDITED = 1


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """About 20 s of sentences with pauses: two chunks of the tiny model, many decode steps."""
    return known_times_recording(tmp_path_factory.mktemp("realign"), 20.0, seed=5)


@pytest.fixture(scope="module")
def eng():
    return engine.load(ASR_DIR, device="cpu", dtype="float32", aligner=ALIGNER_DIR)


def _stretch(known):
    start, end = known.times[EDITED]
    return max(0.0, start - 0.2), end + 0.2, known.sentences[EDITED]


def _until_decoding(eng, job) -> None:
    """Step until the file's chunk requests give outputs (the file is being transcribed)."""
    for _ in range(2000):
        if eng.step():
            return
        assert not job.finished
    raise AssertionError("the file never started decoding")


def _drain(eng) -> None:
    for _ in range(5000):
        if not eng.has_work():
            return
        eng.step()
    raise AssertionError("the engine did not go idle")


def test_the_alignment_runs_beside_a_file_and_equals_the_blocking_one(eng, known):
    file_job = eng.submit_file(str(known.path))
    try:
        _until_decoding(eng, file_job)
        start, end, text = _stretch(known)
        job = eng.submit_stretch_alignment(str(known.path), start, end, text, language="English")
        assert not job.finished and not file_job.finished
        steps = outputs = 0
        while not job.finished:
            outputs += len(eng.step())
            steps += 1
            assert steps < 2000
        # the file's requests were decoded in the steps the alignment was pending
        assert steps >= 1 and outputs >= 1, (steps, outputs)
        assert job.result.words and not job.result.problem, job.result
        samples = read_stretch(known.path, start, end)
        blocking = align_stretch(eng.aligner, samples, start, text, "English", speech_islands(samples, start))
        assert job.result == blocking
        assert " ".join(w.text for w in job.result.words) == text
    finally:
        file_job.cancel()
        _drain(eng)


def test_an_unreadable_file_is_reported_as_the_blocking_path_reports_it(eng, tmp_path):
    bad = tmp_path / "garbage.wav"
    bad.write_bytes(b"not audio at all" * 100)
    request = SegmentAlignRequest(1, 0, str(bad), 0.0, 2.0, "Tom sees the dog.", "English")
    pending = start_alignment(eng, request)
    for _ in range(500):
        if pending.finished:
            break
        eng.step()
    result = pending.result()
    assert result == align_segment(eng, request)
    assert result.state == "estimated" and "could not be read" in result.note


def test_submitting_needs_an_aligner_and_a_sane_stretch(eng, known):
    with pytest.raises(ValueError, match="end"):
        eng.submit_stretch_alignment(str(known.path), 3.0, 1.0, "Tom sees the dog.")
    aligner, eng.aligner = eng.aligner, None
    try:
        with pytest.raises(ValueError, match="aligner"):
            eng.submit_stretch_alignment(str(known.path), 0.0, 1.0, "Tom sees the dog.")
    finally:
        eng.aligner = aligner


def test_the_worker_keeps_stepping_files_while_an_edit_is_aligned(qtbot, eng, known, monkeypatch):
    """The engine thread's worker (driven here on the test's thread): a file decodes between the
    request and the ``segment_aligned`` answer, and the answer is the blocking path's."""
    from app.backend.worker import EngineWorker

    worker = EngineWorker(loader=lambda *a, **k: eng)
    worker.load_model("tiny")
    answers, outputs_before_answer = [], []
    steps = {"outputs": 0}
    real_step = eng.step

    def counting_step():
        out = real_step()
        steps["outputs"] += len(out)
        return out

    monkeypatch.setattr(eng, "step", counting_step)
    worker.segment_aligned.connect(lambda r: (answers.append(r), outputs_before_answer.append(steps["outputs"])))
    worker.add_file(7, str(known.path))
    qtbot.waitUntil(lambda: steps["outputs"] > 0, timeout=120000)     # the file is decoding
    start, end, text = _stretch(known)
    request = SegmentAlignRequest(3, EDITED, str(known.path), start, end, text, "English")
    at_request = steps["outputs"]
    worker.align_segment(request)
    assert answers == []                                               # not answered inside the call
    qtbot.waitUntil(lambda: bool(answers), timeout=120000)
    assert outputs_before_answer[0] > at_request, (at_request, outputs_before_answer)
    worker.cancel_job(7)
    qtbot.waitUntil(lambda: not eng.has_work(), timeout=120000)
    monkeypatch.undo()
    [result] = answers
    assert result.state == "aligned", result.note
    assert result == align_segment(eng, request)
