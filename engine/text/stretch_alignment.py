"""Word times for one stretch of audio whose text is known: a segment the user edited.

A file job aligns its sentences as they are recognised (engine.pipelines.sentence_alignment). An
edit changes a segment's words after that; the new words are timed by the same loaded aligner over
the segment's own audio, through the aligner's public ``align``, and checked by
engine.text.alignment_check like any other alignment. Text layer: the aligner comes in as an object
(``align(samples, text, language=...)`` and ``config.timestamp_segment_ms``), nothing is imported
from the serving or pipeline layers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.text.alignment_check import alignment_problem, widen_instant_words
from engine.text.prompt import ALIGNER_LANGUAGES
from engine.text.types import Word
from engine.text.word_split import display_spans
from engine.text.words import aligner_supports

SAMPLE_RATE = 16000   # the aligner's input rate (engine.network.features.SAMPLE_RATE)


@dataclass
class StretchWords:
    """The outcome of aligning one stretch.

    words: the text's words (punctuation kept) with file times inside the stretch, in order; empty
        when the alignment was refused or could not run.
    problem: why there are no words ('' when there are)."""

    words: list[Word] = field(default_factory=list)
    problem: str = ""


def align_stretch(aligner, samples: np.ndarray, start: float, text: str, language: str | None = None,
                  speech=None) -> StretchWords:
    """Checked word times for ``text`` spoken in ``samples`` (16 kHz), which begin ``start`` s into the file.

    ``speech``: the VAD's (start, end) speech islands in file time, for the checks (words crowded
    together or in silence). An alignment that fails a check, or an aligner that raises, gives no
    words and says why: the caller keeps its estimated times. Never raises for bad audio or text.
    Steps the aligner alone (``aligner.align``); engine.pipelines.stretch_job runs the same steps
    as a job beside the engine's other work."""
    problem = stretch_problem(samples, text, language)
    if problem:
        return StretchWords(problem=problem)
    try:
        aligned = aligner.align(samples, text, language=aligner_language(language))
    except Exception as exc:
        return aligner_failure(exc)
    return checked_stretch(aligner, aligned, samples, start, text, speech)


def stretch_problem(samples: np.ndarray, text: str, language: str | None) -> str:
    """Why this stretch cannot be aligned at all ('' when it can be tried)."""
    if not text.strip():
        return "the text is empty"
    if not aligner_supports(language):
        return f"the aligner does not support {language}"
    if len(samples) / SAMPLE_RATE < 0.1:
        return "the audio is too short"
    return ""


def aligner_language(language: str | None) -> str | None:
    """The language to split words by: the segment's, where the aligner knows it."""
    return language if language in ALIGNER_LANGUAGES else None


def aligner_failure(exc: Exception) -> StretchWords:
    """An aligner that raised: the words stay estimated, and the reason is said."""
    if isinstance(exc, ImportError):   # Japanese/Korean word splitters are optional packages
        return StretchWords(problem=str(exc))
    return StretchWords(problem=f"the aligner failed: {exc}")   # a failed alignment never costs the text


def checked_stretch(aligner, aligned: list[Word], samples: np.ndarray, start: float, text: str,
                    speech=None) -> StretchWords:
    """The aligner's words (times in seconds of ``samples``) as the text's words in file time, checked
    (engine.text.alignment_check) and with instant words widened to one time class."""
    if not aligned:
        return StretchWords(problem="the text has no words to align")
    duration = len(samples) / SAMPLE_RATE
    words = []
    for piece, w in zip(display_spans(text, [w.text for w in aligned]), aligned):
        a = min(duration, max(0.0, float(w.start)))
        b = min(duration, max(a, float(w.end)))
        words.append(Word(piece, round(start + a, 3), round(start + b, 3)))
    problem = alignment_problem(words, speech)
    if problem:
        return StretchWords(problem=problem)
    step_ms = aligner.config.timestamp_segment_ms or 80.0
    widen_instant_words(words, step_ms / 1000.0)
    end = round(start + duration, 3)
    for w in words:              # widening never reaches past the stretch
        w.end = min(w.end, end)
    return StretchWords(words=words)
