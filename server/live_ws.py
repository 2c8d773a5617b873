"""The live WebSocket, ``/v1/realtime``: OpenAI realtime-transcription client events in, session events out.

Client events: ``transcription_session.update`` (or ``session.update``) with
``input_audio_format`` / ``input_audio_transcription`` {language, prompt} /
``turn_detection`` (``server_vad`` with ``silence_duration_ms``, or null for manual
turns) and our ``input_audio_rate`` (16000 or 24000; OpenAI's pcm16 is 24000, the
default); ``input_audio_buffer.append`` {audio: base64 PCM16 mono}; ``input_audio_buffer.commit``;
``input_audio_buffer.clear``. Malformed events get an ``error`` event and the session goes
on. The key goes in ``Authorization: Bearer`` or the subprotocol ``openai-insecure-api-key.KEY``.
A client that disconnects cancels its streams: their cache blocks are freed at the next step.
"""

import asyncio
import base64
import binascii
import hmac
import itertools
import json
import logging

import numpy as np

from server.live import LiveSession, _error
from server.runner import ServerStopping

log = logging.getLogger(__name__)
RATES = (16000, 24000)
KEY_PROTOCOL = "openai-insecure-api-key."
_event_ids = itertools.count(1)


def _offered_key(websocket) -> tuple[str | None, str | None]:
    """(key, subprotocol to accept) from the Authorization header or the key subprotocol."""
    scheme, _, key = (websocket.headers.get("authorization") or "").partition(" ")
    protocols = [p.strip() for p in (websocket.headers.get("sec-websocket-protocol") or "").split(",") if p.strip()]
    chosen = next((p for p in protocols if p == "realtime"), None)
    if scheme.lower() == "bearer" and key:
        return key.strip(), chosen
    for p in protocols:
        if p.startswith(KEY_PROTOCOL):
            return p[len(KEY_PROTOCOL):], chosen or p
    return None, chosen


class SessionConfig:
    """What ``session.update`` may set before the first audio."""

    def __init__(self):
        self.language, self.prompt, self.silence_s, self.rate = None, "", 0.5, 24000

    def update(self, session: dict) -> None:
        from engine.text.prompt import language_name

        if not isinstance(session, dict):
            raise ValueError("'session' must be an object")
        transcription = session.get("input_audio_transcription") or {}
        audio_input = ((session.get("audio") or {}).get("input") or {})     # the GA shape
        transcription = transcription or audio_input.get("transcription") or {}
        if not isinstance(transcription, dict):
            raise ValueError("'input_audio_transcription' must be an object")
        if "language" in transcription:
            self.language = language_name(transcription["language"] or None)
        if "prompt" in transcription:
            if not isinstance(transcription["prompt"], str):
                raise ValueError("'prompt' must be a string")
            self.prompt = transcription["prompt"]
        fmt = session.get("input_audio_format", audio_input.get("format"))
        if isinstance(fmt, dict):
            self.rate = int(fmt.get("rate", self.rate))
        elif fmt not in (None, "pcm16"):
            raise ValueError(f"input_audio_format {fmt!r} is not supported; send pcm16")
        rate = session.get("input_audio_rate", self.rate)
        if rate not in RATES:
            raise ValueError(f"input_audio_rate must be 16000 or 24000, got {rate!r}")
        self.rate = rate
        turns = session.get("turn_detection", audio_input.get("turn_detection", "keep"))
        if turns is None:
            self.silence_s = None
        elif isinstance(turns, dict):
            if turns.get("type", "server_vad") not in ("server_vad", "semantic_vad"):
                raise ValueError(f"turn_detection type {turns.get('type')!r} is not supported; use server_vad or null")
            ms = turns.get("silence_duration_ms", 500)
            if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not 50 <= ms <= 10000:
                raise ValueError("silence_duration_ms must be 50-10000")
            self.silence_s = ms / 1000
        elif turns != "keep":
            raise ValueError("turn_detection must be an object or null")

    def describe(self) -> dict:
        return {"object": "realtime.transcription_session", "input_audio_format": "pcm16",
                "input_audio_rate": self.rate,
                "input_audio_transcription": {"model": "qwen3-asr", "language": self.language, "prompt": self.prompt},
                "turn_detection": None if self.silence_s is None else
                {"type": "server_vad", "silence_duration_ms": int(self.silence_s * 1000)}}


