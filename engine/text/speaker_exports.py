"""Speakers in the exports: TXT ``Name: text`` blocks, subtitle cues that never mix two
speakers (SRT ``Name: `` at the cue start, VTT ``<v Name>``), and JSON speaker fields.

Cues are built per run of one speaker's segments, so a cue always belongs to one person;
names come from ``Transcript.speaker_names`` (a label without a name shows as itself).
"""
from __future__ import annotations

from dataclasses import replace

from engine.text.cues import Cue, CueOptions, build_cues
from engine.text.joining import clean_text
from engine.text.speakers import display_name, speaker_list
from engine.text.types import Transcript


def speaker_runs(transcript: Transcript) -> list[tuple[str | None, list]]:
    """Consecutive segments (in time order) grouped by speaker: ``[(label, segments)]``."""
    runs: list[tuple[str | None, list]] = []
    for seg in sorted(transcript.segments, key=lambda s: s.start):
        if runs and runs[-1][0] == seg.speaker:
            runs[-1][1].append(seg)
        else:
            runs.append((seg.speaker, [seg]))
    return runs


def speaker_cues(transcript: Transcript, options: CueOptions | None = None) -> list[tuple[Cue, str]]:
    """Subtitle cues with the display name of their speaker; no cue spans a speaker change,
    and a cue ends before the next speaker's first cue starts."""
    out: list[tuple[Cue, str]] = []
    for label, segments in speaker_runs(transcript):
        part = replace(transcript, segments=segments)
        out += [(cue, display_name(transcript, label)) for cue in build_cues(part, options)]
    out.sort(key=lambda pair: pair[0].start)
    for (cue, _), (nxt, _) in zip(out, out[1:]):
        cue.end = max(cue.start, min(cue.end, nxt.start))
    return out


def txt_blocks(transcript: Transcript, timestamps: bool, stamp) -> str:
    """``Name: text`` paragraphs, one per speaker turn, separated by blank lines."""
    blocks = []
    for label, segments in speaker_runs(transcript):
        text = " ".join(t for t in (clean_text(s.text) for s in segments) if t)
        if not text:
            continue
        name = display_name(transcript, label) or "Unknown"
        head = f"[{stamp(segments[0].start)} --> {stamp(segments[-1].end)}] " if timestamps else ""
        blocks.append(f"{head}{name}: {text}\n")
    return "\n".join(blocks)


def json_speakers(transcript: Transcript, data: dict) -> dict:
    """``data`` (the JSON export's dict) with ``speaker`` on segments and words (the display
    name), ``speaker_label`` on segments, and the ``speakers`` list with speaking times."""
    for seg, out in zip(transcript.segments, data["segments"]):
        out["speaker"] = display_name(transcript, seg.speaker) or None
        out["speaker_label"] = seg.speaker
        for w, wout in zip(seg.words, out["words"]):
            wout["speaker"] = display_name(transcript, w.speaker or seg.speaker) or None
    data["speakers"] = speaker_list(transcript)
    return data
