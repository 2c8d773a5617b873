"""Speakers on a transcript: who spoke when (turns) merged into segments and words.

A diarizer gives turns (a label such as ``"S1"`` with a start and an end). Every word takes
the speaker it overlaps most; a sentence whose words change speaker is split there, so each
segment has one speaker. Without word times, a segment is split by the share of each turn in
its time (cut at a space), which is an estimate. Names the user gives live in
``Transcript.speaker_names`` and are applied only when showing or exporting.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from engine.text.joining import glue
from engine.text.sentences import word_positions
from engine.text.types import Segment, Transcript, Word


@dataclass(frozen=True)
class SpeakerTurn:
    """One stretch of one speaker's speech: ``speaker`` label, ``start`` and ``end`` in seconds."""

    speaker: str
    start: float
    end: float


def check_speakers(value):
    """``"auto"`` or a count of 1-32 (also as text, e.g. from a command line); else ValueError."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        if not text.isdigit():
            raise ValueError(f"speakers must be 'auto' or a number of speakers, got {value!r:.40}")
        value = int(text)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 32:
        raise ValueError(f"speakers must be 'auto' or a number from 1 to 32, got {value!r:.40}")
    return value


def speaker_at(turns: list[SpeakerTurn], start: float, end: float) -> str | None:
    """The speaker who overlaps ``[start, end]`` most; the nearest turn when none overlaps."""
    if not turns:
        return None
    overlap: dict[str, float] = {}
    for t in turns:
        o = min(end, t.end) - max(start, t.start)
        if o > 0:
            overlap[t.speaker] = overlap.get(t.speaker, 0.0) + o
    if overlap:
        return max(overlap, key=overlap.get)
    mid = (start + end) / 2
    return min(turns, key=lambda t: 0.0 if t.start <= mid <= t.end else min(abs(t.start - mid),
                                                                           abs(t.end - mid))).speaker


def _split_timed(seg: Segment, turns: list[SpeakerTurn]) -> list[Segment]:
    for w in seg.words:
        w.speaker = speaker_at(turns, w.start, w.end)
    groups: list[list[int]] = []
    for i, w in enumerate(seg.words):
        if groups and seg.words[groups[-1][-1]].speaker == w.speaker:
            groups[-1].append(i)
        else:
            groups.append([i])
    if len(groups) == 1:
        return [replace(seg, speaker=seg.words[0].speaker)]
    positions = word_positions(seg.text, seg.words)
    out = []
    for k, idx in enumerate(groups):
        words = [seg.words[i] for i in idx]
        if positions is not None:
            a = 0 if k == 0 else positions[idx[0]]
            b = positions[groups[k + 1][0]] if k + 1 < len(groups) else len(seg.text)
            text = seg.text[a:b].strip()
        else:
            text = "".join(glue(words[j - 1].text, w.text) + w.text if j else w.text
                           for j, w in enumerate(words))
        out.append(Segment(start=words[0].start, end=max(words[0].start, words[-1].end), text=text,
                           words=words, language=seg.language, timing=seg.timing, speaker=words[0].speaker))
    return out


def _split_untimed(seg: Segment, turns: list[SpeakerTurn]) -> list[Segment]:
    length = seg.end - seg.start
    inside = [SpeakerTurn(t.speaker, max(t.start, seg.start), min(t.end, seg.end)) for t in turns
              if min(t.end, seg.end) - max(t.start, seg.start) > 0]
    # one speaker, or too little text to cut: the speaker who talks most
    if len({t.speaker for t in inside}) <= 1 or " " not in seg.text.strip() or length <= 0:
        return [replace(seg, speaker=speaker_at(turns, seg.start, seg.end))]
    runs: list[list] = []       # [speaker, start, end] with neighbours of one speaker joined
    for t in sorted(inside, key=lambda t: t.start):
        if runs and runs[-1][0] == t.speaker:
            runs[-1][2] = t.end
        else:
            runs.append([t.speaker, t.start, t.end])
    runs[0][1], runs[-1][2] = seg.start, seg.end
    for a, b in zip(runs, runs[1:]):      # gaps between turns: cut in their middle
        a[2] = b[1] = (a[2] + b[1]) / 2
    text, out, cut_prev = seg.text, [], 0
    for k, (speaker, start, end) in enumerate(runs):
        if k + 1 < len(runs):
            target = round(len(text) * (end - seg.start) / length)
            spaces = [i for i, ch in enumerate(text) if ch == " " and cut_prev < i]
            cut = min(spaces, key=lambda i: abs(i - target)) if spaces else len(text)
        else:
            cut = len(text)
        piece = text[cut_prev:cut].strip()
        if piece:
            out.append(Segment(start=round(start, 3), end=round(end, 3), text=piece, language=seg.language,
                               timing="estimated", speaker=speaker))
        elif out:
            out[-1].end = round(end, 3)
        cut_prev = cut
    return out or [replace(seg, speaker=speaker_at(turns, seg.start, seg.end))]


def assign_speakers(segments: list[Segment], turns: list[SpeakerTurn]) -> list[Segment]:
    """New segments, each with one speaker: words labelled, sentences split at speaker changes."""
    out = []
    for seg in segments:
        out.extend(_split_timed(seg, turns) if seg.words else _split_untimed(seg, turns))
    return out


def label_transcript(transcript: Transcript, turns: list[SpeakerTurn]) -> Transcript:
    """``transcript`` with speakers on its segments and words (it is changed in place and returned)."""
    transcript.segments = assign_speakers(transcript.segments, turns)
    return transcript


def display_name(transcript: Transcript, label: str | None) -> str:
    """The name to show for a speaker label: the user's name for it, else the label itself."""
    if not label:
        return ""
    return transcript.speaker_names.get(label) or label


def speaker_list(transcript: Transcript) -> list[dict]:
    """Speakers in order of first appearance: label, name and total speaking time (seconds)."""
    totals: dict[str, float] = {}
    for seg in transcript.segments:
        if seg.speaker:
            totals[seg.speaker] = totals.get(seg.speaker, 0.0) + max(0.0, seg.end - seg.start)
    return [{"label": label, "name": display_name(transcript, label), "speaking_time": round(total, 3)}
            for label, total in totals.items()]


def has_speakers(transcript: Transcript) -> bool:
    """Whether any segment carries a speaker label."""
    return any(seg.speaker for seg in transcript.segments)


def rename_speaker(transcript: Transcript, label: str, name: str) -> None:
    """Give ``label`` a name everywhere (an empty name shows the label again)."""
    name = " ".join(str(name).split())
    if name and name != label:
        transcript.speaker_names[label] = name
    else:
        transcript.speaker_names.pop(label, None)


def merge_speakers(transcript: Transcript, keep: str, merged: str) -> None:
    """Every segment and word of ``merged`` now belongs to ``keep``."""
    for seg in transcript.segments:
        if seg.speaker == merged:
            seg.speaker = keep
        for w in seg.words:
            if w.speaker == merged:
                w.speaker = keep
    transcript.speaker_names.pop(merged, None)


def set_segment_speaker(transcript: Transcript, index: int, label: str) -> None:
    """One segment (and its words) to another speaker."""
    seg = transcript.segments[index]
    seg.speaker = label
    for w in seg.words:
        w.speaker = label
