"""Uploads: a size limit that refuses before storing, and a bounded worker that stores and checks the audio.

The body limit is an ASGI wrapper: a declared ``Content-Length`` above the limit
is answered 413 before one byte of the body is read, and a body that grows past
the limit while it arrives (chunked uploads) is cut off with 413 as well.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from server.errors import APIError

UPLOAD_PREFIX = "qwen3-asr-upload-"


def _too_large(limit: int) -> APIError:
    return APIError(413, f"the upload is larger than this server's limit of {limit / 2**20:.0f} MiB",
                    param="file", code="file_too_large")


class BodyLimit:
    """ASGI middleware: HTTP bodies larger than ``max_bytes`` get 413 (as JSON)."""

    def __init__(self, app, max_bytes: int, metrics=None):
        self.app, self.max_bytes, self.metrics = app, max_bytes, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise _too_large(self.max_bytes)   # FastAPI passes it through to the APIError handler
            return message

        await self.app(scope, limited_receive, send)

    async def _refuse(self, send):
        import json

        if self.metrics is not None:
            self.metrics.rejected[413] += 1
        body = json.dumps(_too_large(self.max_bytes).body()).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def safe_suffix(filename: str | None) -> str:
    """The upload's extension (it helps the decoder guess), never a path or odd characters."""
    suffix = Path(filename or "").suffix.lower()
    return suffix if 1 < len(suffix) <= 8 and suffix[1:].isalnum() else ".audio"


def store_and_check(upload_file, filename: str | None) -> tuple[str, float]:
    """Copy an upload to a temp file of ours and read its audio header (runs in the bounded decode worker).

    Returns (path, duration seconds); the caller removes the file. APIError 400 for an empty
    upload or one that is not audio (the temp file is removed then)."""
    from engine.audio.decode import audio_info

    fd, path = tempfile.mkstemp(prefix=UPLOAD_PREFIX, suffix=safe_suffix(filename))
    try:
        with os.fdopen(fd, "wb") as out:
            upload_file.seek(0)
            shutil.copyfileobj(upload_file, out, 1 << 20)
        if os.path.getsize(path) == 0:
            raise APIError(400, "the uploaded file is empty", param="file", code="empty_file")
        try:
            info = audio_info(path)
        except Exception as e:
            reason = str(e).replace(path, filename or "the upload")
            raise APIError(400, f"the upload is not audio this server can read: {reason}", param="file",
                           code="invalid_audio") from None
        if not info.duration and info.duration is not None:
            raise APIError(400, "the uploaded audio holds no samples", param="file", code="empty_audio")
        return path, float(info.duration or 0.0)
    except BaseException:
        remove_quietly(path)
        raise


def remove_quietly(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
