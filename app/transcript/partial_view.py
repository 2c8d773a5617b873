"""A running file's transcript so far: the lines of the chunks that have finished.

With a real model on a CPU a long file takes minutes; the transcript view showed nothing
until the end. Now the finished chunks' lines appear as they come (FileJob.partial_segments,
through the worker's ``job_partial``), read-only: there is no stored transcript to edit yet.
"""
from __future__ import annotations

from engine.text.types import Transcript


def partial_transcript(segments, duration: float | None) -> Transcript:
    """A Transcript of the lines so far (its duration the file's, when known)."""
    segments = list(segments)
    end = max((s.end for s in segments), default=0.0)
    language = next((s.language for s in segments if s.language), None)
    return Transcript(text=" ".join(s.text for s in segments), language=language,
                      duration=float(duration or end), segments=segments)


def show_partial(view, item, segments, status: str) -> None:
    """Show ``segments`` of the queue item ``item`` in the TranscriptView ``view``, keeping the
    reader's scroll position (a new chunk must not throw them back to the top)."""
    bar = view.table.verticalScrollBar()
    same_file = view.model.file_id is None and view.source_path == item.path
    position = bar.value() if same_file else 0
    # file_id None: the rows are not editable and nothing is saved from them.
    view.show_transcript(None, partial_transcript(segments, item.duration), item.path, item.name)
    count = len(segments)
    view.details.setText(f"{status} · {count} line{'s' if count != 1 else ''} so far; "
                         "the rest appears as it is transcribed")
    view.table.resizeRowsToContents()
    bar.setValue(position)


def partial_is_shown(view, item) -> bool:
    return view.model.file_id is None and view.model.transcript is not None \
        and view.source_path == item.path
