"""The public engine: audio in (arrays, files, live streams), transcripts and tokens out.

``Engine`` adds to the step loop of ``engine.serving.core`` what turns audio into
requests (features, prompts) and the pipelines that run on it (file jobs, live
streams, word timestamps). Create one with ``engine.load``.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engine.audio.samples import as_samples
from engine.network.config import audio_token_count
from engine.network.features import SAMPLE_RATE, log_mel, num_frames
from engine.pipelines import arguments as args
from engine.serving.core import EngineCore
from engine.serving.request import Request
from engine.text.prompt import (
    build_prompt_ids,
    decode_text,
    language_name,
    parse_output,
    prepare_prompts,
)


def default_max_new_tokens(duration: float) -> int:
    """A cap that grows with the clip: fast speech is ~5 tokens/s; a model that never says
    'end' cannot run away."""
    return int(48 + 15 * duration)


class Engine(EngineCore):
    """A loaded Qwen3-ASR model with its scheduler and KV cache. Create with ``engine.load``."""

    def __init__(self, model_dir, *, use_vad: bool = True, **options):
        super().__init__(model_dir, **options)
        self.use_vad = use_vad
        prepare_prompts(self.tokenizer)   # a chat template that never finishes fails the load, not each request

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
                     priority: int = 0, ignore_eos: bool = False, repetition_guard: bool = True) -> Request:
        opts = args.check_request_options(language=language, context=context, priority=priority,
                                          max_new_tokens=max_new_tokens)
        language, context, priority, max_new_tokens = (opts["language"], opts["context"], opts["priority"],
                                                       opts["max_new_tokens"])
        samples = as_samples(audio)
        if samples.size == 0:
            raise ValueError("audio is empty (0 samples): nothing to transcribe")
        features = log_mel(samples)
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

        ``speakers``: None (no labels), ``"auto"`` or a count: label who speaks (engine.pipelines.diarize)."""
        from engine.pipelines.file_job import FileJob, array_job

        options = dict(language=args.check_language(language), context=args.check_context(context),
                       word_timestamps=args.check_flag(word_timestamps, "word_timestamps"),
                       priority=args.check_priority(priority),
                       max_chunk_seconds=args.check_max_chunk_seconds(max_chunk_seconds), use_vad=self.use_vad)
        if speakers is not None:
            from engine.text.speakers import check_speakers

            options["speakers"] = check_speakers(speakers)
        if isinstance(source, bytes):
            source = os.fsdecode(source)   # a bytes path, as os functions accept them
        if isinstance(source, (str, Path)):
            job = FileJob(self, source, **options)
        else:
            job = array_job(self, as_samples(source), **options)
        self._jobs.append(job)
        return job

    def open_stream(self, *, language=None, context: str = "", **options):
        """A live stream: ``feed()`` samples, read ``committed`` and ``tentative``; see engine.pipelines.live_stream."""
        from engine.pipelines.live_stream import Stream

        stream = Stream(self, language=args.check_language(language), context=args.check_context(context),
                        **options)
        self._jobs.append(stream)
        return stream

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


def load(model_dir, device=None, dtype=None, *, aligner=None, **engine_options) -> Engine:
    """Load a Qwen3-ASR checkpoint folder (either published layout) into an Engine.

    device defaults to CUDA when available, else CPU; dtype to bfloat16 on CUDA and
    float32 on CPU. ``aligner`` is an optional Qwen3-ForcedAligner folder for word times.
    """
    from engine.network.model_kind import ALIGNER, ASR, check_kind_if_readable

    check_kind_if_readable(model_dir, ASR)   # an aligner given as the model fails here, plainly
    if aligner is not None:
        check_kind_if_readable(aligner, ALIGNER)
    eng = Engine(model_dir, device=device, dtype=dtype, **engine_options)
    if aligner is not None:
        from engine.pipelines.aligner import Aligner

        eng.aligner = Aligner(aligner, device=eng.torch_device, dtype=eng.torch_dtype)
    return eng
