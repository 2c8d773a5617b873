"""A client of our server with the standard library only (``websockets`` for live sessions).

The CLI's ``--server`` and the app's "Server" engine use it: ``transcribe_file``
uploads a file and rebuilds the full ``Transcript`` from our verbose_json (segments,
words, notes); ``LiveConnection`` streams 16 kHz audio to ``/v1/realtime`` and calls
back with each event.
"""
from __future__ import annotations

import base64
import http.client
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Callable

import numpy as np

from engine.text.types import Segment, Transcript, Word


class ServerError(RuntimeError):
    """The server refused or failed a request: ``status`` (0: unreachable) and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"server said {status}: {message}" if status else message)
        self.status, self.message = status, message


def _headers(api_key: str | None) -> dict:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _open(request: urllib.request.Request, timeout: float):
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read().decode("utf-8", "replace"))["error"]["message"]
        except Exception:   # not our JSON error: say what HTTP said
            message = e.reason
        raise ServerError(e.code, str(message)) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ServerError(0, f"cannot reach the server at {request.full_url}: {reason}") from None


def health(url: str, api_key: str | None = None, timeout: float = 10.0) -> dict:
    """The server's ``/health``: status, model, whether it has an aligner."""
    request = urllib.request.Request(url.rstrip("/") + "/health", headers=_headers(api_key))
    with _open(request, timeout) as response:
        return json.loads(response.read())


def _multipart(fields: list[tuple[str, str]], path: Path) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields:
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    filename = path.name.replace('"', "_")
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode())
    parts.append(path.read_bytes())
    parts.append(f"\r\n--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class FileRequest:
    """One file sent to the server; ``run()`` blocks for its Transcript, ``cancel()`` (any thread) drops the
    connection, which makes the server cancel the file and free what it held."""

    def __init__(self, url: str, path, *, api_key: str | None = None, language: str | None = None,
                 context: str = "", word_timestamps: bool = False, timeout: float = 3600.0):
        self.url, self.path, self.timeout = urllib.parse.urlsplit(url.rstrip("/")), Path(path), timeout
        fields = [("model", "qwen3-asr"), ("response_format", "verbose_json"), ("prompt", context)]
        if language:
            fields.append(("language", language))
        if word_timestamps:
            fields.append(("timestamp_granularities[]", "word"))
        self._fields, self._api_key = fields, api_key
        self._conn: http.client.HTTPConnection | None = None
        self.cancelled = False

    def run(self) -> Transcript:
        body, content_type = _multipart(self._fields, self.path)
        kind = http.client.HTTPSConnection if self.url.scheme == "https" else http.client.HTTPConnection
        where = f"{self.url.scheme}://{self.url.netloc}"
        try:
            self._conn = kind(self.url.hostname, self.url.port, timeout=self.timeout)
            if self.cancelled:
                raise ServerError(0, "cancelled")
            self._conn.request("POST", self.url.path + "/v1/audio/transcriptions", body=body,
                               headers={**_headers(self._api_key), "Content-Type": content_type})
            response = self._conn.getresponse()
            data = response.read()
        except OSError as e:
            raise ServerError(0, "cancelled" if self.cancelled else f"cannot reach the server at {where}: {e}") from None
        finally:
            self._conn.close() if self._conn else None
        if response.status != 200:
            try:
                message = json.loads(data)["error"]["message"]
            except Exception:   # not our JSON error: say what HTTP said
                message = response.reason
            raise ServerError(response.status, str(message))
        return transcript_from_verbose(json.loads(data))

    def cancel(self) -> None:
        self.cancelled = True
        conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(2)
            except OSError:
                pass


def transcribe_file(url: str, path, **options) -> Transcript:
    """Transcribe ``path`` on the server at ``url`` (e.g. ``http://127.0.0.1:8000``); ServerError on refusal.
    Options: api_key, language, context, word_timestamps, timeout."""
    return FileRequest(url, path, **options).run()


def transcript_from_verbose(data: dict) -> Transcript:
    """Our verbose_json back into a Transcript (the fields OpenAI's format lacks come from our extras)."""
    def name(language):
        return language.capitalize() if language else language

    segments = [Segment(start=s["start"], end=s["end"], text=s["text"], language=name(s.get("language")),
                        words=[Word(w["word"], w["start"], w["end"], w.get("speaker")) for w in s.get("words", [])],
                        timing=s.get("timing") or "estimated", speaker=s.get("speaker"))
                for s in data.get("segments", [])]
    return Transcript(text=data.get("text", ""), language=name(data.get("language")),
                      duration=float(data.get("duration") or 0.0), segments=segments, model=data.get("model", ""),
                      words_note=data.get("words_note", ""), notes=list(data.get("notes") or []))


class LiveConnection:
    """A live session on the server: ``send(samples)`` float32 16 kHz, ``commit()``, ``close()``.

    ``on_event(event: dict)`` runs on the connection's reader thread for every server event."""

    def __init__(self, url: str, on_event: Callable[[dict], None], *, api_key: str | None = None,
                 language: str | None = None, context: str = "", silence_ms: int = 500):
        try:
            from websockets.sync.client import connect
        except ImportError:
            raise ImportError("live sessions over the network need websockets: pip install websockets") from None
        ws_url = url.rstrip("/").replace("http://", "ws://", 1).replace("https://", "wss://", 1) + "/v1/realtime"
        try:
            # entered as a context manager by hand: the connection outlives this call (closed in close())
            self._ws = connect(ws_url, additional_headers=_headers(api_key), open_timeout=10).__enter__()
        except Exception as e:
            raise ServerError(0, f"cannot open a live session at {ws_url}: {e}") from None
        self._on_event = on_event
        self._lock = threading.Lock()
        self._send({"type": "transcription_session.update", "session": {
            "input_audio_rate": 16000, "turn_detection": {"type": "server_vad", "silence_duration_ms": silence_ms},
            "input_audio_transcription": {"language": language, "prompt": context}}})
        self._reader = threading.Thread(target=self._read, name="live-connection", daemon=True)
        self._reader.start()

    def _send(self, event: dict) -> None:
        with self._lock:
            self._ws.send(json.dumps(event))

    def send(self, samples) -> None:
        pcm = (np.clip(np.asarray(samples, np.float32), -1, 1) * 32767).astype("<i2").tobytes()
        self._send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode("ascii")})

    def commit(self) -> None:
        self._send({"type": "input_audio_buffer.commit"})

    def close(self) -> None:
        try:
            self._ws.close()
        except Exception:   # already gone
            pass

    def _read(self) -> None:
        try:
            for message in self._ws:
                self._on_event(json.loads(message))
        except Exception as e:   # the connection broke: say so once
            self._on_event({"type": "error", "error": {"message": f"the live connection broke: {e}"}})
        self._on_event({"type": "session.closed"})
