"""Errors as OpenAI's API shapes them: ``{"error": {"message", "type", "param", "code"}}``, never a traceback."""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
          413: "invalid_request_error", 429: "rate_limit_error", 503: "server_error", 504: "timeout_error"}


class APIError(Exception):
    """A refused or failed request: the HTTP status, a message for people, and the parameter at fault."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return error_body(self.status, self.message, param=self.param, code=self.code)


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": _TYPES.get(status, "server_error" if status >= 500
                                                             else "invalid_request_error"),
                      "param": param, "code": code}}


def install_handlers(app, metrics) -> None:
    """JSON errors for our APIError, FastAPI's validation errors, HTTP errors and anything unexpected."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    def respond(status, body, headers=None):
        metrics.rejected[status] += 1
        return JSONResponse(body, status_code=status, headers=headers)

    @app.exception_handler(APIError)
    async def _api_error(request, exc: APIError):
        return respond(exc.status, exc.body(), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request, exc: RequestValidationError):
        problems = []
        param = None
        for err in exc.errors():
            where = [str(p) for p in err.get("loc", ()) if p not in ("body", "query", "header")]
            param = param or (where[-1] if where else None)
            problems.append(f"{'.'.join(where) or 'request'}: {err.get('msg', 'invalid')}")
        return respond(400, error_body(400, "invalid parameters: " + "; ".join(problems), param=param,
                                       code="invalid_parameter"))

    @app.exception_handler(HTTPException)
    async def _http(request, exc: HTTPException):
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return respond(exc.status_code, error_body(exc.status_code, message), getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request, exc: Exception):
        log.exception("request failed")
        return respond(500, error_body(500, f"internal error: {type(exc).__name__}: {exc}"))
