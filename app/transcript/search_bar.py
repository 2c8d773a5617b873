"""The transcript's search field and its match count, laid out so the count stays readable.

Side by side, a narrow transcript pane squeezed the count ("12 matches in 2 segme") and
cut it. Now the count sits beside the field only while both fit; otherwise it moves to a
line of its own under the field, where it wraps rather than being cut if even that is
too narrow. It never sets the pane's minimum width, so the splitter can still narrow it.
"""
from __future__ import annotations

from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QLineEdit, QSizePolicy, QToolButton, QWidget

FIELD_MIN_EMS = 12   # narrower than this, the field shows too little of what was typed


class SearchBar(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.field = QLineEdit()
        self.field.setPlaceholderText("Search the transcript (Ctrl+F)")
        self.field.setClearButtonEnabled(True)
        self.field.setAccessibleName("Search the transcript")
        # Previous and next match (Shift+F3, F3), beside the field.
        self.previous_button, self.next_button = QToolButton(), QToolButton()
        for button, text, name in ((self.previous_button, "▲", "Previous match (Shift+F3)"),
                                   (self.next_button, "▼", "Next match (F3, Enter)")):
            button.setText(text)
            button.setToolTip(name)
            button.setAccessibleName(name.split(" (")[0])
            button.setAutoRaise(True)
            button.setEnabled(False)
        field_row = QHBoxLayout()
        field_row.setContentsMargins(0, 0, 0, 0)
        field_row.setSpacing(2)
        field_row.addWidget(self.field, 1)
        field_row.addWidget(self.previous_button)
        field_row.addWidget(self.next_button)
        self.count_label = QLabel("")
        self.count_label.setObjectName("matchCount")
        # Word wrap makes the label's minimum width its longest word, not its whole text.
        self.count_label.setWordWrap(True)
        self.count_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setColumnStretch(0, 1)
        self._grid.addLayout(field_row, 0, 0)
        self._beside: bool | None = None
        self._arrange()

    def set_count_text(self, text: str, can_move: bool = False) -> None:
        self.previous_button.setEnabled(can_move)
        self.next_button.setEnabled(can_move)
        self.count_label.setText(text)
        self.count_label.setVisible(bool(text))
        self._arrange()

    def count_beside_field(self) -> bool:
        return bool(self._beside)

    def _field_min(self) -> int:
        buttons = self.previous_button.minimumSizeHint().width() + self.next_button.minimumSizeHint().width() + 4
        return self.fontMetrics().horizontalAdvance("M") * FIELD_MIN_EMS + buttons

    def _count_width(self) -> int:
        label = self.count_label
        return label.fontMetrics().horizontalAdvance(label.text()) + 2 * label.margin() + 2

    def _arrange(self) -> None:
        # The bar itself asks only for the field's room: what the count needs must never
        # stop the pane from narrowing, or the count could not move down when it should.
        self.setMinimumWidth(self._field_min())
        beside = self.width() >= self._field_min() + max(0, self._grid.horizontalSpacing()) \
            + self._count_width()
        # Beside the field the count keeps its whole width; below it, it may wrap.
        self.count_label.setMinimumWidth(self._count_width() if beside else 0)
        if beside == self._beside:
            return
        self._beside = beside
        self._grid.removeWidget(self.count_label)
        if beside:
            self._grid.addWidget(self.count_label, 0, 1)
        else:
            self._grid.addWidget(self.count_label, 1, 0, 1, 2)

    def resizeEvent(self, event):  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._arrange()
