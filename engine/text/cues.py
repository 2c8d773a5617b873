"""Subtitle cues: a transcript's words grouped into readable, well-timed blocks.

``build_cues`` turns a :class:`~engine.text.types.Transcript` into on-screen cues
for SRT and WebVTT. Cues break preferably at sentence ends, then at clause
marks or pauses, then where the lines are full; each cue holds at most
``max_lines`` lines of ``max_line_chars`` characters and stays on screen
between ``min_duration`` and ``max_duration`` seconds where the neighbouring
cues allow it. Segments without word times (no aligner ran) are cut into
chunks whose times are shared out by character count. Text without spaces
(Chinese, Japanese) wraps between characters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from engine.text.joining import (
    BREAK_CLAUSE,
    BREAK_PLAIN,
    BREAK_SENTENCE,
    PAUSE_BREAK,
    break_score,
    clean_text,
    glue,
    is_cjk,
    split_cjk,
)
from engine.text.types import Transcript, Word


@dataclass
class CueOptions:
    """Layout and timing rules for subtitle cues.

    Attributes:
        max_line_chars: most characters on one line.
        max_lines: most lines in one cue.
        min_duration: seconds a cue should stay on screen at least.
        max_duration: seconds a cue may stay on screen at most.
        min_gap: seconds kept free between one cue's end and the next start.
        max_gap: a silence longer than this between two words always ends a cue.
    """

    max_line_chars: int = 42
    max_lines: int = 2
    min_duration: float = 1.0
    max_duration: float = 7.0
    min_gap: float = 0.08
    max_gap: float = 1.5

    def __post_init__(self):
        for name in ("max_line_chars", "max_lines"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        for name in ("min_duration", "max_duration", "min_gap", "max_gap"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0 seconds, got {value!r}")
        if self.max_duration <= 0 or self.max_gap <= 0:
            raise ValueError("max_duration and max_gap must be > 0 seconds")
        if self.min_duration > self.max_duration:
            raise ValueError(f"min_duration ({self.min_duration}) must not exceed "
                             f"max_duration ({self.max_duration})")


@dataclass
class Cue:
    """One subtitle block.

    Attributes:
        start: when it appears, in seconds.
        end: when it disappears, in seconds.
        lines: the text lines shown, at most ``max_lines`` of them.
        words: the timed words it shows, or an empty list when the segment had
            no word times (then the cue times are estimates).
    """

    start: float
    end: float
    lines: list[str]
    words: list[Word] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The cue text as displayed: its lines joined by newlines."""
        return "\n".join(self.lines)


@dataclass
class _Tok:
    text: str
    start: float
    end: float
    seg: int
    timed: bool
    glue: str = " "
    score: int = BREAK_PLAIN


