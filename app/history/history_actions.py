"""What the user does to History from the main window: delete entries, clear it, read and
restore versions, transcribe an edited transcript again, re-add a file done before, and the
removal of old recordings. The questions are methods, so tests answer them instead of a user.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QMessageBox

from app.history import history_delete
from app import settings as S
from app.queue.queue_model import IN_FLIGHT

OPEN, AGAIN = "open", "again"


def _can_ask() -> bool:
    """False on Qt's offscreen platform (as main_window.can_ask_user): a box would wait forever."""
    from PySide6.QtGui import QGuiApplication

    return QGuiApplication.platformName() not in ("offscreen", "minimal")


class HistoryActions(QObject):
    def __init__(self, window):
        super().__init__(window)
        self.window = window
        self.history = window.history
        self.edits = window.edits
        panel = window.history_panel
        panel.delete_requested.connect(self.delete_entries)
        panel.clear_requested.connect(self.clear_history)
        panel.versions_requested.connect(self.open_versions)
        model = window.transcript_view.model
        model.modelReset.connect(lambda: self.edits.show_file(model.file_id))
        window.queue.job_done.connect(self.edits.forget)   # a new transcript: old line numbers mean nothing
        self.prune_recordings()

    # -- deleting ---------------------------------------------------------------------------
    def ask_delete(self, question: str) -> bool:
        """Ask before deleting (tests replace this). With no one to ask nothing is deleted."""
        if not _can_ask():
            return False
        box, delete = self.delete_box(question)
        box.exec()
        return box.clickedButton() is delete

    def delete_box(self, question: str):
        """The question box and its Delete button ("Keep" is the default)."""
        box = QMessageBox(QMessageBox.Icon.Warning, "Delete from History", question,
                          parent=self.window)
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(box.addButton("Keep", QMessageBox.ButtonRole.RejectRole))
        return box, delete

    def delete_entries(self, file_ids, *, everything: bool = False) -> list[int]:
        """Ask, then delete the entries, their versions and their recordings; returns the ids."""
        busy = [i for i in file_ids if (item := self.window.queue.model.item(i)) is not None
                and item.state in IN_FLIGHT]
        plan = history_delete.plan_deletion(self.history, [i for i in file_ids if i not in busy])
        if busy:
            self.window.statusBar().showMessage(
                f"{len(busy)} entr{'ies are' if len(busy) != 1 else 'y is'} being transcribed: "
                "cancel first to delete.", 8000)
        if not plan.file_ids or not self.ask_delete(history_delete.describe(plan, everything=everything)):
            return []
        errors = history_delete.delete(self.history, plan)
        for file_id in plan.file_ids:
            self.window.history_panel.remove(file_id)
            if self.window.queue.model.item(file_id) is not None:
                self.window.queue.model.remove(file_id)
            self.edits.forget(file_id)
        if self.window._selected_id in plan.file_ids:
            self.window._selected_id = None
            self.window.transcript_view.show_transcript(None, None, "")
        n = len(plan.file_ids)
        message = f"Deleted {n} entr{'ies' if n != 1 else 'y'} from History"
        if errors:
            QMessageBox.warning(self.window, "Delete", "Some recordings could not be deleted:\n"
                                + "\n".join(errors))
        self.window.statusBar().showMessage(message, 8000)
        return plan.file_ids

    def clear_history(self) -> list[int]:
        ids = [r.id for r in self.history.finished_files()]
        return self.delete_entries(ids, everything=True) if ids else []

    def prune_recordings(self) -> list[Path]:
        """Delete recordings older than the Settings' limit (at start and after Settings)."""
        return history_delete.prune_recordings(self.window.settings.get(S.DELETE_RECORDINGS_AFTER_DAYS))

    # -- versions -----------------------------------------------------------------------------
    def open_versions(self, file_id: int | None = None):
        from app.history.versions_dialog import VersionsDialog

        file_id = file_id if file_id is not None else self.window._selected_id
        if file_id is None or self.history.get_transcript(file_id) is None:
            self.window.statusBar().showMessage("Select a finished transcript to see its versions.", 8000)
            return None
        dialog = VersionsDialog(self.history, file_id, self.window)
        dialog.restored.connect(self._restored)
        dialog.open()
        return dialog

    def _restored(self, file_id: int):
        self.edits.forget(file_id)
        transcript = self.history.get_transcript(file_id)
        record = self.history.get_file(file_id)
        item = self.window.queue.model.item(file_id)
        if item is not None:
            item.transcript = transcript
        self.window.history_panel.add(file_id, record.path, record.finished_at, transcript, edited=True)
        if self.window._selected_id == file_id:
            self.window.transcript_view.show_transcript(file_id, transcript, record.path,
                                                        Path(record.path).name)

    # -- transcribing again ---------------------------------------------------------------------
    def ask_transcribe_edited(self, names: list[str]) -> bool:
        """Ask before transcribing edited transcripts again (tests replace this). The edited
        text is kept as a version either way; with no one to ask it goes ahead."""
        if not _can_ask():
            return True
        what = f"“{names[0]}” has" if len(names) == 1 else f"{len(names)} transcripts have"
        box = QMessageBox(QMessageBox.Icon.Question, "Transcribe again?",
                          f"{what} your edits.\nTranscribing again makes a new transcript; your "
                          "edited version is kept and can be restored from Edit ▸ Versions.",
                          parent=self.window)
        again = box.addButton("Transcribe again", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Cancel", QMessageBox.ButtonRole.RejectRole)
        box.exec()
        return box.clickedButton() is again

    def transcribe_again(self, job_ids) -> None:
        job_ids = list(job_ids)
        edited = [i for i in job_ids if self.history.is_edited(i)]
        if edited:
            names = [Path(self.history.get_file(i).path).name for i in edited]
            if not self.ask_transcribe_edited(names):
                return
        self.window.queue.transcribe_again(job_ids)

    # -- adding a file transcribed before ------------------------------------------------------
    def ask_known_files(self, records) -> str | None:
        """"open" the transcripts, transcribe them "again", or None (cancel) for files that were
        transcribed before (tests replace this). With no one to ask they are queued as before."""
        if not _can_ask():
            return AGAIN
        if len(records) == 1:
            text = f"“{Path(records[0].path).name}” was transcribed before."
        else:
            text = f"{len(records)} of these files were transcribed before."
        box = QMessageBox(QMessageBox.Icon.Question, "Transcribed before", text + "\nOpen the "
                          "transcript, or transcribe again (edits are kept as versions)?",
                          parent=self.window)
        open_button = box.addButton("Open the transcript", QMessageBox.ButtonRole.AcceptRole)
        again = box.addButton("Transcribe again", QMessageBox.ButtonRole.ActionRole)
        box.addButton("Cancel", QMessageBox.ButtonRole.RejectRole)
        box.exec()
        return OPEN if box.clickedButton() is open_button else AGAIN if box.clickedButton() is again \
            else None

    def new_paths(self, paths) -> list:
        """Of ``paths`` to add, those never transcribed; for the others ask, then open their
        transcripts or transcribe their entries again (no duplicate entries either way)."""
        from app.history import resolved_path

        fresh, known = [], []
        index = self.history.transcribed_index() if paths else {}
        for path in paths:
            done = index.get(resolved_path(path)) if index else None
            if done is None:
                fresh.append(path)
            elif done not in known:
                known.append(done)
        if not known:
            return fresh
        answer = self.ask_known_files(known)
        if answer == OPEN:
            self.window.tabs.setCurrentWidget(self.window.history_panel)
            self.window.history_panel.select(known[0].id)
        elif answer == AGAIN:
            queue = self.window.queue
            in_queue = [r.id for r in known if queue.model.item(r.id) is not None]
            queue.transcribe_again([i for i in in_queue if queue.model.item(i).state == "done"])
            queue.restore([r for r in known if r.id not in in_queue])
            self.window.tabs.setCurrentWidget(self.window.queue_panel)
        return fresh
