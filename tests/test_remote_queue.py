"""The app's server engine keeps a small window of uploads, sends files in the queue's order, and
waits out a full server queue (429) instead of failing the file. No server: the upload is faked."""
from __future__ import annotations

import threading
import time

import pytest

from app.backend import remote_engine
from engine.text.types import Transcript
from server.client import FileRequest, ServerError


@pytest.fixture
def uploads(monkeypatch):
    """The names of the files "uploaded", in order; a file named busy*.wav is refused once with 429,
    one named hold*.wav waits for ``uploads.release``."""
    class Sent(list):
        release = threading.Event()

    sent, refused = Sent(), set()
    release = sent.release

    def run(request):
        name = request.path.name
        sent.append(name)
        if name.startswith("busy") and name not in refused:
            refused.add(name)
            raise ServerError(429, "the server's queue is full (64 files); retry in 1 s")
        if name.startswith("hold"):
            release.wait(10)
        return Transcript(text=f"text of {name}", language="English", duration=1.0, segments=[])

    monkeypatch.setattr(FileRequest, "run", run)
    return sent


def _remote(monkeypatch, window: int) -> remote_engine.RemoteEngine:
    monkeypatch.setattr(remote_engine, "UPLOADS_AT_ONCE", window)
    return remote_engine.RemoteEngine("http://127.0.0.1:9", None, {"model": "qwen3-asr"})


def _wait(jobs, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not all(job.finished for job in jobs):
        assert time.monotonic() < deadline, [job.state for job in jobs]
        time.sleep(0.01)


def test_files_are_sent_in_the_queue_order_one_window_at_a_time(monkeypatch, uploads):
    remote = _remote(monkeypatch, 1)
    first = remote.submit_file("/audio/hold.wav")
    rest = [remote.submit_file(f"/audio/{name}.wav") for name in "abc"]
    remote.reorder_files([rest[2], rest[0]])       # c before a; b keeps its place
    deadline = time.monotonic() + 10
    while not uploads and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)                               # time enough for a second upload, were there room
    assert uploads == ["hold.wav"], "one upload in flight: the rest wait here, not at the server"
    assert [job.state for job in rest] == ["queued"] * 3
    rest[1].cancel()                               # a waiting file cancelled is never sent
    uploads.release.set()
    _wait([first, *rest])
    assert uploads == ["hold.wav", "c.wav", "a.wav"]
    assert [job.state for job in rest] == ["done", "cancelled", "done"]


def test_a_full_server_queue_is_waited_out_not_failed(monkeypatch, uploads):
    remote = _remote(monkeypatch, 4)
    assert remote_engine.busy_wait_seconds("queue full; retry in 7 s") == 7.0
    assert remote_engine.busy_wait_seconds("no estimate") == remote_engine.BUSY_RETRY_S[0]
    assert remote_engine.busy_wait_seconds("retry in 99999 s") == remote_engine.BUSY_RETRY_S[1]
    job = remote.submit_file("/audio/busy.wav")
    _wait([job])
    assert job.state == "done" and job.error is None
    assert uploads == ["busy.wav", "busy.wav"]
    assert job.transcript.text == "text of busy.wav"
