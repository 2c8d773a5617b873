"""The step loop: requests in, tokens out, one scheduled step at a time.

    schedule -> run -> postprocess

Queued files, aligner requests and live streams all become requests in the
same scheduler, so one step mixes decode rows and prefill rows of them all.
"""
from __future__ import annotations

import torch

from engine.network.loading import (
    load_network,
    load_tokenizer,
    check_quantize,
    resolve_device,
    resolve_dtype,
)
from engine.serving.admission import FileAdmission
from engine.serving.kv_cache import KVCache
from engine.serving.request import Request, RequestOutput, RequestState
from engine.serving.runner import ModelRunner
from engine.serving.scheduler import Scheduler, SchedulerConfig


CPU_BLOCK_SIZE = 64
CPU_ROW_TOKENS = 1024          # a 30 s chunk: ~400 prompt tokens and room for its text
CPU_MIN_CACHE_BYTES = 1 << 30  # the floor when little memory is free: 16 float32 rows of ~270 tokens


def available_memory_bytes() -> int | None:
    """Memory the system can give without swapping (Linux MemAvailable, else psutil), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def total_memory_bytes(device: torch.device) -> int | None:
    """All the memory of ``device`` (a GPU's, or the machine's RAM), or None when unknown."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[1])
    try:
        import os

        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_cache_budget(kv_cache_bytes, device: torch.device) -> int:
    """A KV cache budget in bytes: a whole number above 0 and within the device's memory
    (checked before the weights load: a budget no machine has fails at once, not later)."""
    if isinstance(kv_cache_bytes, bool) or not isinstance(kv_cache_bytes, int) or kv_cache_bytes < 1:
        raise ValueError(f"kv_cache_bytes must be a whole number of bytes above 0 or None, got {kv_cache_bytes!r}")
    total = total_memory_bytes(device)
    if total is not None and kv_cache_bytes > total:
        raise ValueError(f"the KV cache budget ({kv_cache_bytes / 2**20:.0f} MiB) is more than the "
                         f"{device.type.upper()}'s memory ({total / 2**20:.0f} MiB)")
    return kv_cache_bytes