def add_live_routes(app, runner, settings) -> None:
    from fastapi import WebSocket, WebSocketDisconnect

    @app.websocket("/v1/realtime")
    async def realtime(websocket: WebSocket):
        key, protocol = _offered_key(websocket)
        await websocket.accept(subprotocol=protocol)
        if settings.api_key and not (key and hmac.compare_digest(key.encode(), settings.api_key.encode())):
            await websocket.send_json(_error("invalid_request_error", "invalid_api_key",
                                             "a valid API key is required (Authorization: Bearer KEY)"))
            runner.metrics.rejected[401] += 1
            await websocket.close(code=1008)
            return
        if runner.metrics.live_sessions >= settings.max_live_sessions:
            await websocket.send_json(_error("server_error", "too_many_sessions",
                                             f"this server takes at most {settings.max_live_sessions} live sessions"))
            await websocket.close(code=1013)
            return
        await _serve_session(websocket, runner, WebSocketDisconnect)


async def _serve_session(websocket, runner, disconnect_error) -> None:
    loop = asyncio.get_running_loop()
    outbox: asyncio.Queue = asyncio.Queue()
    emit = lambda event: loop.call_soon_threadsafe(outbox.put_nowait, event)   # noqa: E731  (engine thread)
    config, session, resampler = SessionConfig(), None, None
    sender = asyncio.ensure_future(_send_events(websocket, outbox))
    emit({"type": "transcription_session.created", "session": config.describe()})
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                break
            event, problem = _parse(message)
            if problem:
                emit(_error("invalid_request_error", problem[0], problem[1]))
                continue
            kind, event_id = event["type"], event.get("event_id")
            try:
                if kind in ("transcription_session.update", "session.update"):
                    if session is not None:
                        raise ValueError("session settings can change only before the first audio")
                    config.update(event.get("session") or {})
                    emit({"type": "transcription_session.updated", "session": config.describe()})
                elif kind == "input_audio_buffer.append":
                    samples = _pcm16(event.get("audio"))
                    if session is None:
                        session = LiveSession(emit, language=config.language, prompt=config.prompt,
                                              silence_s=config.silence_s)
                        runner.add_session(session)
                        resampler = _resampler(config.rate)
                    if resampler is not None:
                        samples = resampler.resample_chunk(samples)
                    if samples.size:
                        runner.call(lambda s=session, x=samples: s.feed(x))
                elif kind in ("input_audio_buffer.commit", "input_audio_buffer.clear"):
                    if session is not None:
                        runner.call(session.commit if kind.endswith("commit") else session.clear)
                else:
                    raise LookupError(f"unknown event type {kind!r}")
            except LookupError as e:
                emit(_error("invalid_request_error", "unknown_event", str(e), event_id))
            except ServerStopping as e:
                emit(_error("server_error", "shutting_down", str(e), event_id))
                break
            except ValueError as e:
                emit(_error("invalid_request_error", "invalid_value", str(e), event_id))
    except disconnect_error:
        pass
    finally:
        if session is not None:
            runner.call(session.cancel_now)   # frees the session's blocks at the next step
        sender.cancel()


def _parse(message) -> tuple[dict | None, tuple[str, str] | None]:
    text = message.get("text")
    if text is None:
        return None, ("invalid_event", "events are JSON text frames; binary frames are not accepted")
    try:
        event = json.loads(text)
    except ValueError as e:
        return None, ("invalid_json", f"the event is not JSON: {e}")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None, ("invalid_event", "an event is a JSON object with a string 'type'")
    return event, None


def _pcm16(audio) -> np.ndarray:
    if not isinstance(audio, str):
        raise ValueError("'audio' must be base64-encoded PCM16 (a string)")
    try:
        raw = base64.b64decode(audio, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("'audio' is not valid base64") from None
    if len(raw) % 2:
        raise ValueError("PCM16 audio must have an even number of bytes (2 per sample)")
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0


def _resampler(rate: int):
    if rate == 16000:
        return None
    import soxr

    return soxr.ResampleStream(rate, 16000, 1, dtype="float32")


async def _send_events(websocket, outbox: asyncio.Queue) -> None:
    try:
        while True:
            event = await outbox.get()
            event.setdefault("event_id", f"event_{next(_event_ids)}")
            await websocket.send_text(json.dumps(event))
    except Exception:   # the client went away: the receive loop sees it and cleans up
        return
