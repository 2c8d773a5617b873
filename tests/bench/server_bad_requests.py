"""A session of bad requests against ``qwen3-asr serve``: each one's status and message, and the server still
answering after each.

    python tests/bench/server_bad_requests.py [--model DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import socket
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import ROOT, SR, sentence_audio, speech, start_server, stop  # noqa: E402

KEY = "bench-key-0123"


def post(port, body: bytes, headers: dict, timeout=60) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v1/audio/transcriptions", body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.read().decode("utf-8", "replace")


def multipart(fields: dict, file: tuple[str, bytes] | None) -> tuple[bytes, dict]:
    b = "XyZbOuNdArY"
    parts = [f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()]
    if file:
        parts.append(f'--{b}\r\nContent-Disposition: form-data; name="file"; filename="{file[0]}"\r\n\r\n'.encode()
                     + file[1] + b"\r\n")
    parts.append(f"--{b}--\r\n".encode())
    return b"".join(parts), {"Content-Type": f"multipart/form-data; boundary={b}", "Authorization": f"Bearer {KEY}"}


def message(body: str) -> str:
    try:
        return json.loads(body)["error"]["message"]
    except Exception:
        return body[:200]


def healthy(port) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
        h = json.loads(r.read())
    return f"health {h['status']}, queued {h['queued_files']}, live {h['live_sessions']}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=str(ROOT / "tests/models/qwen3-asr-tiny"))
    parser.add_argument("--port", type=int, default=8871)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-bad-"))
    audio, _ = speech(sentence_audio(work), 20, __import__("random").Random(1))
    wav = work / "talk.wav"
    sf.write(wav, audio, SR, subtype="PCM_16")
    good = wav.read_bytes()
    port = args.port
    proc = start_server(args.model, port, ["--api-key", KEY, "--max-upload-mb", "25"])
    rows = []

    def row(name, status, text):
        rows.append((name, status, message(text) if isinstance(text, str) else text, healthy(port)))

    row("no file", *post(port, *multipart({"model": "qwen3-asr"}, None)))
    row("empty file", *post(port, *multipart({"model": "qwen3-asr"}, ("empty.wav", b""))))
    row("not audio", *post(port, *multipart({"model": "qwen3-asr"}, ("notes.mp3", b"hello " * 1000))))
    row("unknown format", *post(port, *multipart({"response_format": "docx"}, ("talk.wav", good))))
    row("unknown language", *post(port, *multipart({"language": "klingon"}, ("talk.wav", good))))
    row("words without verbose_json", *post(port, *multipart({"timestamp_granularities[]": "word"}, ("talk.wav", good))))
    body, headers = multipart({}, ("talk.wav", good))
    row("wrong key", *post(port, body, {**headers, "Authorization": "Bearer wrong"}))
    row("no key", *post(port, body, {"Content-Type": headers["Content-Type"]}))
    # 1 GB upload, declared: refused before the body is read
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", "/v1/audio/transcriptions")
    for k, v in {**headers, "Content-Length": str(2**30)}.items():
        conn.putheader(k, v)
    conn.endheaders()
    r = conn.getresponse()
    row("1 GB upload (Content-Length)", r.status, r.read().decode())
    conn.close()
    # 1 GB upload, chunked (no length): cut off once it passes the limit
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", "/v1/audio/transcriptions")
    for k, v in {**headers, "Transfer-Encoding": "chunked"}.items():
        conn.putheader(k, v)
    conn.endheaders()
    chunk, sent, started = b"\0" * (1 << 20), 0, time.monotonic()
    try:
        head = b'--XyZbOuNdArY\r\nContent-Disposition: form-data; name="file"; filename="big.wav"\r\n\r\n'
        conn.send(b"%x\r\n%s\r\n" % (len(head), head))
        while sent < 2**30:
            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
    except OSError:
        pass
    try:
        r = conn.getresponse()
        row(f"1 GB upload (chunked; {sent >> 20} MiB sent before the server stopped it)", r.status, r.read().decode())
    except OSError as e:
        row(f"1 GB upload (chunked; {sent >> 20} MiB sent)", "connection closed", str(e))
    conn.close()
    # a client that vanishes mid-upload
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
              + b"\r\nContent-Type: " + headers["Content-Type"].encode() + b"\r\nContent-Length: 500000\r\n\r\n"
              + body[:100000])
    s.close()
    time.sleep(0.5)
    row("client vanishing mid-upload", "-", "(nothing to answer)")
    # a stream=true client that vanishes after the first event
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    b2, h2 = multipart({"stream": "true"}, ("talk.wav", good * 1))
    conn.request("POST", "/v1/audio/transcriptions", body=b2, headers=h2)
    r = conn.getresponse()
    first = r.readline().decode().strip()
    conn.sock.close()
    time.sleep(1.0)
    row("stream=true client vanishing after its first event", r.status, f"got {first[:80]!r}, then left")
    asyncio.run(bad_websocket(port, audio, row))
    time.sleep(1.0)
    status, text = post(port, *multipart({"model": "qwen3-asr"}, ("talk.wav", good)))
    row("a good request after all that", status, json.loads(text).get("text", text)[:60])
    with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/metrics",
                                                       headers={"Authorization": f"Bearer {KEY}"})) as r:
        metrics = [line for line in r.read().decode().splitlines() if line.startswith("qwen3_asr_")]
    err = stop(proc)
    for name, status, text, health in rows:
        print(f"{name:<58} {status!s:<6} {text}\n{'':<58} -> {health}")
    print("\n".join(metrics))
    print("server's last lines:", *[line for line in err.splitlines()[-3:]], sep="\n  ")


async def bad_websocket(port, audio, row):
    import websockets

    url = f"ws://127.0.0.1:{port}/v1/realtime"
    try:
        async with websockets.connect(url) as ws:
            ev = json.loads(await ws.recv())
            row("live session, no key", "close " + str((await ws.wait_closed()) or ws.close_code), ev["error"]["message"])
    except Exception as e:
        row("live session, no key", "refused", str(e))
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        await ws.recv()
        for name, frame in [("malformed WS event: not JSON", "{{nope"), ("malformed WS event: no type", "{}"),
                            ("malformed WS event: unknown type", json.dumps({"type": "response.create"})),
                            ("malformed WS event: bad base64", json.dumps({"type": "input_audio_buffer.append",
                                                                           "audio": "!!"})),
                            ("malformed WS event: odd PCM bytes", json.dumps({"type": "input_audio_buffer.append",
                                                                              "audio": base64.b64encode(b"abc").decode()})),
                            ("malformed WS event: bad session.update", json.dumps(
                                {"type": "session.update", "session": {"input_audio_rate": 8000}}))]:
            await ws.send(frame)
            ev = json.loads(await ws.recv())
            row(name, "event " + ev["type"], ev.get("error", {}).get("message", ev))
        await ws.send(b"\x00\x01")
        ev = json.loads(await ws.recv())
        row("malformed WS event: binary frame", "event " + ev["type"], ev["error"]["message"])
    # a live client that vanishes mid-utterance
    pcm = (audio[: 4 * SR] * 32767).astype("<i2").tobytes()
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}) as ws:
        await ws.send(json.dumps({"type": "session.update", "session": {"input_audio_rate": 16000}}))
        await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}))
        while json.loads(await ws.recv())["type"] != "input_audio_buffer.speech_started":
            pass
    await asyncio.sleep(1.0)
    row("live client vanishing mid-utterance", "-", "(gone after speech_started)")


if __name__ == "__main__":
    main()
