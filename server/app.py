"""The HTTP API: OpenAI's ``/v1/audio/transcriptions`` (plus models, health, metrics and live sessions).

    from server.app import build_app
    app = build_app(engine, ServerSettings(...))      # a fastapi.FastAPI; run it with uvicorn

``build_app(engine, settings=None) -> fastapi.FastAPI`` takes a loaded ``engine.Engine``
(one per process) and optional ``server.settings.ServerSettings``. It starts the engine's
thread (``app.state.runner``, a ``server.runner.EngineRunner``) at once, so the app works
under any ASGI host, Ray Serve's ``serve.ingress`` included; its lifespan shutdown (or a
host's own hook calling ``app.state.runner.stop()``) finishes or cancels work in flight.
"""

import asyncio
import concurrent.futures
import contextlib
import hmac
import logging
import time

from server.errors import APIError, install_handlers
from server.formats import MEDIA_TYPES, RESPONSE_FORMATS, render
from server.runner import EngineRunner, JobCancelled, QueueFull, ServerStopping
from server.settings import ServerSettings
from server.uploads import BodyLimit, remove_quietly, store_and_check

log = logging.getLogger(__name__)
GRANULARITIES = ("word", "segment")
LEFTOVER_GRACE_S = 2.0


def _require_fastapi():
    try:
        import fastapi  # noqa: F401
        import python_multipart  # noqa: F401  (FastAPI's form parser)
    except ImportError as e:
        raise ImportError(f"the server needs FastAPI, uvicorn and python-multipart ({e}); "
                          "install them with: pip install 'qwen3-asr-desktop[server]'") from None


def check_key(settings: ServerSettings, authorization: str | None) -> None:
    """APIError 401 unless the request carries the server's key (when it has one)."""
    if not settings.api_key:
        return
    scheme, _, key = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(key.strip().encode(), settings.api_key.encode()):
        raise APIError(401, "a valid API key is required: send 'Authorization: Bearer KEY'",
                       code="invalid_api_key")


