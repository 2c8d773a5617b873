"""The live captions' text panel: a line per utterance, appended as it is committed.

The document grows at its end only: committed lines are inserted with a QTextCursor before the
tentative line, which is the only text ever replaced. So a caption update costs the same at the
second minute and the second hour (the whole session was re-rendered as one HTML document per
update before). It follows the newest line unless the user has scrolled up to read; scrolling
back to the bottom follows again.
"""
from __future__ import annotations

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QTextBrowser

TENTATIVE_COLOR = "#94A3B8"  # dimmer than committed text: these words may still change
FOLLOW_SLACK_PX = 4          # this close to the bottom counts as "at the bottom": keep following
LINE_GAP_PX = 4              # space under each line, as the captions had it


def clock_text(seconds: float) -> str:
    """A start time as people read it: 0:07, 12:45, 1:02:03."""
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class CaptionView(QTextBrowser):
    """Committed lines (``append``), then one tentative line (``set_tentative``), lighter and italic."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.document().setUndoRedoEnabled(False)   # read-only text: an undo stack would only grow
        self.show_times = True
        self.segments: list = []        # the committed segments shown, in order
        self._lines: list = []          # parallel: the document block number of each one's line, or None
        self._tentative = ""
        self._committed_end = 0         # document position where the tentative line starts
        self._plain = QTextCharFormat()
        self._dim = QTextCharFormat()
        self._dim.setForeground(QColor(TENTATIVE_COLOR))
        self._italic = QTextCharFormat(self._dim)
        self._italic.setFontItalic(True)
        self._italic.setFontWeight(QFont.Weight.Normal)
        self._bold = QTextCharFormat()
        self._bold.setFontWeight(QFont.Weight.Bold)
        self._block = QTextBlockFormat()
        self._block.setBottomMargin(LINE_GAP_PX)

    # -- what the window calls ------------------------------------------------------------
    def update_captions(self, segments, tentative: str, relabelled=()) -> None:
        """Append the newly committed ``segments``, show ``tentative`` as the last line, and redraw
        the lines of the shown segments at the indices ``relabelled`` (a corrected speaker)."""
        follow = self._at_bottom()
        cursor = QTextCursor(self.document())
        cursor.beginEditBlock()
        self._remove_tentative(cursor)
        for index in relabelled:
            self._redraw_line(index)
        cursor.movePosition(QTextCursor.MoveOperation.End)   # a redrawn line may have changed length
        for seg in segments:
            self.segments.append(seg)
            self._lines.append(self._insert_line(cursor, seg))
        self._committed_end = cursor.position()
        self._tentative = tentative or ""
        self._insert_tentative(cursor)
        cursor.endEditBlock()
        if follow:
            self.scroll_to_end()

    def set_show_times(self, on: bool) -> None:
        """Times before each line or not: the one change that lays out every line again."""
        if on != self.show_times:
            self.show_times = on
            self._rebuild()

    def clear_captions(self) -> None:
        self.segments, self._lines, self._tentative, self._committed_end = [], [], "", 0
        self.clear()

    @property
    def tentative(self) -> str:
        return self._tentative

    def scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # -- the document -----------------------------------------------------------------------
    def line_parts(self, seg) -> list[tuple[str, QTextCharFormat]]:
        """One committed line as (text, format) runs: its start time, its speaker, then its words."""
        parts = []
        if self.show_times:
            parts.append((clock_text(seg.start) + "\u00a0\u00a0", self._dim))
        if getattr(seg, "speaker", None):
            parts.append((f"{seg.speaker}:\u00a0", self._bold))
        parts.append((seg.text.strip(), self._plain))
        return parts

    def _insert_line(self, cursor: QTextCursor, seg) -> int | None:
        """Write ``seg``'s line at the end; its block number, or None for an empty segment."""
        if not seg.text.strip():
            return None
        self._start_block(cursor)
        for text, fmt in self.line_parts(seg):
            cursor.insertText(text, fmt)
        return cursor.blockNumber()

    def _redraw_line(self, index: int) -> None:
        """Write the line of shown segment ``index`` again in place (one block; nothing else moves)."""
        if not 0 <= index < len(self._lines) or self._lines[index] is None:
            return
        cursor = QTextCursor(self.document().findBlockByNumber(self._lines[index]))
        cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        for text, fmt in self.line_parts(self.segments[index]):
            cursor.insertText(text, fmt)

    def _start_block(self, cursor: QTextCursor) -> None:
        cursor.movePosition(QTextCursor.MoveOperation.End)
        if cursor.position() == 0:
            cursor.setBlockFormat(self._block)        # the document's first (empty) block
        else:
            cursor.insertBlock(self._block, self._plain)

    def _remove_tentative(self, cursor: QTextCursor) -> None:
        cursor.setPosition(self._committed_end)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()

    def _insert_tentative(self, cursor: QTextCursor) -> None:
        if self._tentative:
            self._start_block(cursor)
            cursor.insertText(self._tentative, self._italic)

    def _rebuild(self) -> None:
        segments, tentative = self.segments, self._tentative
        self.clear_captions()
        self.update_captions(segments, tentative)

    def _at_bottom(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.value() >= bar.maximum() - FOLLOW_SLACK_PX
