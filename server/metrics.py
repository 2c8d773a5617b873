"""Counters the engine thread keeps and ``GET /metrics`` shows in Prometheus' text format."""
from __future__ import annotations

import collections
import threading
import time

TOKEN_WINDOW_S = 10.0     # tokens per second is measured over this much recent time


class Metrics:
    """Written by the engine thread, read by ``render()`` from any thread (plain numbers; a lock for the window)."""

    def __init__(self):
        self.queued_files = 0
        self.live_sessions = 0
        self.audio_seconds = 0.0          # audio transcribed: finished files and closed live sessions
        self.files_done = 0
        self.steps = 0
        self.step_seconds = 0.0
        self.tokens = 0
        self.rejected = collections.Counter()   # HTTP status -> count of refused requests
        self._lock = threading.Lock()
        self._recent_tokens: collections.deque = collections.deque()   # (time, tokens)
        self._recent_files: collections.deque = collections.deque(maxlen=16)   # seconds from submit to done

    def step(self, seconds: float, tokens: int) -> None:
        now = time.monotonic()
        self.steps += 1
        self.step_seconds += seconds
        self.tokens += tokens
        with self._lock:
            self._recent_tokens.append((now, tokens))
            while self._recent_tokens and self._recent_tokens[0][0] < now - TOKEN_WINDOW_S:
                self._recent_tokens.popleft()

    def file_done(self, audio_seconds: float, wall_seconds: float) -> None:
        self.files_done += 1
        self.audio_seconds += audio_seconds
        self._recent_files.append(wall_seconds)

    def recent_file_seconds(self) -> float | None:
        """Mean seconds from submit to done of the last few files, or None before the first."""
        files = list(self._recent_files)
        return sum(files) / len(files) if files else None

    def tokens_per_second(self) -> float:
        with self._lock:
            now = time.monotonic()
            recent = [n for t, n in self._recent_tokens if t >= now - TOKEN_WINDOW_S]
        return sum(recent) / TOKEN_WINDOW_S

    def render(self) -> str:
        """The Prometheus exposition text (version 0.0.4)."""
        rows = [
            ("qwen3_asr_queued_files", "gauge", "files accepted and not yet answered", self.queued_files),
            ("qwen3_asr_live_sessions", "gauge", "open live transcription sessions", self.live_sessions),
            ("qwen3_asr_audio_seconds_total", "counter", "seconds of audio transcribed", round(self.audio_seconds, 3)),
            ("qwen3_asr_files_total", "counter", "files transcribed", self.files_done),
            ("qwen3_asr_steps_total", "counter", "engine steps run", self.steps),
            ("qwen3_asr_step_seconds_total", "counter", "seconds spent in engine steps", round(self.step_seconds, 6)),
            ("qwen3_asr_tokens_total", "counter", "tokens generated", self.tokens),
            ("qwen3_asr_tokens_per_second", "gauge", f"tokens generated per second over the last "
                                                      f"{TOKEN_WINDOW_S:g} s", round(self.tokens_per_second(), 3)),
        ]
        lines = []
        for name, kind, help_text, value in rows:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
        lines += ["# HELP qwen3_asr_rejected_total requests refused, by HTTP status",
                  "# TYPE qwen3_asr_rejected_total counter"]
        lines += [f'qwen3_asr_rejected_total{{status="{s}"}} {n}' for s, n in sorted(self.rejected.items())]
        return "\n".join(lines) + "\n"
