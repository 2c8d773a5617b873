"""Paints a segment's text with the playing word and search matches highlighted,
and turns a click on a word into "play from this word"."""
from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QSize, Qt, Signal
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QPalette,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextOption,
)
from PySide6.QtWidgets import (
    QApplication,
    QPlainTextEdit,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
)

from app.transcript.transcript_model import PlayingWordRole, SearchRole, WordSpansRole

PADDING = 6     # left/right, like the default item text margin
PADDING_Y = 2   # top/bottom: keeps the text's first line level with the time column
SEARCH_BACKGROUND = "#fde047"  # marker yellow: readable on any row, selected or not
SEARCH_FOREGROUND = "#111111"


class SegmentTextDelegate(QStyledItemDelegate):
    word_clicked = Signal(int, int)   # row, word index (-1: the segment, no word under the click)

    def __init__(self, view):
        super().__init__(view)
        self.view = view

    def _document(self, option, index, width: int) -> QTextDocument:
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(option.font)
        text_option = QTextOption()
        text_option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        doc.setDefaultTextOption(text_option)
        doc.setPlainText(index.data(Qt.ItemDataRole.DisplayRole) or "")
        doc.setTextWidth(max(20, width - 2 * PADDING))
        text = doc.toPlainText()
        playing = index.data(PlayingWordRole)
        highlight = option.palette.color(QPalette.ColorRole.Highlight)
        if playing == -2:  # the row plays but no word is timed: tint the whole text
            tint = QColor(highlight)
            tint.setAlpha(60)
            fmt = QTextCharFormat()
            fmt.setBackground(tint)
            _format_range(doc, 0, len(text), fmt)
        # Search matches go over the row tint (else a playing row hides what was searched
        # for); the playing word goes over both, as it is what the listener follows.
        search = index.data(SearchRole) or ""
        if search:
            fmt = QTextCharFormat()
            fmt.setBackground(QColor(SEARCH_BACKGROUND))
            fmt.setForeground(QColor(SEARCH_FOREGROUND))
            lowered, needle, at = text.lower(), search.lower(), 0
            while (at := lowered.find(needle, at)) >= 0:
                _format_range(doc, at, at + len(needle), fmt)
                at += len(needle)
        if playing is not None and playing >= 0:
            fmt = QTextCharFormat()
            if option.state & QStyle.StateFlag.State_Selected:
                # The selected row is painted in the highlight colour already: the playing
                # word there is the inverse (and underlined), or it vanished into the row.
                fmt.setBackground(option.palette.color(QPalette.ColorRole.HighlightedText))
                fmt.setForeground(highlight)
                fmt.setFontUnderline(True)
            else:
                fmt.setBackground(highlight)
                fmt.setForeground(option.palette.color(QPalette.ColorRole.HighlightedText))
            for span in index.data(WordSpansRole) or []:
                if span.index == playing:
                    _format_range(doc, span.start, span.end, fmt)
        return doc

    def paint(self, painter, option, index):
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        doc = self._document(option, index, option.rect.width())
        painter.save()
        painter.translate(option.rect.left() + PADDING, option.rect.top() + PADDING_Y)
        context = QAbstractTextDocumentLayout.PaintContext()
        role = (QPalette.ColorRole.HighlightedText if option.state & QStyle.StateFlag.State_Selected
                else QPalette.ColorRole.Text)
        context.palette.setColor(QPalette.ColorRole.Text, option.palette.color(role))
        doc.documentLayout().draw(painter, context)
        painter.restore()

    def sizeHint(self, option, index):
        width = self.view.columnWidth(index.column()) if self.view else option.rect.width()
        doc = self._document(option, index, width)
        return QSize(width, int(doc.size().height()) + 2 * PADDING_Y + 4)

    # -- editing: a multi-line box the size of the row (at least three lines), Enter saves,
    # Shift+Enter starts a new line, Escape cancels.
    def createEditor(self, parent, option, index):  # noqa: N802
        editor = QPlainTextEdit(parent)
        editor.setObjectName("segmentEditor")
        editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        editor.setTabChangesFocus(True)
        editor.installEventFilter(self)
        return editor

    def setEditorData(self, editor, index):  # noqa: N802
        editor.setPlainText(index.data(Qt.ItemDataRole.EditRole) or "")
        editor.selectAll()

    def setModelData(self, editor, model, index):  # noqa: N802
        model.setData(index, " ".join(editor.toPlainText().split()), Qt.ItemDataRole.EditRole)

    def updateEditorGeometry(self, editor, option, index):  # noqa: N802
        rect = option.rect
        lines = editor.fontMetrics().lineSpacing() * 3 + 12
        rect.setHeight(max(rect.height(), lines))
        editor.setGeometry(rect)

    def eventFilter(self, editor, event):  # noqa: N802
        if isinstance(editor, QPlainTextEdit) and event.type() == QEvent.Type.KeyPress and \
                event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and \
                not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.commitData.emit(editor)
            self.closeEditor.emit(editor, QStyledItemDelegate.EndEditHint.NoHint)
            return True
        return super().eventFilter(editor, event)

    def editorEvent(self, event, model, option, index):
        if event.type() == QEvent.Type.MouseButtonRelease and \
                event.button() == Qt.MouseButton.LeftButton:
            self.word_clicked.emit(index.row(), self.word_at(option, index, event.position()))
        return super().editorEvent(event, model, option, index)

    def word_at(self, option, index, pos: QPointF) -> int:
        """Index of the word under ``pos`` (view coordinates), or -1."""
        doc = self._document(option, index, option.rect.width())
        local = QPointF(pos.x() - option.rect.left() - PADDING, pos.y() - option.rect.top() - PADDING_Y)
        char = doc.documentLayout().hitTest(local, Qt.HitTestAccuracy.ExactHit)
        if char < 0:
            return -1
        for span in index.data(WordSpansRole) or []:
            if span.start <= char < span.end:
                return span.index
        return -1


def _format_range(doc: QTextDocument, start: int, end: int, fmt: QTextCharFormat) -> None:
    cursor = QTextCursor(doc)
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    cursor.mergeCharFormat(fmt)
