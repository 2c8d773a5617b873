"""Transcripts as the response formats OpenAI's transcription endpoint gives: json, text, srt, vtt, verbose_json.

verbose_json carries OpenAI's fields plus a few of ours (per-segment ``words``,
``timing``, ``speaker``; ``notes``, ``words_note``, ``model``), enough to rebuild the
Transcript on the client side (``server.client.transcript_from_verbose``).
"""
from __future__ import annotations

import math

from engine.text.exports import to_srt, to_vtt
from engine.text.types import Transcript

RESPONSE_FORMATS = ("json", "text", "srt", "vtt", "verbose_json")
MEDIA_TYPES = {"json": "application/json", "verbose_json": "application/json", "text": "text/plain",
               "srt": "application/x-subrip", "vtt": "text/vtt"}


def usage(transcript: Transcript) -> dict:
    """OpenAI's duration usage: whole seconds of audio, rounded up."""
    return {"type": "duration", "seconds": int(math.ceil(transcript.duration or 0.0))}


def language_out(language: str | None) -> str | None:
    """OpenAI names languages in lower case ("english")."""
    return language.lower() if language else language


def verbose(transcript: Transcript, *, words: bool) -> dict:
    segments = []
    for i, seg in enumerate(transcript.segments):
        segments.append({
            "id": i, "seek": 0, "start": round(seg.start, 3), "end": round(seg.end, 3), "text": seg.text,
            "tokens": [], "temperature": 0.0, "avg_logprob": 0.0, "compression_ratio": 0.0, "no_speech_prob": 0.0,
            # ours
            "language": language_out(seg.language), "timing": seg.timing, "speaker": seg.speaker,
            "words": [{"word": w.text, "start": round(w.start, 3), "end": round(w.end, 3), "speaker": w.speaker}
                      for w in seg.words],
        })
    body = {"task": "transcribe", "language": language_out(transcript.language),
            "duration": round(transcript.duration, 3), "text": transcript.text, "segments": segments,
            "usage": usage(transcript), "model": transcript.model, "notes": list(transcript.notes),
            "words_note": transcript.words_note}
    if words:
        body["words"] = [w for s in segments for w in s["words"]]
    return body


def render(transcript: Transcript, response_format: str, *, words: bool = False):
    """The response body: a dict for the JSON formats, text for the others."""
    if response_format == "json":
        return {"text": transcript.text, "usage": usage(transcript)}
    if response_format == "verbose_json":
        return verbose(transcript, words=words)
    if response_format == "text":
        return transcript.text + "\n"
    if response_format == "srt":
        return to_srt(transcript)
    if response_format == "vtt":
        return to_vtt(transcript)
    raise ValueError(f"unknown response_format {response_format!r}; choose from {', '.join(RESPONSE_FORMATS)}")
