"""A live transcription session: engine streams turned into OpenAI realtime-transcription events.

Lives on the engine thread (``EngineRunner`` opens it, feeds it between steps and
calls ``poll()`` after each step); ``emit`` hands each event to the WebSocket side
thread-safely. An utterance is an *item*: ``input_audio_buffer.speech_started`` when
its first update runs, ``conversation.item.input_audio_transcription.delta`` as the
text the last two updates agree on grows, ``speech_stopped`` and ``committed`` when it
ends, ``...completed`` (with our ``start``/``end`` seconds) when its final pass is done.
``commit`` ends the open utterance now: the stream is closed (its finals complete)
and a new one continues the session with the committed text as context.
"""
from __future__ import annotations

import itertools
from typing import Callable

from engine.network.features import SAMPLE_RATE

MANUAL_SILENCE_S = 1e6      # turn_detection null: only commit (or the longest-utterance cut) ends one
_item_ids = itertools.count(1)


class LiveSession:
    """One client's live session. ``options``: language, prompt (context), silence_s (None: manual turns)."""

    def __init__(self, emit: Callable[[dict], None], *, language=None, prompt: str = "", silence_s: float | None = 0.5,
                 max_utterance_s: float = 20.0):
        self.emit = emit
        self.language, self.prompt, self.silence_s = language, prompt, silence_s
        self.max_utterance_s = max_utterance_s
        self.engine = None
        self._streams: list = []          # the current stream last; earlier ones are finishing their finals
        self._numbers = itertools.count()      # streams of this session, numbered
        self._offsets: dict[int, float] = {}   # stream number -> session seconds where it starts
        self._items: dict[tuple, str] = {}     # (stream number, start sample) -> item id
        self._finals: dict[int, list] = {}     # stream number -> [(item id, start s, end s)] awaiting their text
        self._open_item: tuple | None = None   # (stream, item id) of the utterance being spoken
        self._sent: dict[str, str] = {}        # item id -> text sent as deltas
        self._tentative = ""
        self._last_item: str | None = None
        self._fed = 0                          # samples fed to the session
        self._recent = ""                      # committed text, for the next stream's context
        self._closed = False
        self.audio_seconds = 0.0
        self.completed = 0

    # --------------------------------------------------------- engine thread
    def open(self, engine) -> None:
        self.engine = engine
        self._new_stream()

    @property
    def finished(self) -> bool:
        return self._closed and all(s.finished for s in self._streams)

    def feed(self, samples) -> None:
        if not self._closed:
            self._streams[-1].feed(samples)
            self._fed += len(samples)

    def commit(self) -> None:
        """End the open utterance here (manual turns, or a client that knows better than the VAD)."""
        if self._closed:
            return
        self._streams[-1].close()
        self._new_stream()

    def clear(self) -> None:
        """Drop audio not yet transcribed: the current stream is cancelled, a new one takes the audio after."""
        if self._closed:
            return
        current = self._streams[-1]
        current.cancel()
        self._open_item = None
        self._new_stream()

    def close(self) -> None:
        """End of the session's audio: the finals still run, then the session is finished."""
        if not self._closed:
            self._streams[-1].close()
            self._closed = True

    close_for_shutdown = close

    def cancel_now(self) -> None:
        """The client is gone: stop every stream (their cache blocks go at the next step)."""
        for stream in self._streams:
            stream.cancel()
        self._closed = True

    def poll(self) -> None:
        """After a step: deltas of the open utterance, tentative text, errors; drop finished streams."""
        if self._open_item is not None:
            stream, item = self._open_item
            stable, sent = stream.stable_prefix, self._sent.get(item, "")
            if len(stable) > len(sent) and stable.startswith(sent):
                self._delta(item, stable[len(sent):])
        tentative = " ".join(s.tentative for s in self._streams if s.tentative)
        if tentative != self._tentative:
            self._tentative = tentative
            lag = max((s.lag_seconds for s in self._streams), default=0.0)
            self.emit({"type": "conversation.item.input_audio_transcription.tentative", "text": tentative,
                       "lag_seconds": round(lag, 2)})
        for stream in list(self._streams):
            current = stream is self._streams[-1]
            if stream.finished and (not current or self._closed):
                self.audio_seconds += stream.duration
                self._streams.remove(stream)
            elif stream.state == "failed" and current:   # report it; the session goes on with a new stream
                self.emit(_error("server_error", "stream_failed", stream.error or "live transcription failed"))
                self._open_item = None
                self._new_stream()

    # -------------------------------------------------------------- internals
    def _new_stream(self) -> None:
        context = "\n".join(p for p in (self.prompt, self._recent[-200:]) if p)
        silence = self.silence_s if self.silence_s is not None else MANUAL_SILENCE_S
        n = next(self._numbers)
        stream = self.engine.open_stream(language=self.language, context=context, min_silence_s=silence,
                                         max_utterance_s=self.max_utterance_s, recent_context_chars=200,
                                         word_timestamps=False)
        self._offsets[n] = self._fed / SAMPLE_RATE
        self._finals[n] = []
        stream.on_request = lambda kind, request, span: self._on_request(n, stream, kind, span)
        stream.on_final = lambda final: self._on_final(n, final)
        self._streams.append(stream)

    def _seconds(self, n: int, sample: int) -> float:
        return round(self._offsets[n] + sample / SAMPLE_RATE, 3)

    def _item(self, n: int, start: int) -> str:
        key = (n, start)
        if key not in self._items:
            item = f"item_{next(_item_ids):06d}"
            self._items[key] = item
            self.emit({"type": "input_audio_buffer.speech_started", "item_id": item,
                       "audio_start_ms": int(self._seconds(n, start) * 1000)})
        return self._items[key]

    def _on_request(self, n: int, stream, kind: str, span: tuple[int, int]) -> None:
        item = self._item(n, span[0])
        if kind == "update":
            self._open_item = (stream, item)
            return
        if self._open_item is not None and self._open_item[1] == item:
            self._open_item = None
        end = self._seconds(n, span[1])
        self.emit({"type": "input_audio_buffer.speech_stopped", "item_id": item, "audio_end_ms": int(end * 1000)})
        self.emit({"type": "input_audio_buffer.committed", "item_id": item, "previous_item_id": self._last_item})
        self._last_item = item
        self._finals[n].append((item, self._seconds(n, span[0]), end))

    def _on_final(self, n: int, final) -> None:
        pending = self._finals[n]
        if not pending:
            return
        item, start, _ = pending.pop(0)
        self._items = {k: v for k, v in self._items.items() if v != item}
        segment = final.segment
        text = segment.text if segment is not None else ""
        sent = self._sent.pop(item, "")
        if text.startswith(sent) and len(text) > len(sent):
            self._delta(item, text[len(sent):], remember=False)
        if text:
            self._recent = (self._recent + " " + text).strip()[-400:]
        self.completed += 1
        self.emit({"type": "conversation.item.input_audio_transcription.completed", "item_id": item,
                   "content_index": 0, "transcript": text,
                   "start": start, "end": self._seconds(n, final.end),
                   "language": (segment.language or "").lower() or None if segment is not None else None})

    def _delta(self, item: str, delta: str, remember: bool = True) -> None:
        if remember:
            self._sent[item] = self._sent.get(item, "") + delta
        self.emit({"type": "conversation.item.input_audio_transcription.delta", "item_id": item,
                   "content_index": 0, "delta": delta})


def _error(kind: str, code: str, message: str, event_id: str | None = None) -> dict:
    return {"type": "error", "error": {"type": kind, "code": code, "message": message, "param": None,
                                       "event_id": event_id}}
