"""Whole-file transcription: cut into chunks, run them as one batch, map times back."""
from __future__ import annotations

from collections import Counter

import numpy as np

from .chunking import split_at_quiet_points
from .features import SAMPLE_RATE
from .types import Segment, Transcript

DEFAULT_CHUNK_SECONDS = 30.0


def plan_spans(samples: np.ndarray, max_chunk_seconds: float, use_vad: bool) -> list[tuple[int, int]]:
    """Sample ranges to transcribe: speech chunks from Silero VAD, or quiet-point cuts."""
    if use_vad:
        from .vad import SpeechDetector, chunk_audio

        return [(c.start, c.end) for c in chunk_audio(samples, SpeechDetector.shared(), max_chunk_s=max_chunk_seconds)]
    return split_at_quiet_points(samples, max_chunk_seconds)


def segments_from_requests(engine, spans, requests) -> list[Segment]:
    segments = []
    for (start, end), req in zip(spans, requests):
        if req.error:
            raise RuntimeError(req.error)
        language, text = engine.decode(req)
        if text:
            segments.append(Segment(start=start / SAMPLE_RATE, end=end / SAMPLE_RATE, text=text, language=language))
    return segments


def make_transcript(segments: list[Segment], duration: float, model: str, words_note: str = "") -> Transcript:
    languages = Counter(s.language for s in segments if s.language)
    return Transcript(
        text=" ".join(s.text for s in segments).strip(),
        language=languages.most_common(1)[0][0] if languages else None,
        duration=duration, segments=segments, model=model, words_note=words_note,
    )


def transcribe_samples(engine, samples: np.ndarray, *, language=None, context: str = "",
                       word_timestamps: bool = False, progress=None, max_chunk_seconds=None,
                       source: str = "", use_vad: bool | None = None) -> Transcript:
    aligning = word_timestamps and engine.aligner is not None
    max_chunk = max_chunk_seconds or DEFAULT_CHUNK_SECONDS
    if use_vad is None:
        use_vad = getattr(engine, "use_vad", False)
    spans = plan_spans(samples, max_chunk, use_vad)
    requests = [engine.submit(samples[a:b], language=language, context=context) for a, b in spans]
    engine.run_until_done(requests, progress)
    segments = segments_from_requests(engine, spans, requests)
    note = ""
    if word_timestamps:
        from .words import add_word_timestamps

        note = add_word_timestamps(engine, samples, segments) if aligning else \
            "No aligner model is configured, so words have no timestamps."
    return make_transcript(segments, len(samples) / SAMPLE_RATE, engine.model_dir, note)
