"""Run the server with uvicorn: ``qwen3-asr serve`` calls ``serve(engine, settings)``."""
from __future__ import annotations

import logging

from server.settings import ServerSettings

log = logging.getLogger(__name__)


def serve(engine, settings: ServerSettings, *, log_level: str = "info") -> dict:
    """Serve until SIGINT/SIGTERM; then in-flight requests get ``shutdown_grace_s`` to finish and the rest
    are cancelled. Returns the shutdown summary ({"finished": [...], "cancelled": [...]} task ids)."""
    try:
        import uvicorn
    except ImportError:
        raise ImportError("the server needs uvicorn: pip install 'qwen3-asr-desktop[server]'") from None
    from server.app import build_app

    app = build_app(engine, settings)
    config = uvicorn.Config(app, host=settings.host, port=settings.port, log_level=log_level,
                            timeout_graceful_shutdown=int(settings.shutdown_grace_s), ws="websockets-sansio")
    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):   # SIGINT/SIGTERM: no new work from this moment
            app.state.runner.begin_shutdown()
            super().handle_exit(sig, frame)

    Server(config).run()
    return getattr(app.state, "shutdown_summary", {"finished": [], "cancelled": []})