def build_app(engine, settings: ServerSettings | None = None):
    """A FastAPI app serving ``engine`` under ``settings`` (defaults: loopback, no key). See the module docstring."""
    _require_fastapi()
    from fastapi import Depends, FastAPI, File, Form, Header, Request, UploadFile
    from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

    settings = (settings or ServerSettings()).check()
    runner = EngineRunner(engine, max_queued_files=settings.max_queued_files).start()
    decode_pool = concurrent.futures.ThreadPoolExecutor(settings.decode_workers, thread_name_prefix="decode")

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        # The host has already given requests in flight its graceful-shutdown time (serve.py: shutdown_grace_s);
        # what they left behind gets a moment more, then is cancelled.
        summary = await asyncio.get_running_loop().run_in_executor(None, runner.stop, LEFTOVER_GRACE_S)
        app.state.shutdown_summary = summary
        decode_pool.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="Qwen3-ASR server", version="1", lifespan=lifespan)
    app.state.runner, app.state.settings, app.state.engine = runner, settings, engine
    app.add_middleware(BodyLimit, max_bytes=settings.max_upload_bytes, metrics=runner.metrics)
    install_handlers(app, runner.metrics)

    def authorized(authorization: str | None = Header(None)):
        check_key(settings, authorization)

    @app.get("/health")
    async def health():
        return {"status": "stopping" if runner.stopping else "ok", "model": settings.model_name,
                "aligner": engine.aligner is not None, "max_chunk_seconds": engine.default_chunk_seconds,
                "engine_thread": runner.running, "queued_files": runner.queued_files,
                "live_sessions": runner.metrics.live_sessions}

    @app.get("/v1/models", dependencies=[Depends(authorized)])
    async def models():
        return {"object": "list", "data": [_model_card(settings)]}

    @app.get("/v1/models/{model_id}", dependencies=[Depends(authorized)])
    async def model(model_id: str):
        if model_id != settings.model_name:
            raise APIError(404, f"no model {model_id!r} here; this server serves {settings.model_name!r}",
                           param="model", code="model_not_found")
        return _model_card(settings)

    @app.get("/metrics", dependencies=[Depends(authorized)])
    async def metrics():
        return PlainTextResponse(runner.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.post("/v1/audio/transcriptions", dependencies=[Depends(authorized)])
    async def transcriptions(request: Request, file: UploadFile | None = File(None), model: str | None = Form(None),
                             language: str | None = Form(None), prompt: str = Form(""),
                             response_format: str = Form("json"), temperature: float | None = Form(None),
                             stream: bool = Form(False),
                             timestamp_granularities: list[str] | None = Form(None,
                                                                              alias="timestamp_granularities[]")):
        options = _check_options(engine, response_format, language, prompt, timestamp_granularities or [], stream)
        if file is None:
            raise APIError(400, "no file: send the audio as the multipart field 'file'", param="file",
                           code="missing_file")
        if runner.queued_files >= settings.max_queued_files:
            raise _busy(runner)
        path, duration = await asyncio.get_running_loop().run_in_executor(
            decode_pool, store_and_check, file.file, file.filename)
        events: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()
        on_segment = (lambda seg: loop.call_soon_threadsafe(events.put_nowait, seg)) if stream else None
        try:
            task = _submit(runner, path, options, on_segment=on_segment)   # on_segment runs on the engine thread
        except BaseException:
            remove_quietly(path)
            raise
        if stream:
            return _sse_response(runner, task, path, events, settings, StreamingResponse)
        try:
            transcript = await _wait(request, runner, task, settings.request_timeout_s)
        finally:
            remove_quietly(path)
        body = render(transcript, response_format, words=options["words"])
        if isinstance(body, dict):
            return JSONResponse(body)
        return Response(body, media_type=MEDIA_TYPES[response_format] + "; charset=utf-8")

    from server.live_ws import add_live_routes

    add_live_routes(app, runner, settings)
    return app


def _model_card(settings: ServerSettings) -> dict:
    return {"id": settings.model_name, "object": "model", "created": 0, "owned_by": "qwen3-asr-desktop"}


def _busy(runner: EngineRunner) -> APIError:
    retry = runner.retry_after()
    return APIError(429, f"the server's queue is full ({runner.max_queued_files} files); retry in {retry} s",
                    code="queue_full", headers={"Retry-After": str(retry)})


def _check_options(engine, response_format, language, prompt, granularities, stream) -> dict:
    from engine.text.prompt import language_name

    if response_format not in RESPONSE_FORMATS:
        raise APIError(400, f"unknown response_format {response_format!r}; choose from {', '.join(RESPONSE_FORMATS)}",
                       param="response_format", code="invalid_response_format")
    bad = [g for g in granularities if g not in GRANULARITIES]
    if bad:
        raise APIError(400, f"unknown timestamp_granularities {bad}; choose from word, segment",
                       param="timestamp_granularities[]", code="invalid_parameter")
    words = "word" in granularities
    if words and response_format != "verbose_json":
        raise APIError(400, "timestamp_granularities needs response_format verbose_json",
                       param="timestamp_granularities[]", code="invalid_parameter")
    if words and engine.aligner is None:
        raise APIError(400, "word timestamps need a forced aligner; this server was started without --aligner",
                       param="timestamp_granularities[]", code="no_aligner")
    try:
        language = language_name(language or None)
    except ValueError as e:
        raise APIError(400, str(e), param="language", code="invalid_language") from None
    # Subtitles place their cues by word times when an aligner is loaded, as the CLI's exports do.
    align = words or (response_format in ("srt", "vtt") and engine.aligner is not None)
    return {"language": language, "context": prompt or "", "word_timestamps": align, "words": words,
            "response_format": response_format, "stream": stream}


def _submit(runner: EngineRunner, path: str, options: dict, on_segment):
    try:
        return runner.submit_file(path, on_segment=on_segment, language=options["language"],
                                  context=options["context"], word_timestamps=options["word_timestamps"])
    except QueueFull:
        raise _busy(runner) from None
    except ServerStopping:
        raise APIError(503, "the server is shutting down", code="shutting_down") from None


def _failure(error: BaseException) -> APIError:
    if isinstance(error, JobCancelled):
        return APIError(503, f"the transcription was cancelled: {error}", code="cancelled")
    message = str(error)
    if message.startswith("engine step failed"):
        return APIError(500, message, code="engine_error")
    return APIError(400, f"the audio could not be transcribed: {message}", param="file", code="invalid_audio")


async def _wait(request, runner: EngineRunner, task, timeout_s: float):
    """The file's transcript; cancels the job when the client goes away or the timeout passes."""
    result = asyncio.wrap_future(task.future)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({result, gone}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:    # the host gave up on this request (shutdown): so does the engine
        runner.cancel_file(task, "the server shut down before it finished")
        raise
    finally:
        gone.cancel()
    if result in done:
        error = result.exception()
        if error is not None:
            raise _failure(error)
        return result.result()
    reason = "the client disconnected" if gone in done else f"no result within {timeout_s:g} s"
    runner.cancel_file(task, reason)
    if gone in done:
        raise APIError(499, reason, code="client_closed")
    raise APIError(504, f"the transcription took longer than this server's limit of {timeout_s:g} s and was "
                        "cancelled", code="timeout")


async def _disconnected(request) -> None:
    """Returns when the client closes the connection (the body has been read: only disconnect is left)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _sse_response(runner, task, path, events: asyncio.Queue, settings, StreamingResponse):
    """OpenAI's transcription stream: ``transcript.text.delta`` events as segments finish, then
    ``transcript.text.done`` with the whole text (authoritative: segments finish out of order at times)."""
    import json

    result = asyncio.wrap_future(task.future)

    async def body():
        first = True
        deadline = time.monotonic() + settings.request_timeout_s
        try:
            while True:
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait({getter, result}, timeout=max(0.0, deadline - time.monotonic()),
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    seg = getter.result()
                    delta = seg.text if first else " " + seg.text
                    first = False
                    yield f"data: {json.dumps({'type': 'transcript.text.delta', 'delta': delta})}\n\n"
                    continue
                getter.cancel()
                if result not in done:
                    runner.cancel_file(task, "timeout")
                    error = APIError(504, f"the transcription took longer than {settings.request_timeout_s:g} s "
                                          "and was cancelled", code="timeout")
                    yield f"data: {json.dumps(error.body())}\n\n"
                    return
                while not events.empty():     # segments pushed just before the end
                    seg = events.get_nowait()
                    delta = seg.text if first else " " + seg.text
                    first = False
                    yield f"data: {json.dumps({'type': 'transcript.text.delta', 'delta': delta})}\n\n"
                if result.exception() is not None:
                    yield f"data: {json.dumps(_failure(result.exception()).body())}\n\n"
                    return
                from server.formats import usage

                transcript = result.result()
                done_event = {"type": "transcript.text.done", "text": transcript.text, "usage": usage(transcript)}
                yield f"data: {json.dumps(done_event)}\n\n"
                return
        finally:
            if not task.future.done():
                runner.cancel_file(task, "the client disconnected")
            remove_quietly(path)

    return StreamingResponse(body(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
