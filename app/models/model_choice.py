"""The Models dialog's local-folder row and its full description line.

A local folder chosen in the dialog gets a row of its own, selected, so the list stops
highlighting a model that is not even downloaded; the description of the selected row is
shown whole under the list, where the list's last column cut it.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QTreeWidget, QTreeWidgetItem

LOCAL_ROLE = Qt.ItemDataRole.UserRole + 31   # the folder of a local row
KIND_TEXT = {"asr": "Speech model in a local folder", "aligner": "Word-time aligner in a local folder"}


def mark_local_folder(tree: QTreeWidget, folder: str, kind: str) -> QTreeWidgetItem:
    """Add (or reuse) the row for ``folder`` and select it."""
    item = None
    for row in range(tree.topLevelItemCount()):
        candidate = tree.topLevelItem(row)
        if candidate.data(0, LOCAL_ROLE) == str(folder):
            item = candidate
    if item is None:
        item = QTreeWidgetItem(tree)
        item.setData(0, LOCAL_ROLE, str(folder))
    if kind == "asr":   # one model is in use: known rows stop saying so
        for row in range(tree.topLevelItemCount()):
            other = tree.topLevelItem(row)
            if other is not item and other.text(1) == "In use":
                other.setText(1, "Downloaded" if other.data(0, LOCAL_ROLE) is None else "")
    item.setText(0, Path(folder).name)
    item.setToolTip(0, str(folder))
    item.setText(1, "In use" if kind == "asr" else "Aligner")
    item.setText(3, f"{KIND_TEXT.get(kind, 'Local folder')}: {folder}")
    tree.setCurrentItem(item)
    return item


def description_label(tree: QTreeWidget, column: int = 3) -> QLabel:
    """A wrapping label that always shows the selected row's description in full."""
    label = QLabel("")
    label.setObjectName("modelDescription")
    label.setWordWrap(True)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    def follow(current, _previous=None):
        label.setText(current.text(column) if current is not None else "")

    tree.currentItemChanged.connect(follow)
    follow(tree.currentItem())
    return label
