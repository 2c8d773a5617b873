"""The transcript table's speaker cells: the name shown, its colour, and choosing a speaker by name."""
from __future__ import annotations

from PySide6.QtCore import Qt

from app.transcript.speakers_panel import speaker_color
from engine.text.speakers import display_name, set_segment_speaker, speaker_list


def speaker_data(transcript, seg, role):
    """What the speaker cell of ``seg`` shows for ``role``."""
    if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
        return display_name(transcript, seg.speaker)
    if role == Qt.ItemDataRole.BackgroundRole:
        return speaker_color(seg.speaker)
    if role == Qt.ItemDataRole.TextAlignmentRole:
        return int(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    if role == Qt.ItemDataRole.ToolTipRole:
        return "Double-click to give this segment to another speaker (type a name or label)"
    return None


def set_speaker_by_name(transcript, row: int, text: str) -> bool:
    """Give segment ``row`` to the speaker called ``text`` (a name or a label); a new name makes a
    new speaker. False when nothing changes."""
    text = " ".join(text.split())
    if transcript is None or not text:
        return False
    known = {sp["label"]: sp["name"] for sp in speaker_list(transcript)}
    label = next((lab for lab, name in known.items() if text in (lab, name)), None)
    if label is None:
        n = 1
        while f"S{n}" in known or f"S{n}" in transcript.speaker_names:
            n += 1
        label = f"S{n}"
        transcript.speaker_names[label] = text
    if transcript.segments[row].speaker == label:
        return False
    set_segment_speaker(transcript, row, label)
    return True
