"""Every knob of an engine in one dataclass, checked once: ``engine.load(model, config=EngineConfig(...))``.

The engine's parts read their settings from here: the network load (device, dtype,
quantization, compact weights), the KV cache, the scheduler, the file admission of the
job layer and the defaults of live streams. ``EngineConfig.from_options`` builds one from
the keyword arguments ``engine.load`` and ``Engine`` always took, so old calls keep working.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from engine.serving.scheduler import SchedulerConfig


def _positive_int(name: str, value, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1{' or None' if allow_none else ''}, "
                         f"got {value!r:.40}")


def _non_negative(name: str, value, *, above_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (value > 0 if above_zero else value >= 0)
    if not ok:
        raise ValueError(f"{name} must be a number {'above' if above_zero else 'of at least'} 0, got {value!r:.40}")


@dataclass(frozen=True)
class StreamDefaults:
    """What ``Engine.open_stream`` uses for options its caller leaves out (engine.pipelines.live_stream)."""

    update_interval: float = 0.75      # seconds of stream between updates of the open utterance
    max_utterance_s: float = 20.0      # a longer utterance is cut at its quietest point
    recent_context_chars: int = 200    # committed text appended to the context of every pass
    priority: int = 10                 # the stream's requests outrank files (priority 0)
    min_silence_s: float = 0.5         # silence that ends an utterance

    def __post_init__(self):
        _non_negative("stream update_interval", self.update_interval, above_zero=True)
        _non_negative("stream max_utterance_s", self.max_utterance_s, above_zero=True)
        _non_negative("stream min_silence_s", self.min_silence_s, above_zero=True)
        if isinstance(self.recent_context_chars, bool) or not isinstance(self.recent_context_chars, int) \
                or self.recent_context_chars < 0:
            raise ValueError(f"stream recent_context_chars must be a whole number of at least 0, "
                             f"got {self.recent_context_chars!r:.40}")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise ValueError(f"stream priority must be a whole number, got {self.priority!r:.40}")

    def options(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class EngineConfig:
    """One engine's settings. None means "chosen at load for the device" where a field says so."""

    # the network
    device: object = None              # a name or torch.device; None: CUDA when available, else CPU
    dtype: object = None             # None: bfloat16 on CUDA; on CPU by its bfloat16 hardware
    quantize: str | None = None        # None or "int8" (decoder weights; not token-exact)
    compact_weights: bool = True       # float32 math on 2-byte weights where the CPU lacks bfloat16 (and
                                       # their one-row copies); the LM head's int8 copy for one row's token
    huge_page_weights: bool | None = None   # CPU: decoder weights onto 2 MB pages in the background after
                                            # load (network.huge_pages); None: on unless QWEN3_ASR_HUGE_PAGES=0
    # the KV cache
    kv_cache_bytes: int | None = None  # None: 60% of free GPU memory; CPU: room for max_batch_size rows
    block_size: int | None = None      # None: 256 on CUDA (flash-attn's pages), 64 on CPU
    # the scheduler (engine.serving.scheduler.SchedulerConfig)
    max_batch_size: int = 64
    max_prefill_rows: int = 8
    max_step_tokens: int = 4096
    reserve_after_steps: int = 1
    background_prefill_tokens: int = 256
    background_window_steps: int = 32
    background_window_s: float = 3.0
    pad_buckets: bool | None = None    # None: on CUDA (CUDA graphs replay padded shapes)
    cuda_graphs: bool = True           # CUDA: replay captured step graphs where the attention allows it
    # the job layer: files and live streams
    use_vad: bool = True               # cut files at silences (Silero VAD); else at quiet points
    max_decoding_files: int | None = None    # files open at once; None: 2 x max_prefill_rows
    max_waiting_tokens: int | None = None    # prompt tokens queued for prefill before files wait; None: 2 x max_step_tokens
    # blocks (30 s each) a file's reader thread decodes, VAD-cuts and log-mels ahead of the engine;
    # 0 reads on the engine thread between steps (same chunks; the steps wait for the reading)
    file_read_ahead: int = 2
    stream: StreamDefaults = field(default_factory=StreamDefaults)

    def __post_init__(self):
        for name in ("compact_weights", "use_vad", "cuda_graphs"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r:.40}")
        for name in ("pad_buckets", "huge_page_weights"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True, False or None, got {getattr(self, name)!r:.40}")
        if self.kv_cache_bytes is not None and (isinstance(self.kv_cache_bytes, bool) or not isinstance(
                self.kv_cache_bytes, int) or self.kv_cache_bytes < 1):
            raise ValueError(f"kv_cache_bytes must be a whole number of bytes above 0 or None, "
                             f"got {self.kv_cache_bytes!r:.40}")
        for name in ("block_size", "max_decoding_files", "max_waiting_tokens"):
            _positive_int(name, getattr(self, name), allow_none=True)
        if isinstance(self.file_read_ahead, bool) or not isinstance(self.file_read_ahead, int) \
                or self.file_read_ahead < 0:
            raise ValueError(f"file_read_ahead must be a whole number of at least 0, got {self.file_read_ahead!r:.40}")
        for name in ("max_batch_size", "max_prefill_rows", "max_step_tokens", "background_prefill_tokens"):
            _positive_int(name, getattr(self, name))
        for name in ("reserve_after_steps", "background_window_steps", "background_window_s"):
            _non_negative(name, getattr(self, name))
        if not isinstance(self.stream, StreamDefaults):
            raise ValueError(f"stream must be a StreamDefaults, got {type(self.stream).__name__}")

    @classmethod
    def from_options(cls, config: EngineConfig | None = None, **options) -> EngineConfig:
        """``config`` (or the defaults) with ``options`` (the old keyword arguments) put on top;
        a name that is no knob raises TypeError, as an unknown keyword argument always did."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unknown engine option{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}")
        if config is not None and not isinstance(config, EngineConfig):
            raise ValueError(f"config must be an EngineConfig, got {type(config).__name__}")
        return dataclasses.replace(config or cls(), **options)

    def scheduler_config(self) -> SchedulerConfig:
        return SchedulerConfig(self.max_batch_size, self.max_prefill_rows, self.max_step_tokens,
                               reserve_after_steps=self.reserve_after_steps,
                               background_prefill_tokens=self.background_prefill_tokens,
                               background_window_steps=self.background_window_steps,
                               background_window_s=self.background_window_s)

    @property
    def decoding_files(self) -> int:
        return self.max_decoding_files or 2 * self.max_prefill_rows

    @property
    def waiting_tokens(self) -> int:
        return self.max_waiting_tokens or 2 * self.max_step_tokens
