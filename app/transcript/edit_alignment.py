"""An edited segment's words re-aligned over its audio, when an aligner is loaded.

The edit is saved first (app.transcript.transcript_edits: words spread over the segment, marked
estimated). Then, for an edit that changed the words, this sends the segment's stretch of audio (the
source file, or a live session's recording), the new text and its language to the engine thread
(EngineClient.align_segment); the worker aligns it with the loaded aligner and checks it
(app.backend.segment_align). Aligned words replace the spread ones; a refusal or missing audio adds
a note to the transcript ("word times for 0:12-0:15 could not be aligned (...)"). With no aligner
loaded nothing more happens: the segment keeps its estimated word times.
"""
from __future__ import annotations

from PySide6.QtCore import QObject

from app.backend.segment_align import SegmentAlignRequest

MARGIN = 0.3   # seconds of audio on each side of the segment, short of its neighbours


def stretch_of(transcript, index: int) -> tuple[float, float]:
    """The audio to align segment ``index`` over: the segment with up to MARGIN s on each side,
    never reaching into the neighbouring segments (nor before 0 or past the end)."""
    segments = transcript.segments
    seg = segments[index]
    start = seg.start - MARGIN
    if index > 0:
        start = max(start, min(seg.start, segments[index - 1].end))
    end = seg.end + MARGIN
    if index + 1 < len(segments):
        end = min(end, max(seg.end, segments[index + 1].start))
    if transcript.duration and transcript.duration > 0:
        end = min(end, max(seg.end, transcript.duration))
    return max(0.0, start), max(end, max(0.0, start))


class EditAlignment(QObject):
    """Asks the engine thread for an edited segment's word times and applies the answer.

    edits: app.transcript.transcript_edits.TranscriptEdits; history: app.history.History (for the
    entry's audio path); client: app.backend.engine_client.EngineClient; view: the TranscriptView
    (its notes line follows a note added here)."""

    def __init__(self, edits, history, client, view=None, parent=None):
        super().__init__(parent)
        self.edits, self.history, self.client, self.view = edits, history, client, view
        self.pending = 0   # requests sent and not answered yet
        edits.words_wanted.connect(self._request)
        client.worker.segment_aligned.connect(self._answered)

    def _request(self, file_id: int, index: int, transcript) -> None:
        record = self.history.get_file(file_id)
        if record is None or not 0 <= index < len(transcript.segments):
            return
        seg = transcript.segments[index]
        start, end = stretch_of(transcript, index)
        self.pending += 1
        self.client.align_segment(SegmentAlignRequest(file_id, index, record.path, start, end, seg.text,
                                                      seg.language or transcript.language))

    def _answered(self, result) -> None:
        self.pending = max(0, self.pending - 1)
        if result.state == "no aligner":
            return
        request = result.request
        if not self.edits.apply_words(request.file_id, request.index, request.text, result.words, result.note):
            return
        if self.view is not None and self.view.model.file_id == request.file_id:
            transcript = self.history.get_transcript(request.file_id)
            if transcript is not None:
                self.view.show_notes(transcript)
