"""The closed engine core: requests in, outputs pushed to their owners, one scheduled step at a time.

    schedule -> run -> postprocess -> deliver

The core knows requests only: ``add_request``, ``abort_request`` and ``step``. File
jobs, live streams and the aligner live above it in the job layer
(engine.pipelines.jobs), which makes their requests and advances them between steps;
a file's chunks and a stream's passes meet here as rows of the same steps. The forced
aligner is another network, so it has its own KV cache, scheduler and runner (these
same classes, its requests scored by the row mode SCORE), stepped by the job layer.
"""
from __future__ import annotations

from typing import Callable

import torch

from engine.network.loading import (
    load_network,
    load_tokenizer,
    check_quantize,
    resolve_device,
    resolve_dtype,
)
from engine.network import huge_pages
from engine.network.platform import available_memory_bytes
from engine.serving.config import EngineConfig
from engine.serving.kv_cache import KVCache
from engine.serving.request import Request, RequestOutput, RequestState
from engine.serving.runner import ModelRunner
from engine.serving.scheduler import Scheduler


CPU_BLOCK_SIZE = 64
CPU_ROW_TOKENS = 1024          # a 30 s chunk: ~400 prompt tokens and room for its text
CPU_MIN_CACHE_BYTES = 1 << 30  # the floor when little memory is free: 16 float32 rows of ~270 tokens


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
    """A loaded network with its scheduler, KV cache and runner: requests in, outputs out.

    Each output goes to the ``on_output`` callback its request was added with (its owner),
    and ``step`` also returns them all. Nothing else happens in a step: no jobs, no
    admission, no aligner (the job layer drives those between steps).
    """

    def __init__(self, model_dir, config: EngineConfig | None = None):
        config = config or EngineConfig()
        self.settings = config
        self.model_dir = str(model_dir)
        self.torch_device = resolve_device(config.device)
        self.torch_dtype = resolve_dtype(config.dtype, self.torch_device)
        self.quantize = check_quantize(config.quantize, self.torch_device)   # None or "int8"; not token-exact
        kv_cache_bytes = config.kv_cache_bytes
        if kv_cache_bytes is not None:
            kv_cache_bytes = check_cache_budget(kv_cache_bytes, self.torch_device)
        # compact_weights=False keeps float weights: loads faster where a few minutes of audio
        # would not repay the packing (fp16_weights).
        self.net, self.config = load_network(model_dir, self.torch_device, self.torch_dtype, self.quantize,
                                             compact_weights=config.compact_weights)
        self.tokenizer = load_tokenizer(model_dir)
        on_cuda = self.torch_device.type == "cuda"
        # Decode steps read every projection weight: 2 MB pages spare their page walks, and the
        # move runs beside the engine (huge_pages). None where skipped; .wait() gives the result.
        self.weight_pages = huge_pages.BackgroundCollapse(self.net.projection_tensors(), owner=self.net) \
            if not on_cuda and huge_pages.wanted(config.huge_page_weights) else None
        # flash-attn's paged kernels want 256-slot blocks. CPU attention reads a row in place
        # across consecutive blocks (the allocator keeps tables consecutive), so CPU blocks
        # are short: a row wastes under 64 slots instead of half a long block.
        block_size = config.block_size or (256 if on_cuda else CPU_BLOCK_SIZE)
        if kv_cache_bytes is None:
            kv_cache_bytes = self._default_cache_bytes(config.max_batch_size)
        num_blocks = KVCache.blocks_for_budget(self.config.decoder, kv_cache_bytes, block_size, self.torch_dtype)
        self.cache = KVCache(self.config.decoder, num_blocks, block_size, self.torch_dtype, self.torch_device,
                             prefix_caching=True)
        self.scheduler = Scheduler(config.scheduler_config(), self.cache.allocator)
        self.runner = ModelRunner(self.net, self.cache, self.torch_device,
                                  pad_buckets=on_cuda if config.pad_buckets is None else config.pad_buckets,
                                  cuda_graphs=config.cuda_graphs)
        self.scheduler.before_start = self.runner.encode_if_cached   # a repeated window: match its audio prefix too
        self._requests: dict[int, Request] = {}
        self._owners: dict[int, Callable[[RequestOutput], None]] = {}
        self.last_step_kinds: set[str] = set()     # the row kinds of the last step that ran (diagnostics)

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
    def add_request(self, request: Request, on_output: Callable[[RequestOutput], None] | None = None) -> Request:
        """Queue ``request``; each of its outputs goes to ``on_output`` (its owner), the last with ``finished``."""
        self._requests[request.id] = request
        if on_output is not None:
            self._owners[request.id] = on_output
        self.scheduler.add(request)
        return request

    def abort_request(self, request: Request) -> None:
        """Stop ``request``: its cache is freed and its owner told at the next step (any thread may call)."""
        request.cancel()

    def has_work(self) -> bool:
        return self.scheduler.has_work()

    @property
    def open_requests(self) -> int:
        """Requests added and not yet finished (a finished one is forgotten once its owner is told)."""
        return len(self._requests)

    def waiting_prompt_tokens(self, limit: int) -> int:
        """Prompt tokens queued for prefill, counted up to ``limit`` (the job layer's admission reads this)."""
        waiting = 0
        for request in self.scheduler.waiting:
            waiting += request.num_tokens - request.num_cached
            if waiting >= limit:
                break
        return waiting

    # ---------------------------------------------------------------- the loop
    def step(self) -> list[RequestOutput]:
        """One engine step: schedule rows, run the model once, hand every output to its owner."""
        outputs = self._abort_cancelled()
        rows = self.scheduler.schedule()
        outputs += [RequestOutput(r, [], True, r.error) for r in self.scheduler.take_rejected()]
        if rows:
            outputs += self._run(rows)
        return self._deliver(outputs)

    def _run(self, rows) -> list[RequestOutput]:
        """The model over ``rows``, then the scheduler's postprocess: the outputs of this step's rows."""
        before = {r.request.id: len(r.request.token_ids) for r in rows}
        self.last_step_kinds = {r.kind for r in rows}
        try:
            next_tokens = self.runner.run(rows)
            done = {r.id for r in self.scheduler.postprocess(rows, next_tokens)}
        except Exception as e:  # a crash fails this step's requests only; the engine stays usable
            return self._fail_rows(rows, e)
        outputs = []
        for row in rows:
            req = row.request
            new = req.token_ids[before[req.id]:]
            if new or req.id in done:
                outputs.append(RequestOutput(req, new, req.id in done))
        return outputs

    def _deliver(self, outputs: list[RequestOutput]) -> list[RequestOutput]:
        for out in outputs:
            owner = self._owners.pop(out.request.id, None) if out.finished else self._owners.get(out.request.id)
            if out.finished:
                self._requests.pop(out.request.id, None)
            if owner is not None:
                owner(out)
        return outputs

    def _abort_cancelled(self) -> list[RequestOutput]:
        outputs = []
        for req in [r for r in self._requests.values() if r.cancelled and not r.finished]:
            self.scheduler.release(req)
            req.state, req.finish_reason = RequestState.FINISHED, "cancelled"
            outputs.append(RequestOutput(req, [], True))
        return outputs

    def _fail_rows(self, rows, error: Exception) -> list[RequestOutput]:
        outputs = []
        message = f"engine step failed: {type(error).__name__}: {error}"
        for row in rows:
            req = row.request
            self.scheduler.release(req)
            req.state, req.finish_reason, req.error = RequestState.FINISHED, "error", message
            outputs.append(RequestOutput(req, [], True, message))
        return outputs
