"""The server end to end: a real uvicorn on loopback, called by the official ``openai`` package, a plain
``websockets`` client and raw HTTP, over the trained tiny models (float32, so tokens are exact)."""
from __future__ import annotations

import asyncio
import base64
import http.client
import json
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import openai
import pytest
import soundfile as sf
import websockets
from conftest import espeak_wav
from server_fixtures import MODELS, RunningServer

import engine
from cli.main import main as cli_main

KEY = "test-key-0123"
SR = 16000
SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Why did you leave the office so early today?"]


@pytest.fixture(scope="module")
def audio(tmp_path_factory):
    """One file of two sentences with a pause, and the PCM of it for live sessions."""
    folder = tmp_path_factory.mktemp("server-audio")
    parts = [np.zeros(SR // 2, np.float32)]
    for i, text in enumerate(SENTENCES):
        samples, _ = sf.read(espeak_wav(folder / f"s{i}.wav", text), dtype="float32")
        parts += [samples, np.zeros(int(1.5 * SR), np.float32)]
    samples = np.concatenate(parts)
    path = folder / "talk.wav"
    sf.write(path, samples, SR, subtype="PCM_16")
    empty = folder / "empty.wav"
    empty.write_bytes(b"")
    return {"path": path, "samples": sf.read(path, dtype="float32")[0], "empty": empty, "folder": folder}


@pytest.fixture(scope="module")
def server():
    eng = engine.load(MODELS / "qwen3-asr-tiny", dtype="float32", aligner=MODELS / "forced-aligner-tiny")
    running = RunningServer(eng, api_key=KEY, max_upload_bytes=2 * 2**20, request_timeout_s=120)
    yield running
    running.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0)


@pytest.fixture(scope="module")
def cli_json(audio, tmp_path_factory):
    """What the command line writes for the same file and settings (float32, the same aligner)."""
    out = tmp_path_factory.mktemp("cli-local")
    assert cli_main(["transcribe", str(audio["path"]), "--model", str(MODELS / "qwen3-asr-tiny"), "--aligner",
                     str(MODELS / "forced-aligner-tiny"), "--dtype", "float32", "--format", "json,srt",
                     "-o", str(out), "--quiet"]) == 0
    return out


def test_openai_client_formats_equal_the_cli(client, audio, cli_json):
    local = json.loads((cli_json / "talk.json").read_text())
    with open(audio["path"], "rb") as f:
        plain = client.audio.transcriptions.create(model="qwen3-asr", file=f)
    assert plain.text == local["text"] and plain.text
    with open(audio["path"], "rb") as f:
        verbose = client.audio.transcriptions.create(model="qwen3-asr", file=f, response_format="verbose_json",
                                                     timestamp_granularities=["word"])
    assert [s.text for s in verbose.segments] == [s["text"] for s in local["segments"]]
    assert [(s.start, s.end) for s in verbose.segments] == [(s["start"], s["end"]) for s in local["segments"]]
    words = [(w["text"], w["start"], w["end"]) for s in local["segments"] for w in s["words"]]
    assert [(w.word, w.start, w.end) for w in verbose.words] == words and words
    with open(audio["path"], "rb") as f:
        srt = client.audio.transcriptions.create(model="qwen3-asr", file=f, response_format="srt")
    assert srt == (cli_json / "talk.srt").read_text()
    for fmt, start in (("text", plain.text), ("vtt", "WEBVTT")):
        with open(audio["path"], "rb") as f:
            assert client.audio.transcriptions.create(model="qwen3-asr", file=f, response_format=fmt).startswith(start)


def test_stream_true_gives_deltas_then_done(client, audio):
    with open(audio["path"], "rb") as f:
        events = list(client.audio.transcriptions.create(model="qwen3-asr", file=f, stream=True))
    kinds = [e.type for e in events]
    assert kinds[-1] == "transcript.text.done" and set(kinds[:-1]) == {"transcript.text.delta"}
    assert "".join(e.delta for e in events[:-1]) == events[-1].text
    with open(audio["path"], "rb") as f:
        assert client.audio.transcriptions.create(model="qwen3-asr", file=f).text == events[-1].text


def test_models_health_and_metrics(client, server):
    assert [m.id for m in client.models.list()] == ["qwen3-asr"]
    with urllib.request.urlopen(server.url + "/health") as r:
        health = json.loads(r.read())
    assert health["status"] == "ok"
    assert health["max_chunk_seconds"] == 12     # the automatic chunk length its model declares
    request = urllib.request.Request(server.url + "/metrics", headers={"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request) as r:
        text = r.read().decode()
    for name in ("qwen3_asr_queued_files", "qwen3_asr_live_sessions", "qwen3_asr_audio_seconds_total",
                 "qwen3_asr_step_seconds_total", "qwen3_asr_tokens_per_second"):
        assert f"\n{name} " in text


def _post(url, body: bytes, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url + "/v1/audio/transcriptions", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_bad_requests_get_clear_json_errors(server, client, audio, tmp_path):
    auth = {"Authorization": f"Bearer {KEY}"}
    status, body = _post(server.url, b"--x--\r\n", {**auth, "Content-Type": "multipart/form-data; boundary=x"})
    assert status == 400 and body["error"]["code"] == "missing_file"
    with pytest.raises(openai.BadRequestError, match="empty"):
        client.audio.transcriptions.create(model="qwen3-asr", file=open(audio["empty"], "rb"))
    noise = tmp_path / "notes.wav"
    noise.write_bytes(b"this is not audio at all" * 10)
    with pytest.raises(openai.BadRequestError, match="not audio"):
        client.audio.transcriptions.create(model="qwen3-asr", file=open(noise, "rb"))
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.audio.transcriptions.create(model="qwen3-asr", file=open(audio["path"], "rb"), response_format="xml")
    with pytest.raises(openai.BadRequestError, match="language"):
        client.audio.transcriptions.create(model="qwen3-asr", file=open(audio["path"], "rb"), language="klingon")
    wrong = openai.OpenAI(base_url=server.url + "/v1", api_key="wrong-key-99", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.audio.transcriptions.create(model="qwen3-asr", file=open(audio["path"], "rb"))
    # a declared 1 GB upload is refused before its body is read
    conn = http.client.HTTPConnection("127.0.0.1", server.settings.port, timeout=10)
    conn.putrequest("POST", "/v1/audio/transcriptions")
    for k, v in {**auth, "Content-Type": "multipart/form-data; boundary=x", "Content-Length": str(2**30)}.items():
        conn.putheader(k, v)
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413 and "limit" in json.loads(response.read())["error"]["message"]
    conn.close()
    with open(audio["path"], "rb") as f:   # still answering
        assert client.audio.transcriptions.create(model="qwen3-asr", file=f).text
    from server.uploads import UPLOAD_PREFIX

    assert list(Path(tempfile.gettempdir()).glob(UPLOAD_PREFIX + "*")) == []   # no upload left behind


def test_a_full_queue_answers_429_and_a_slow_request_504(audio):
    eng = engine.load(MODELS / "qwen3-asr-tiny", dtype="float32")
    running = RunningServer(eng, max_queued_files=1, request_timeout_s=3)
    release = threading.Event()
    answers = []
    try:
        running.runner.call(release.wait)           # hold the engine thread: the first file stays queued
        first = threading.Thread(target=_post_file, args=(running.url, audio["path"], answers))
        first.start()
        deadline = time.monotonic() + 30
        while running.runner.queued_files < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        plain = openai.OpenAI(base_url=running.url + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.RateLimitError) as caught:
            plain.audio.transcriptions.create(model="qwen3-asr", file=open(audio["path"], "rb"))
        assert int(caught.value.response.headers["retry-after"]) >= 1
        first.join(timeout=60)
        assert answers[0].status == 504 and "longer than" in answers[0].message
        release.set()
        deadline = time.monotonic() + 30
        while running.runner.queued_files and time.monotonic() < deadline:   # the timed-out file was cancelled
            time.sleep(0.05)
        assert running.runner.queued_files == 0
    finally:
        release.set()
        summary = running.stop()
    assert summary == {"finished": [], "cancelled": []}


def _post_file(url, path, answers):
    from server.client import ServerError, transcribe_file

    try:
        answers.append(transcribe_file(url, path))
    except ServerError as e:
        answers.append(e)


def _append(pcm: bytes) -> str:
    return json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()})


def test_live_session_speaks_openai_realtime_events(server, audio):
    pcm = (audio["samples"] * 32767).astype("<i2").tobytes()

    async def session():
        headers = {"Authorization": f"Bearer {KEY}"}
        async with websockets.connect(server.url.replace("http", "ws") + "/v1/realtime",
                                      additional_headers=headers) as ws:
            await ws.send(json.dumps({"type": "transcription_session.update", "session": {"input_audio_rate": 16000}}))
            await ws.send("{not json")
            await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": "@@@"}))
            for i in range(0, len(pcm), 6400):
                await ws.send(_append(pcm[i:i + 6400]))
            await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
            events = []
            while sum(e["type"].endswith(".completed") for e in events) < 2:
                events.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
            return events

    events = asyncio.run(session())
    assert events[0]["type"] == "transcription_session.created"
    errors = [e["error"]["code"] for e in events if e["type"] == "error"]
    assert errors == ["invalid_json", "invalid_value"]
    done = [e for e in events if e["type"].endswith(".completed")]
    assert all(e["transcript"] for e in done) and done[0]["end"] <= done[1]["start"]
    started = [e["item_id"] for e in events if e["type"] == "input_audio_buffer.speech_started"]
    assert [e["item_id"] for e in done] == started
    for e in done:   # deltas of an item add up to its transcript
        deltas = "".join(d["delta"] for d in events if d["type"].endswith(".delta") and d["item_id"] == e["item_id"])
        assert deltas == e["transcript"]


def test_a_vanishing_live_client_frees_its_blocks(server, audio):
    allocator = server.engine.cache.allocator
    free_before = allocator.num_free
    pcm = (audio["samples"][: 3 * SR] * 32767).astype("<i2").tobytes()

    async def vanish():
        async with websockets.connect(server.url.replace("http", "ws") + "/v1/realtime",
                                      subprotocols=[f"openai-insecure-api-key.{KEY}"]) as ws:
            await ws.send(json.dumps({"type": "session.update", "session": {"input_audio_rate": 16000}}))
            await ws.send(_append(pcm))
            while True:   # gone while its utterance is being transcribed
                if json.loads(await ws.recv())["type"] == "input_audio_buffer.speech_started":
                    return

    asyncio.run(vanish())
    deadline = time.monotonic() + 20
    while (allocator.num_free != free_before or server.runner.metrics.live_sessions) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert allocator.num_free == free_before and server.runner.metrics.live_sessions == 0


def test_cli_server_flag_writes_what_the_local_cli_writes(server, audio, cli_json, tmp_path):
    assert cli_main(["transcribe", str(audio["path"]), "--server", server.url, "--api-key", KEY,
                     "--format", "json,srt", "-o", str(tmp_path), "--quiet"]) == 0
    remote, local = json.loads((tmp_path / "talk.json").read_text()), json.loads((cli_json / "talk.json").read_text())
    local.pop("model"), remote.pop("model")
    assert remote == local
    assert (tmp_path / "talk.srt").read_text() == (cli_json / "talk.srt").read_text()


def test_binding_off_loopback_needs_a_key():
    from server.settings import ServerSettings

    with pytest.raises(ValueError, match="API key"):
        ServerSettings(host="0.0.0.0").check()
    ServerSettings(host="0.0.0.0", api_key="long-enough-key").check()
    ServerSettings(host="::1").check()


def test_shutdown_finishes_or_cancels_and_says_which(audio):
    from server.runner import EngineRunner, ServerStopping

    runner = EngineRunner(engine.load(MODELS / "qwen3-asr-tiny", dtype="float32")).start()
    first = runner.submit_file(str(audio["path"]))
    first.future.result(timeout=60)
    release = threading.Event()
    runner.call(release.wait)                        # the engine is busy elsewhere when shutdown comes
    late = runner.submit_file(str(audio["path"]))
    threading.Timer(1.0, release.set).start()
    summary = runner.stop(grace_s=0.2)
    assert summary == {"finished": [], "cancelled": [late.id]}
    with pytest.raises(Exception, match="shut down"):
        late.future.result(timeout=5)
    with pytest.raises(ServerStopping):
        runner.submit_file(str(audio["path"]))