class EngineCore:
    """A loaded network with its scheduler, KV cache and runner: requests in, tokens out.

    ``engine.api.Engine`` builds requests from audio on top of this; jobs (file jobs, live
    streams) and an optional aligner are advanced once per step through the same loop.
    """

    def __init__(self, model_dir, *, device=None, dtype=None, max_batch_size: int = 64,
                 max_prefill_rows: int = 8, max_step_tokens: int = 4096, kv_cache_bytes: int | None = None,
                 block_size: int | None = None, pad_buckets: bool | None = None, quantize: str | None = None,
                 compact_weights: bool = True):
        self.model_dir = str(model_dir)
        self.torch_device = resolve_device(device)
        self.torch_dtype = resolve_dtype(dtype, self.torch_device)
        self.quantize = check_quantize(quantize, self.torch_device)   # None or "int8"; not token-exact
        if kv_cache_bytes is not None:
            kv_cache_bytes = check_cache_budget(kv_cache_bytes, self.torch_device)
        # compact_weights=False keeps float weights: loads faster where a few minutes of audio
        # would not repay the packing (fp16_weights).
        self.net, self.config = load_network(model_dir, self.torch_device, self.torch_dtype, self.quantize,
                                             compact_weights=compact_weights)
        self.tokenizer = load_tokenizer(model_dir)
        on_cuda = self.torch_device.type == "cuda"
        # flash-attn's paged kernels want 256-slot blocks. CPU attention reads a row in place
        # across consecutive blocks (the allocator keeps tables consecutive), so CPU blocks
        # are short: a row wastes under 64 slots instead of half a long block.
        block_size = block_size or (256 if on_cuda else CPU_BLOCK_SIZE)
        if kv_cache_bytes is None:
            kv_cache_bytes = self._default_cache_bytes(max_batch_size)
        num_blocks = KVCache.blocks_for_budget(self.config.decoder, kv_cache_bytes, block_size, self.torch_dtype)
        self.cache = KVCache(self.config.decoder, num_blocks, block_size, self.torch_dtype, self.torch_device,
                             prefix_caching=True)
        self.scheduler = Scheduler(SchedulerConfig(max_batch_size, max_prefill_rows, max_step_tokens),
                                   self.cache.allocator)
        self.runner = ModelRunner(self.net, self.cache, self.torch_device,
                                  pad_buckets=on_cuda if pad_buckets is None else pad_buckets)
        self.scheduler.before_start = self.runner.encode_if_cached   # a repeated window: match its audio prefix too
        self.aligner = None
        self._requests: dict[int, Request] = {}
        self._jobs: list = []        # FileJobs and Streams; each advances once per step
        # Queued files start, and open ones decode, only while the scheduler wants chunks.
        self.admission = FileAdmission(max_decoding=2 * max_prefill_rows, max_waiting_tokens=2 * max_step_tokens)
        self.accepting_chunks = True
        self._last_step_kinds: set[str] = set()

    @property
    def device(self) -> str:
        return self.torch_device.type

    @property
    def dtype(self) -> str:
        return str(self.torch_dtype).removeprefix("torch.")

    def _default_cache_bytes(self, max_batch_size: int) -> int:
        """CUDA: 60% of the free GPU memory. CPU: room for ``max_batch_size`` rows of
        ``CPU_ROW_TOKENS`` each, but at most a quarter of the memory free now (pages are
        only resident once written, so the budget is a cap, not an allocation)."""
        if self.torch_device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.torch_device)
            return int(free * 0.6)
        dec = self.config.decoder
        per_token = 2 * dec.layers * dec.kv_heads * dec.head_dim * self.torch_dtype.itemsize
        wanted = max_batch_size * CPU_ROW_TOKENS * per_token
        free = available_memory_bytes()
        cap = free // 4 if free else 2 << 30
        return max(min(wanted, cap), min(wanted, CPU_MIN_CACHE_BYTES))

    # ----------------------------------------------------------------- requests
    def add_request(self, request: Request) -> Request:
        self._requests[request.id] = request
        self.scheduler.add(request)
        return request

    def has_work(self) -> bool:
        # An open live stream waiting for audio is not work: the step loop may sleep.
        return any(job.busy for job in self._jobs) or self.scheduler.has_work() or (
            self.aligner is not None and self.aligner.has_work())

    # ---------------------------------------------------------------- the loop
    def step(self) -> list[RequestOutput]:
        """One engine step: schedule rows, run the model once, hand out tokens."""
        # Started jobs first, so files that finish decoding now free their slots for this step's newcomers.
        self.accepting_chunks = self.admission.hungry(self.scheduler)
        for job in [job for job in self._jobs if not getattr(job, "waiting", False)]:
            self._advance_job(job)
        for job in self.admission.admit(self._jobs, self.admission.hungry(self.scheduler)):
            self._advance_job(job)     # the rest of the queue stays paths: no open file, no samples
        outputs = self._reap_cancelled()
        if self.aligner is not None and self.aligner.has_work():
            self.aligner.step()
        rows = self.scheduler.schedule()
        outputs += [RequestOutput(r, [], True, r.error) for r in self.scheduler.take_rejected()]
        if not rows:
            return outputs
        before = {r.request.id: len(r.request.token_ids) for r in rows}
        self._last_step_kinds = {r.kind for r in rows}
        try:
            next_tokens = self.runner.run(rows, self.config.timestamp_token_id)
            finished = self.scheduler.postprocess(rows, next_tokens)
        except Exception as e:  # a crash fails this step's requests only; the engine stays usable
            return outputs + self._fail_rows(rows, e)
        done = {r.id for r in finished}
        for row in rows:
            req = row.request
            new = req.token_ids[before[req.id]:]
            if new or req.id in done:
                outputs.append(RequestOutput(req, new, req.id in done))
            if req.id in done:
                self._requests.pop(req.id, None)
        return outputs

    def _advance_job(self, job) -> None:
        job.advance()
        if job.finished:
            self._jobs.remove(job)
            self.admission.finished_jobs += 1

    def _reap_cancelled(self) -> list[RequestOutput]:
        outputs = []
        for req in [r for r in self._requests.values() if r.cancelled and not r.finished]:
            self.scheduler.release(req)
            req.state, req.finish_reason = RequestState.FINISHED, "cancelled"
            self._requests.pop(req.id, None)
            outputs.append(RequestOutput(req, [], True))
        return outputs

    def _fail_rows(self, rows, error: Exception) -> list[RequestOutput]:
        outputs = []
        message = f"engine step failed: {type(error).__name__}: {error}"
        for row in rows:
            req = row.request
            self.scheduler.release(req)
            req.state, req.finish_reason, req.error = RequestState.FINISHED, "error", message
            self._requests.pop(req.id, None)
            outputs.append(RequestOutput(req, [], True, message))
        return outputs

    def run_until_done(self, requests: list[Request], progress=None) -> None:
        """Step until every request in ``requests`` finished (others in the queue advance too)."""
        while not all(r.finished for r in requests):
            self.step()
            if progress is not None:
                progress(sum(r.finished for r in requests) / max(1, len(requests)))
