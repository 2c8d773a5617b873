"""Undo and redo for transcript edits: one QUndoStack per file, the shown file's is active.

Every step (the edit, its undo, its redo) is saved to History at once as a new version, so
undo never loses anything either: the undone text stays in Versions. A stack is forgotten
when its transcript is replaced (transcribed again, a version restored, the entry deleted),
as its segment numbers no longer mean the same segments.

An edit that changes a segment's word count spreads the old word times over the new words and
marks the segment "estimated" (app.history.words_after_edit), so it is saved at once, complete.
An edit that changes the words also asks for them to be re-aligned (``words_wanted``; see
app.transcript.edit_alignment): aligned times, or a note saying why not, arrive later through
``apply_words`` and complete that edit's version and its redo, without adding a version.
"""
from __future__ import annotations

import copy

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QKeySequence, QUndoCommand, QUndoGroup, QUndoStack

from engine.text.types import Word


class EditSegment(QUndoCommand):
    def __init__(self, edits: "TranscriptEdits", file_id: int, index: int, text: str):
        super().__init__(f"edit of line {index + 1}")
        self.edits, self.file_id, self.index, self.text = edits, file_id, index, text
        self.before = None   # the segment as it was, and as the edit left it (set by the first redo)
        self.after = None

    def redo(self):
        if self.after is None:   # the edit itself
            transcript = self.edits.history.get_transcript(self.file_id)
            if transcript is None or not 0 <= self.index < len(transcript.segments):
                self.setObsolete(True)   # nothing to undo: the stack drops it
                self.edits.failed.emit(f"Could not save the edit: the transcript of entry "
                                       f"{self.file_id} has no line {self.index + 1}")
                return
            self.before = copy.deepcopy(transcript.segments[self.index])
            transcript = self.edits.history.update_segment_text(self.file_id, self.index, self.text)
            self.after = copy.deepcopy(transcript.segments[self.index])
            if self.before.text.split() != self.text.split():
                self.edits.words_wanted.emit(self.file_id, self.index, transcript)
        else:
            transcript = self.edits.history.set_segment(self.file_id, self.index,
                                                        copy.deepcopy(self.after))
        self.edits.saved.emit(self.file_id, self.index, transcript)

    def undo(self):
        if self.before is None:
            return
        transcript = self.edits.history.set_segment(self.file_id, self.index,
                                                    copy.deepcopy(self.before))
        self.edits.saved.emit(self.file_id, self.index, transcript)


class TranscriptEdits(QObject):
    """Saves edits through an undo stack; ``saved`` reports each stored change."""

    saved = Signal(int, int, object)   # file id, segment index, the whole transcript as stored
    failed = Signal(str)
    words_wanted = Signal(int, int, object)   # file id, index of a segment whose words changed, the transcript

    def __init__(self, history, parent=None):
        super().__init__(parent)
        self.history = history
        self.group = QUndoGroup(self)
        self._stacks: dict[int, QUndoStack] = {}
        self._commands: dict[int, list[EditSegment]] = {}   # each stack's edits, for apply_words

    def stack(self, file_id: int) -> QUndoStack:
        if file_id not in self._stacks:
            self._stacks[file_id] = QUndoStack(self.group)
        return self._stacks[file_id]

    def show_file(self, file_id: int | None) -> None:
        """The transcript view shows ``file_id`` now: Undo and Redo act on its edits."""
        self.group.setActiveStack(self.stack(file_id) if file_id is not None else None)

    def edit(self, file_id: int, index: int, text: str) -> None:
        command = EditSegment(self, file_id, index, text)
        self._commands.setdefault(file_id, []).append(command)
        self.stack(file_id).push(command)

    def apply_words(self, file_id: int, index: int, text: str, words, note: str = "") -> bool:
        """Word times for an edited segment arrived: ``words`` (aligned) or none, with ``note`` saying
        why. Applied only while the segment still holds ``text`` (an undo or a later edit asked for
        its own); stored in place of the current version, and kept for the edit's redo."""
        transcript = self.history.get_transcript(file_id)
        if transcript is None or not 0 <= index < len(transcript.segments) \
                or transcript.segments[index].text != text:
            return False
        seg = transcript.segments[index]
        if words:
            speaker = seg.words[0].speaker if seg.words else seg.speaker
            seg.words = [Word(w.text, w.start, w.end, w.speaker or speaker) for w in words]
            seg.timing = "aligned"
            seg.start, seg.end = seg.words[0].start, max(seg.words[0].start, seg.words[-1].end)
        elif note:
            seg.timing = "estimated"
            if note not in transcript.notes:
                transcript.notes.append(note)
        else:
            return False
        self.history.replace_current(file_id, transcript)
        for command in self._commands.get(file_id, ()):
            if command.index == index and command.after is not None and command.after.text == text:
                command.after = copy.deepcopy(seg)
        self.saved.emit(file_id, index, transcript)
        return True

    def forget(self, file_id: int) -> None:
        self._commands.pop(file_id, None)
        stack = self._stacks.pop(file_id, None)
        if stack is not None:
            active = self.group.activeStack() is stack
            self.group.removeStack(stack)
            stack.deleteLater()
            if active:
                self.show_file(file_id)

    def actions(self, parent):
        """Undo (Ctrl+Z) and Redo (Ctrl+Shift+Z, and the platform's own keys) for a menu."""
        undo = self.group.createUndoAction(parent, "Undo")
        redo = self.group.createRedoAction(parent, "Redo")
        undo.setShortcuts([QKeySequence("Ctrl+Z")])
        keys = [QKeySequence("Ctrl+Shift+Z")]
        for key in QKeySequence.keyBindings(QKeySequence.StandardKey.Redo):   # Ctrl+Y on Windows
            if key.toString() not in [k.toString() for k in keys]:
                keys.append(key)
        redo.setShortcuts(keys)
        return undo, redo
