"""The narrow port through which jobs (file jobs, live streams) use the engine under them.

A job makes requests from audio, adds them with a callback that receives their outputs,
aborts them, and decodes finished ones to text; the job layer also asks how many prompt
tokens wait for prefill (file admission). Nothing else of the engine is theirs to read:
``tests/test_layers.py`` checks that ``file_job.py`` and ``jobs.py`` touch only these members.
``engine.api.Engine`` implements this port.
"""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

from engine.network.config import ModelConfig
from engine.serving.request import Request, RequestOutput

OnOutput = Callable[[RequestOutput], None]


@runtime_checkable
class EnginePort(Protocol):
    """What a job may ask of the engine."""

    model_dir: str              # the model's folder, for a transcript's metadata
    config: ModelConfig         # the network's shapes and token ids (audio tokens per second of a chunk)
    aligner: object             # the loaded forced aligner (engine.pipelines.aligner.Aligner) or None

    def make_request(self, audio, *, language=None, context: str = "", max_new_tokens: int | None = None,
                     priority: int = 0, features=None) -> Request:
        """A request for one clip (float32 16 kHz samples), not yet queued; ``features``: its
        log-mel, when the caller computed it already (off the engine thread)."""

    def add_request(self, request: Request, on_output: OnOutput | None = None) -> Request:
        """Queue ``request``; its outputs go to ``on_output`` (the last one has ``finished``)."""

    def abort_request(self, request: Request) -> None:
        """Stop ``request``; its owner gets a finished output at the next step."""

    def decode(self, request: Request) -> tuple[str | None, str]:
        """(language, text) of a finished request."""

    def cache_tokens(self) -> int:
        """How many tokens the whole KV cache holds: the longest request that can run."""

    def waiting_prompt_tokens(self, limit: int) -> int:
        """Prompt tokens queued for prefill, counted up to ``limit``."""


PORT_MEMBERS = frozenset({"model_dir", "config", "aligner", "make_request", "add_request", "abort_request",
                          "decode", "cache_tokens", "waiting_prompt_tokens"})
