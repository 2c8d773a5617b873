"""A real server (uvicorn on a loopback port, in a thread) over a real engine, for the server tests."""
from __future__ import annotations

import socket
import threading
import time

MODELS = __import__("pathlib").Path(__file__).parent / "models"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningServer:
    """``build_app(engine, settings)`` served by uvicorn until ``stop()``; ``url`` is its base address."""

    def __init__(self, engine, **settings):
        import uvicorn

        from server.app import build_app
        from server.settings import ServerSettings

        self.settings = ServerSettings(port=free_port(), **settings)
        self.app = build_app(engine, self.settings)
        self.engine = engine
        self.url = f"http://127.0.0.1:{self.settings.port}"
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.settings.port, log_level="warning",
                                ws="websockets-sansio", timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)

    @property
    def runner(self):
        return self.app.state.runner

    def stop(self) -> dict:
        """As SIGTERM does under ``qwen3-asr serve``: no new work, then uvicorn's graceful shutdown."""
        self.runner.begin_shutdown()
        self._server.should_exit = True
        self._thread.join(timeout=30)
        return getattr(self.app.state, "shutdown_summary", None)
