"""What a server is allowed to do: where it listens, who may call it, and how much it takes."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses: the only binds allowed without an API key."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class ServerSettings:
    """Limits and identity of one server process.

    Attributes:
        host: the address to bind; loopback unless told otherwise.
        port: the TCP port.
        api_key: the Bearer key every request must carry; required when ``host`` is not loopback.
        model_name: the model id ``/v1/models`` lists and responses name.
        max_upload_bytes: a larger upload is refused with 413 before it is stored.
        request_timeout_s: a file request not answered by then is cancelled and answered 504.
        max_queued_files: files queued or running at once; more are answered 429 with Retry-After.
        decode_workers: threads that check uploaded audio before it is queued (bounded work).
        max_live_sessions: open live sessions; more are refused with an error event.
        shutdown_grace_s: on shutdown, in-flight work gets this long to finish, then it is cancelled.
    """

    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    model_name: str = "qwen3-asr"
    max_upload_bytes: int = 200 * 1024 * 1024
    request_timeout_s: float = 600.0
    max_queued_files: int = 64
    decode_workers: int = 2
    max_live_sessions: int = 32
    shutdown_grace_s: float = 30.0

    def check(self) -> "ServerSettings":
        """Raise ValueError for settings that are wrong or unsafe; returns self."""
        if not self.api_key and not is_loopback(self.host):
            raise ValueError(f"binding to {self.host} makes the server reachable from other machines: "
                             "give an API key (--api-key or QWEN3_ASR_API_KEY)")
        if self.api_key is not None and (not isinstance(self.api_key, str) or len(self.api_key) < 8):
            raise ValueError("the API key must be a string of at least 8 characters")
        from engine.arguments import SERVER_RULES   # one rule per number, as the CLI and the app

        for rule in SERVER_RULES:
            rule.check(getattr(self, rule.name))
        return self
