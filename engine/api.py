"""The public engine: audio in (arrays, files, live streams), transcripts and tokens out.

``Engine`` holds a closed core (``engine.serving.core.EngineCore``: requests in, outputs
out) and the job layer over it (``engine.pipelines.jobs``: file jobs, live streams, the
aligner), and adds what turns audio into requests (features, prompts). It is the port
the jobs use (``engine.pipelines.port.EnginePort``). Create one with ``engine.load``;
every knob is a field of ``EngineConfig``.
"""
from __future__ import annotations

import numbers
import os
from pathlib import Path

import numpy as np

from engine.audio.samples import as_samples
from engine.network.config import audio_token_count
from engine.network.features import SAMPLE_RATE, log_mel, num_frames
from engine.pipelines import arguments as args
from engine.pipelines.admission import FileAdmission
from engine.pipelines.jobs import JobLayer
from engine.pipelines.model_defaults import TranscriptionDefaults, read_transcription_defaults
from engine.serving.config import EngineConfig
from engine.serving.core import EngineCore
from engine.serving.request import Request, RequestOutput
from engine.text.prompt import (
    build_prompt_ids,
    decode_text,
    language_name,
    parse_output,
    prepare_prompts,
)


# How long an idle step waits for a file reader's next block: short, since a live stream's
# audio (fed from another thread) does not wake it.
READER_WAIT_S = 0.05


def default_max_new_tokens(duration: float) -> int:
    """A cap that grows with the clip: fast speech is ~5 tokens/s; a model that never says
    'end' cannot run away."""
    return int(48 + 15 * duration)