def _finite(value, default: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def _spread(pieces: list[str], start: float, end: float, seg: int, timed: bool) -> list[_Tok]:
    """Tokens for ``pieces`` sharing ``[start, end]`` in proportion to their length."""
    total = sum(len(p) for p in pieces) or 1
    toks, pos = [], 0
    for piece in pieces:
        a = min(end, start + (end - start) * pos / total)
        pos += len(piece)
        toks.append(_Tok(piece, a, min(end, start + (end - start) * pos / total), seg, timed))
    return toks


def _segment_tokens(transcript: Transcript, opts: CueOptions) -> list[_Tok]:
    """All tokens of the transcript in time order, with glue and break scores."""
    toks: list[_Tok] = []
    segments = sorted(transcript.segments, key=lambda s: _finite(s.start, 0.0))
    for n, seg in enumerate(segments):
        s0, s1 = _finite(seg.start, 0.0), _finite(seg.end, 0.0)
        words = [(clean_text(w.text), w) for w in seg.words]
        words = [(t, w) for t, w in words if t]
        seg_toks: list[_Tok] = []
        if words:
            for text, w in words:
                a, b = _finite(w.start, s0), _finite(w.end, s1)
                if len(text) > opts.max_line_chars and any(is_cjk(c) for c in text):
                    seg_toks += _spread(split_cjk(text), a, max(a, b), n, True)
                else:
                    seg_toks.append(_Tok(text, a, b, n, True))
        else:
            for chunk in clean_text(seg.text).split():
                pieces = split_cjk(chunk) if any(is_cjk(c) for c in chunk) else [chunk]
                glues = [" "] + [""] * (len(pieces) - 1)
                seg_toks += [_Tok(p, 0.0, 0.0, n, False, g) for p, g in zip(pieces, glues)]
            spread = _spread([t.glue + t.text for t in seg_toks], s0, max(s0, s1), n, False)
            for tok, timed in zip(seg_toks, spread):
                tok.start, tok.end = timed.start, timed.end
        if seg_toks:
            seg_toks[-1].score = BREAK_SENTENCE
        toks += seg_toks
    toks = _attach_punctuation(toks, opts)
    for prev, tok in zip(toks, toks[1:]):
        if tok.timed:
            tok.glue = glue(prev.text, tok.text)
    return toks


_TRAILING = frozenset(".,!?;:\u2026\u3002\uff01\uff1f\uff0c\u3001)]}\u00bb\u201d\u2019\"'")


def _has_word(text: str) -> bool:
    """False for a token of marks that only end or close something ("!", ",", "?\u201d")."""
    return not all(c in _TRAILING for c in text)


def _attach_punctuation(toks: list[_Tok], opts: CueOptions) -> list[_Tok]:
    """Punctuation standing alone ("!", a stray comma) joins the word before it, so no cue is only
    punctuation; with no word before, it is left out (a transcript rarely starts with ", ")."""
    out: list[_Tok] = []
    for tok in toks:
        if _has_word(tok.text):
            out.append(tok)
        elif out:
            prev = out[-1]
            prev.text += tok.text
            prev.score = max(prev.score, tok.score)
            if tok.start - prev.end <= opts.max_gap:
                prev.end = max(prev.end, tok.end)
    return out


def _time_limit(transcript: Transcript, toks: list[_Tok]) -> float:
    """The latest time a cue may reach: the audio duration, else the last token end."""
    duration = _finite(transcript.duration, 0.0)
    if duration > 0:
        return duration
    return max([0.0] + [t.end for t in toks] + [t.start for t in toks])


def _sanitize(toks: list[_Tok], limit: float) -> None:
    """Clamp times into ``[0, limit]``, make starts monotonic and score pauses."""
    floor = 0.0
    for tok in toks:
        tok.start = min(max(tok.start, floor), limit)
        tok.end = min(max(tok.end, tok.start), limit)
        floor = tok.start
    for tok, nxt in zip(toks, toks[1:]):
        tok.score = max(tok.score, break_score(tok.text))
        if tok.score < BREAK_CLAUSE and nxt.start - tok.end >= PAUSE_BREAK:
            tok.score = BREAK_CLAUSE
    if toks:
        toks[-1].score = BREAK_SENTENCE


def _runs(toks: list[_Tok], opts: CueOptions) -> list[list[_Tok]]:
    """Split tokens where no cue may span: long silences, and where word times start or stop."""
    runs: list[list[_Tok]] = []
    for tok in toks:
        prev = runs[-1][-1] if runs else None
        if prev is None or tok.timed != prev.timed or tok.start - prev.end > opts.max_gap:
            runs.append([tok])
        else:
            runs[-1].append(tok)
    return runs


def _join(toks: list[_Tok]) -> str:
    return "".join((t.glue if i else "") + t.text for i, t in enumerate(toks))


def _wrap(toks: list[_Tok], width: int) -> list[list[_Tok]]:
    """Greedy line filling; a token longer than ``width`` gets a line of its own."""
    lines: list[list[_Tok]] = []
    used = 0
    for tok in toks:
        if lines and lines[-1] and used + len(tok.glue) + len(tok.text) <= width:
            lines[-1].append(tok)
            used += len(tok.glue) + len(tok.text)
        else:
            lines.append([tok])
            used = len(tok.text)
    return lines


def _balanced_lines(toks: list[_Tok], width: int) -> list[str]:
    """The fewest lines greedy wrapping needs, with lengths made as even as possible."""
    count = len(_wrap(toks, width))
    total = len(_join(toks))
    for w in range(max(1, math.ceil(total / count)), width + 1):
        lines = _wrap(toks, w)
        if len(lines) <= count:
            return [_join(line) for line in lines]
    return [_join(line) for line in _wrap(toks, width)]


def _fits(toks: list[_Tok], opts: CueOptions) -> bool:
    if len(toks) <= 1:
        return True
    if toks[-1].end - toks[0].start > opts.max_duration:
        return False
    return len(_wrap(toks, opts.max_line_chars)) <= opts.max_lines


def _best_break(toks: list[_Tok]) -> int:
    """Where to cut an overfull cue: after the last clause in its second half, else at its end."""
    half = len(_join(toks)) / 2
    for j in range(len(toks), 0, -1):
        if toks[j - 1].score >= BREAK_CLAUSE and len(_join(toks[:j])) >= half:
            return j
    return len(toks)


def _group(run: list[_Tok], opts: CueOptions) -> list[list[_Tok]]:
    """Cut one run of tokens into cue-sized groups."""
    groups: list[list[_Tok]] = []
    cur: list[_Tok] = []
    for tok in run:
        if cur and cur[-1].score == BREAK_SENTENCE:
            short = (cur[-1].end - cur[0].start < opts.min_duration
                     and len(_join(cur)) < opts.max_line_chars // 2)
            if not (short and tok.start - cur[-1].end < PAUSE_BREAK and _fits(cur + [tok], opts)):
                groups.append(cur)
                cur = []
        while cur and not _fits(cur + [tok], opts):
            j = _best_break(cur)
            groups.append(cur[:j])
            cur = cur[j:]
        cur.append(tok)
    if cur:
        groups.append(cur)
    return _join_small(groups, opts)


def _join_small(groups: list[list[_Tok]], opts: CueOptions) -> list[list[_Tok]]:
    """A one-word group, or one whose neighbours leave it no room for ``min_duration`` on screen,
    joins the nearer neighbour (in time) when the joined cue still fits the line and duration rules."""
    i = 0
    while i < len(groups):
        group = groups[i]
        prev_end = groups[i - 1][-1].end if i else -math.inf
        next_start = groups[i + 1][0].start if i + 1 < len(groups) else math.inf
        room = (next_start - opts.min_gap) - (prev_end + opts.min_gap)
        joined = False
        if len(group) == 1 or room < opts.min_duration:
            sides = []
            if i:
                sides.append((group[0].start - prev_end, i - 1))
            if i + 1 < len(groups):
                sides.append((next_start - group[-1].end, i + 1))
            for _, j in sorted(sides):
                a, b = min(i, j), max(i, j)
                if _fits(groups[a] + groups[b], opts):
                    groups[a:b + 1] = [groups[a] + groups[b]]
                    i, joined = a, True
                    break
        if not joined:
            i += 1
    return groups


def _settle(cues: list[Cue], limit: float, opts: CueOptions) -> None:
    """Stretch short cues into the following silence and keep ``min_gap`` between cues.

    Every cue stays on screen at least a moment (``visible``): when the aligner puts
    many words on one instant, later cues are pushed back rather than shown for 0 s,
    then a backward pass pulls everything inside ``[0, limit]``.
    """
    visible = min(opts.min_duration, 0.5)
    for i, cue in enumerate(cues):
        floor = cues[i - 1].end + opts.min_gap if i else 0.0
        cue.start = max(cue.start, floor)
        ceiling = cues[i + 1].start - opts.min_gap if i + 1 < len(cues) else limit
        want = min(max(cue.end, cue.start + opts.min_duration), cue.start + opts.max_duration)
        cue.end = max(min(want, ceiling, limit), cue.start + visible)
        if cue.end - cue.start < opts.min_duration:   # no room after: take it from the silence before
            cue.start = max(floor, min(cue.start, cue.end - opts.min_duration))
    for i in reversed(range(len(cues))):
        cue = cues[i]
        ceiling = cues[i + 1].start - opts.min_gap if i + 1 < len(cues) else limit
        if cue.end > ceiling:
            cue.end = ceiling
            cue.start = min(cue.start, cue.end - visible)
        cue.start = max(cue.start, 0.0)
        if cue.end <= cue.start:  # at least a millisecond, unless no room is left at all
            cue.end = min(cue.start + 0.001, max(ceiling, 0.0))
            cue.start = min(cue.start, cue.end)


def build_cues(transcript: Transcript, options: CueOptions | None = None) -> list[Cue]:
    """Group a transcript into subtitle cues.

    Args:
        transcript: the transcription; word times are used where segments have them.
        options: layout and timing rules; defaults to :class:`CueOptions` ().

    Returns:
        Cues in time order, with monotonic, non-overlapping times inside
        ``[0, transcript.duration]`` (the last word end when the duration is 0).
    """
    opts = options if options is not None else CueOptions()
    toks = _segment_tokens(transcript, opts)
    limit = _time_limit(transcript, toks)
    _sanitize(toks, limit)
    cues: list[Cue] = []
    for run in _runs(toks, opts):
        for group in _group(run, opts):
            words = [Word(t.text, t.start, t.end) for t in group] if group[0].timed else []
            lines = _balanced_lines(group, opts.max_line_chars)
            cues.append(Cue(group[0].start, max(t.end for t in group), lines, words))
    _settle(cues, limit, opts)
    return cues


def words_by_line(cue: Cue) -> list[list[Word]] | None:
    """The cue's words grouped by the line they appear on.

    Returns None when the words do not spell out the lines (a hand-made cue).
    """
    out: list[list[Word]] = []
    i = 0
    for line in cue.lines:
        text, group = "", []
        while i < len(cue.words) and len(text) < len(line):
            word = cue.words[i]
            text += (glue(group[-1].text, word.text) if group else "") + word.text
            group.append(word)
            i += 1
        if text != line:
            return None
        out.append(group)
    return out if i == len(cue.words) else None
