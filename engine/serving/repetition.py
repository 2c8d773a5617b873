"""Repetition guard: stop a request whose last tokens are one n-gram over and over.

A model that loops ("thank you thank you thank you ...") otherwise runs to the
length cap, 48 + 15 tokens per audio second, which is most of a step's time on a
long chunk and a useless transcript. The official qwen-asr package cleans such
text afterwards (a pattern of up to 20 characters repeated 20 times is kept once);
we stop the request as soon as its tail repeats and keep one copy, so the cost is
bounded too. Speech repeats a word or phrase a few times ("no, no, no"); a loop
repeats it many times, so the thresholds below are far from what people say.
"""
from __future__ import annotations

MAX_NGRAM = 16        # longest repeated unit looked for, in tokens
MIN_REPEATS = 8       # a unit must come this many times in a row...
MIN_SPAN = 32         # ...and the repeats cover at least this many tokens (a 1-token unit: 32 times)


def repeats_needed(n: int) -> int:
    """Consecutive copies of an ``n``-token unit that count as a loop."""
    return max(MIN_REPEATS, -(-MIN_SPAN // n))


def repeated_tail(tokens: list[int]) -> tuple[int, int] | None:
    """(unit length, index where the loop starts) when ``tokens`` end in a loop of one unit, else None.

    Cheap enough to run after every token: a unit length is only checked when the
    last token also stands one unit earlier, which ordinary text rarely does."""
    size = len(tokens)
    if size < MIN_SPAN:
        return None
    last = tokens[-1]
    for n in range(1, MAX_NGRAM + 1):
        span = n * repeats_needed(n)
        if span > size:
            break
        if tokens[-1 - n] != last or tokens[size - span + n:] != tokens[size - span:size - n]:
            continue
        start = size - span     # walk back to where the loop began, token by token, so the copy
        while start > 0 and tokens[start - 1] == tokens[start - 1 + n]:   # kept does not depend on
            start -= 1                                                      # the step that noticed it
        return n, start
    return None


def cut_repetition(tokens: list[int]) -> tuple[int, int] | None:
    """If ``tokens`` end in a loop, keep one copy of its unit (in place) and return
    (unit length, copies seen); else None."""
    found = repeated_tail(tokens)
    if found is None:
        return None
    n, start = found
    copies = (len(tokens) - start) // n
    del tokens[start + n:]
    return n, copies