class Engine:
    """A loaded Qwen3-ASR model with its scheduler and KV cache. Create with ``engine.load``.

    ``Engine(model_dir, config=EngineConfig(...))``, or the old keyword arguments
    (``max_batch_size=...``, ``use_vad=...``): they become an EngineConfig."""

    def __init__(self, model_dir, *, config: EngineConfig | None = None, **options):
        self.settings = EngineConfig.from_options(config, **options)
        # read before the weights: a broken transcription_defaults.json fails the load at once
        self._model_defaults = read_transcription_defaults(model_dir)
        self.core = EngineCore(model_dir, self.settings)
        self.use_vad = self.settings.use_vad
        self.job_layer = JobLayer(self, FileAdmission(max_decoding=self.settings.decoding_files,
                                                       max_waiting_tokens=self.settings.waiting_tokens))
        self.speaker_model = None       # a GE2E weights path for speaker labels (engine.pipelines.diarize)
        self.speaker_embedder = None    # or an embedder object that replaces it (tests, the app)
        prepare_prompts(self.tokenizer)   # a chat template that never finishes fails the load, not each request

    # ------------------------------------------------- what the core loaded
    model_dir = property(lambda self: self.core.model_dir, doc="the model's folder")
    config = property(lambda self: self.core.config, doc="the network's config (engine.network.config.ModelConfig)")
    tokenizer = property(lambda self: self.core.tokenizer)
    torch_device = property(lambda self: self.core.torch_device)
    torch_dtype = property(lambda self: self.core.torch_dtype)
    device = property(lambda self: self.core.device, doc='"cpu" or "cuda"')
    dtype = property(lambda self: self.core.dtype, doc='"float32", "bfloat16" or "float16"')
    quantize = property(lambda self: self.core.quantize, doc='None or "int8"')
    # The core's parts, for diagnostics and tests; the jobs use the port's members only.
    net = property(lambda self: self.core.net)
    cache = property(lambda self: self.core.cache)
    scheduler = property(lambda self: self.core.scheduler)
    runner = property(lambda self: self.core.runner)

    @property
    def model_defaults(self) -> TranscriptionDefaults:
        """What the model's folder declares for transcription (its transcription_defaults.json), read at load."""
        return self._model_defaults

    @property
    def default_chunk_seconds(self) -> float:
        """The longest chunk of a file when the caller leaves ``max_chunk_seconds`` out (automatic):
        the model's own length (engine.pipelines.model_defaults), 30 s for checkpoints that declare none."""
        return self._model_defaults.max_chunk_seconds

    @property
    def aligner(self):
        """The loaded forced aligner (engine.pipelines.aligner.Aligner), or None; driven by the job layer."""
        return self.job_layer.aligner

    @aligner.setter
    def aligner(self, aligner) -> None:
        self.job_layer.aligner = aligner

    @property
    def jobs(self) -> list:
        """The unfinished file jobs and live streams, oldest first."""
        return self.job_layer.jobs

    @property
    def admission(self) -> FileAdmission:
        """The one queue policy for files: how many decode at once, when more may start."""
        return self.job_layer.admission

    @property
    def hardware(self) -> str:
        """What the model runs on, for a status line: the GPU's name, or the CPU with its bfloat16
        hardware and thread count (``platform.Platform.describe``)."""
        import torch

        if self.torch_device.type == "cuda":
            return torch.cuda.get_device_name(self.torch_device)
        if self.torch_device.type != "cpu":
            return str(self.torch_device)
        from engine.network import platform

        return f"{platform.current().describe()}, {torch.get_num_threads()} threads"

    # ----------------------------------------------------------------- requests
    def make_request(self, audio, *, language=None, context: str = "", max_new_tokens: int | None = None,
                     priority: int = 0, ignore_eos: bool = False, repetition_guard: bool = True,
                     features=None) -> Request:
        """A request for one clip, not yet queued. ``features``: the clip's log-mel when it was
        already computed (a file's reader thread does), else it is computed here."""
        opts = args.check_request_options(language=language, context=context, priority=priority,
                                          max_new_tokens=max_new_tokens)
        language, context, priority, max_new_tokens = (opts["language"], opts["context"], opts["priority"],
                                                       opts["max_new_tokens"])
        samples = as_samples(audio)
        if samples.size == 0:
            raise ValueError("audio is empty (0 samples): nothing to transcribe")
        if features is None:
            features = log_mel(samples)
        elif features.ndim != 2 or features.shape[1] != num_frames(len(samples)):
            raise ValueError(f"features of shape {tuple(features.shape)} do not fit {len(samples)} samples")
        n_audio = audio_token_count(num_frames(len(samples)), self.config.encoder)
        prompt, audio_start = build_prompt_ids(self.tokenizer, n_audio, context=context, language=language)
        duration = len(samples) / SAMPLE_RATE
        if max_new_tokens is not None and max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        return Request(prompt_ids=prompt, audio_start=audio_start, features=features, num_audio_tokens=n_audio,
                       max_new_tokens=max_new_tokens or default_max_new_tokens(duration), priority=priority,
                       eos_token_ids=() if ignore_eos else self.config.eos_token_ids,
                       repetition_guard=repetition_guard and not ignore_eos,
                       language=language_name(language),
                       duration=duration)

    def add_request(self, request: Request, on_output=None) -> Request:
        """Queue a request made by ``make_request``; its outputs go to ``on_output(RequestOutput)``."""
        return self.core.add_request(request, on_output)

    def abort_request(self, request: Request) -> None:
        """Cancel a request; its cache is freed at the next step."""
        self.core.abort_request(request)

    def cache_tokens(self) -> int:
        allocator = self.core.cache.allocator
        return allocator.num_blocks * allocator.block_size

    def waiting_prompt_tokens(self, limit: int) -> int:
        return self.core.waiting_prompt_tokens(limit)

    # ---------------------------------------------------------------- the loop
    def step(self) -> list[RequestOutput]:
        """One engine step: the jobs advance (files decode, streams take audio, the aligner steps),
        then the core runs one model step. Returns the core's outputs."""
        self.job_layer.advance()
        if not self.core.has_work():
            self.job_layer.wait_for_readers(READER_WAIT_S)   # nothing to run: wait for a file's chunks, not spin
        return self.core.step()

    def has_work(self) -> bool:
        """Whether ``step()`` has anything to do (an open live stream waiting for audio is not work)."""
        return self.job_layer.has_work() or self.core.has_work()

    def run_until_done(self, requests: list[Request], progress=None) -> None:
        """Step until every request in ``requests`` finished (others in the queue advance too)."""
        while not all(r.finished for r in requests):
            self.step()
            if progress is not None:
                progress(sum(r.finished for r in requests) / max(1, len(requests)))

    def submit(self, audio, *, language=None, context: str = "", max_new_tokens: int | None = None,
               priority: int = 0, ignore_eos: bool = False, repetition_guard: bool = True) -> Request:
        """Queue one clip (float32 16 kHz samples or a file path); returns at once.

        ``ignore_eos`` makes it generate exactly ``max_new_tokens`` (for benchmarks). The repetition
        guard stops a request that keeps repeating one n-gram (engine.serving.repetition);
        ``repetition_guard=False`` decodes plain greedy to the end token or the cap."""
        if not isinstance(repetition_guard, bool):
            raise ValueError(f"repetition_guard must be True or False, got {repetition_guard!r:.40}")
        return self.add_request(self.make_request(audio, language=language, context=context,
                                                  max_new_tokens=max_new_tokens, priority=priority,
                                                  ignore_eos=ignore_eos, repetition_guard=repetition_guard))

    def submit_file(self, source, *, language=None, context: str = "", word_timestamps: bool = False,
                    priority: int = 0, max_chunk_seconds: float | None = None, speakers=None):
        """Queue a whole file (or an array); returns a FileJob at once. Work happens in ``step()``.

        ``max_chunk_seconds``: the longest chunk; None takes the model's ``default_chunk_seconds``.
        ``speakers``: None (no labels), ``"auto"`` or a count: label who speaks (engine.pipelines.diarize)."""
        from engine.pipelines.file_job import FileJob, array_job

        options = dict(language=args.check_language(language), context=args.check_context(context),
                       word_timestamps=args.check_flag(word_timestamps, "word_timestamps"),
                       priority=args.check_priority(priority),
                       max_chunk_seconds=args.check_max_chunk_seconds(max_chunk_seconds) or self.default_chunk_seconds,
                       use_vad=self.use_vad,
                       read_ahead=self.settings.file_read_ahead, wake=self.job_layer.wake)
        if speakers is not None:
            from engine.text.speakers import check_speakers

            options["speakers"] = check_speakers(speakers)
        if isinstance(source, bytes):
            source = os.fsdecode(source)   # a bytes path, as os functions accept them
        if isinstance(source, (str, Path)):
            job = FileJob(self, source, **options)
        else:
            job = array_job(self, as_samples(source), **options)
        return self.job_layer.add(job)

    def submit_stretch_alignment(self, source, start: float, end: float, text: str, *, language=None):
        """Queue word times for ``text`` spoken from ``start`` to ``end`` s of ``source`` (a path, or the
        whole recording's samples) with the loaded aligner; returns a StretchAlignmentJob at once.

        For a transcript line whose words were edited: the stretch is read on a thread, aligned beside
        the files and streams in ``step()``, and checked as ``engine.text.stretch_alignment.align_stretch``
        checks it; the job's ``result`` (once ``finished``) holds the words or why there are none."""
        from engine.pipelines.stretch_job import StretchAlignmentJob

        if self.aligner is None:
            raise ValueError("no forced aligner is loaded (engine.load(..., aligner=FOLDER)): nothing can "
                             "time these words")
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) \
                    or value < 0:
                raise ValueError(f"{name} must be a number of seconds, 0 or more, got {value!r:.40}")
        if end < start:
            raise ValueError(f"end ({end:g} s) is before start ({start:g} s)")
        if not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if isinstance(source, bytes):
            source = os.fsdecode(source)
        if not isinstance(source, (str, Path)):
            source = as_samples(source)
        job = StretchAlignmentJob(self.aligner, source, float(start), float(end), text, language,
                                  wake=self.job_layer.wake)
        return self.job_layer.add_alignment(job)
    def reorder_files(self, jobs) -> None:
        """Put these file jobs (from ``submit_file``) in this order in the engine's queue: they take
        the places they hold now, in the given order. Waiting files start in queue order (within a
        priority: engine.pipelines.admission), so a UI's reordered queue is the engine's."""
        self.job_layer.reorder(list(jobs))

    def open_stream(self, *, language=None, context: str = "", **options):
        """A live stream: ``feed()`` samples, read ``committed`` and ``tentative``; see engine.pipelines.live_stream.

        Options left out take the engine's stream defaults (``EngineConfig.stream``)."""
        from engine.pipelines.live_stream import Stream

        options = {**self.settings.stream.options(), **options}
        stream = Stream(self, language=args.check_language(language), context=args.check_context(context),
                        **options)
        return self.job_layer.add(stream)

    # ------------------------------------------------------------- conveniences
    def generate(self, audios, *, language=None, context: str = "", max_new_tokens: int | None = None,
                 repetition_guard: bool = True) -> list[list[int]]:
        """Greedy token ids per clip, up to and including the first end token.

        Token for token what transformers' greedy ``generate`` gives, except that by default a clip
        whose decoding loops on one n-gram is stopped early (the repetition guard, as the official
        package does); ``repetition_guard=False`` gives exact parity in every case."""
        if isinstance(audios, (str, bytes, Path, np.ndarray)):
            audios = [audios]
        if not isinstance(audios, (list, tuple)) or not audios:
            raise ValueError("audios must be a path, an array of samples, or a non-empty list of them, "
                             f"got {audios!r:.80}")
        requests = [self.submit(a, language=language, context=context, max_new_tokens=max_new_tokens,
                                repetition_guard=repetition_guard) for a in audios]
        self.run_until_done(requests)
        for r in requests:
            if r.error:
                raise RuntimeError(r.error)
        return [list(r.token_ids) for r in requests]

    def decode(self, request: Request) -> tuple[str | None, str]:
        """(language, text) of a finished request."""
        return parse_output(decode_text(self.tokenizer, request.token_ids), request.language)

    def transcribe(self, audio, *, language=None, context: str = "", word_timestamps: bool = False,
                   progress=None, max_chunk_seconds: float | None = None, speakers=None):
        """Transcribe a whole file or array; its speech chunks run as one batch. Returns a Transcript.

        ``speakers="auto"`` or a count labels every segment and word with its speaker."""
        args.check_progress(progress)
        job = self.submit_file(audio, language=language, context=context, word_timestamps=word_timestamps,
                               max_chunk_seconds=max_chunk_seconds, speakers=speakers)
        while not job.finished:
            self.step()
            if progress is not None:
                progress(job.progress)
        if job.state == "failed":
            raise RuntimeError(job.error)
        return job.transcript


