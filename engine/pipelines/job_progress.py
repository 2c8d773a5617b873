"""A file's progress from the work done inside its chunks, not only from the chunks that finished.

A file's chunks run as one batch and finish at about the same time, so counting a chunk only when it
finishes made progress sit at 10% (the audio read) and then jump to 100%. Here a chunk in flight counts
for the share of its audio times the share of its work done: its prompt (the audio) read into the
cache, then the tokens decoded against the number its speech is expected to need. That count is only
an estimate, so a chunk in flight never counts for more than ``CHUNK_CAP`` of its audio: a chunk that
says more than expected waits there, one that says less catches up when it finishes. The value shown
never goes backwards (a file whose header promised more audio than it held would otherwise step back).
"""
from __future__ import annotations

READ_SHARE = 0.1          # reading and cutting the file: the first tenth of the bar
PREFILL_SHARE = 0.3       # of a chunk's work: its prompt (audio) read into the cache; the rest is decoding
TOKENS_PER_SPEECH_S = 4.5  # what a chunk is expected to say: English speech runs at 3-6 tokens a second...
PREFIX_TOKENS = 5          # ...after "language English<asr_text>"
CHUNK_CAP = 0.95           # a chunk in flight counts for at most this share of its audio
FILE_CAP = 0.99            # and the file is not done until its transcript is


def expected_tokens(speech_seconds: float) -> int:
    """Tokens a chunk with this much speech is expected to decode (prefix included)."""
    return PREFIX_TOKENS + int(TOKENS_PER_SPEECH_S * max(0.0, speech_seconds))


def chunk_fraction(request, speech_seconds: float) -> float:
    """How much of one in-flight chunk's work is done (0..CHUNK_CAP), from its request's counters."""
    prompt = max(1, len(request.prompt_ids))
    prefill = min(1.0, request.num_cached / prompt)
    decoded = len(request.token_ids)
    expected = max(expected_tokens(speech_seconds), decoded + 1)   # never 100% while still decoding
    return min(CHUNK_CAP, PREFILL_SHARE * prefill + (1.0 - PREFILL_SHARE) * decoded / expected)


class ProgressMeter:
    """A file's progress (0..1) from its counters; ``value`` never returns less than it did before."""

    def __init__(self):
        self._shown = 0.0

    def value(self, total_samples: float, read_samples: int, finished_samples: int, in_flight) -> float:
        """``in_flight``: (chunk samples, speech seconds, request) for each chunk not finished."""
        if total_samples <= 0:
            return self._shown
        running = sum(samples * chunk_fraction(req, speech) for samples, speech, req in in_flight)
        now = READ_SHARE * min(1.0, read_samples / total_samples) + \
            (1.0 - READ_SHARE) * min(1.0, (finished_samples + running) / total_samples)
        self._shown = max(self._shown, min(FILE_CAP, now))
        return self._shown