def load(model_dir, device=None, dtype=None, *, aligner=None, config: EngineConfig | None = None,
         **engine_options) -> Engine:
    """Load a Qwen3-ASR checkpoint folder (either published layout) into an Engine.

    device defaults to CUDA when available, else CPU; dtype to bfloat16 on CUDA and
    float32 on CPU. ``aligner`` is an optional Qwen3-ForcedAligner folder for word times.
    ``config`` (an EngineConfig) holds every other knob; ``device``, ``dtype`` and keyword
    arguments named like its fields override it.
    """
    from engine.network.model_kind import ALIGNER, ASR, check_kind_if_readable
    from engine.network.openmp_team import release_team

    if device is not None:
        engine_options["device"] = device
    if dtype is not None:
        engine_options["dtype"] = dtype
    settings = EngineConfig.from_options(config, **engine_options)   # bad knobs fail before anything loads
    check_kind_if_readable(model_dir, ASR)   # an aligner given as the model fails here, plainly
    if aligner is not None:
        check_kind_if_readable(aligner, ALIGNER)
    eng = Engine(model_dir, config=settings)
    if aligner is not None:
        from engine.pipelines.aligner import Aligner

        eng.aligner = Aligner(aligner, device=eng.torch_device, dtype=eng.torch_dtype)
    # this thread may hand the engine to another one (the server's, the app's): leave no OpenMP team behind
    release_team()
    return eng


def load_aligner(aligner_dir, device=None, dtype=None):
    """Load a Qwen3-ForcedAligner checkpoint folder; see ``Aligner.align``."""
    from engine.network.openmp_team import release_team
    from engine.pipelines.aligner import Aligner

    aligner = Aligner(aligner_dir, device=device, dtype=dtype)
    release_team()      # as engine.load: the thread that steps it may be another
    return aligner
