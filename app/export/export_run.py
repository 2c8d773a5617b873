"""One export run from the main window: several formats for several files, asking once
before replacing files already there, and one notice with "Open folder" at the end."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox

from app.widgets import dialog_folders
from app.export.export_actions import chosen_formats, export_many


def finished_in_queue(window) -> list[tuple[str, object]]:
    """(source path, transcript) of every finished file in the queue, in queue order."""
    out = []
    for item in window.queue.model.items:
        if item.state == "done":
            transcript = window.history.get_transcript(item.job_id)
            if transcript is not None:
                out.append((item.path, transcript))
    return out


def run_export(window, items, choices, *, folder=None, stem: str | None = None) -> list[Path]:
    """Export ``items`` in every format of ``choices``; returns the files written."""
    if not items:
        window.statusBar().showMessage("Select a finished file to export.", 8000)
        return []
    settings = window.settings
    written, errors, existing_by_choice = [], [], []
    for choice in choices:
        existing: list = []
        done, failed = export_many(settings, items, choice, overwrite=False, existing=existing,
                                   folder=folder, stem=stem)
        written += done
        errors += failed
        if existing:
            existing_by_choice.append((choice, existing))
    kept = [path for _, existing in existing_by_choice for _, path in existing]
    if kept and window.ask_replace(kept):
        for choice, _ in existing_by_choice:
            # The same run again, replacing: names come out as in the first pass.
            done, failed = export_many(settings, items, choice, overwrite=True, folder=folder,
                                       stem=stem)
            written += [p for p in done if p not in written]
            errors += failed
    if errors:
        QMessageBox.warning(window, "Export", "\n".join(dict.fromkeys(errors)))
    if written:
        where = written[0] if len(written) == 1 else \
            f"{len(written)} files in {written[0].parent}"
        target = written[0].parent
        window.notice.show_notice(f"Exported {where}", "Open folder",
                                  lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(target))))
    elif kept:
        window.statusBar().showMessage("Nothing exported: the files already there were kept.", 8000)
    return written


class ExportCommands:
    """The main window's Export…, Export all, Save As and Ctrl+E (a mixin of MainWindow: it
    uses its settings, queue, history, notice and ``selected_transcripts``)."""

    def export_in_chosen_formats(self) -> list[Path]:
        return run_export(self, self.selected_transcripts(), chosen_formats(self.settings))

    def export_all(self) -> list[Path]:
        return run_export(self, finished_in_queue(self), chosen_formats(self.settings))

    def open_export_dialog(self, run: bool = True):
        """Export…: formats, where, and which files (``run=False``: tests press the buttons)."""
        from app.export.export_dialog import ExportDialog

        dialog = ExportDialog(self.settings, len(self.selected_transcripts()),
                              len(finished_in_queue(self)), self)
        dialog.finished.connect(lambda _result: self.export_from_dialog(dialog))
        if run:
            dialog.open()
        return dialog

    def export_from_dialog(self, dialog) -> list[Path]:
        if dialog.scope == "all":
            return run_export(self, finished_in_queue(self), dialog.choices(),
                              folder=dialog.target_folder())
        items = self.selected_transcripts()
        if dialog.scope == "save_as" and len(items) == 1:
            target = self.ask_save_as(Path(items[0][0]).stem)
            if not target:
                return []
            return run_export(self, items, dialog.choices(), folder=Path(target).parent,
                              stem=Path(target).stem)
        if dialog.scope == "selected":
            return run_export(self, items, dialog.choices(), folder=dialog.target_folder())
        return []

    def ask_save_as(self, stem: str) -> str:
        """A file name from a save dialog (tests replace this); each format gets its extension."""
        path = dialog_folders.save_file(self, "Save the transcript as", stem, "Transcripts (*)",
                                        self.settings)
        return str(Path(path).with_suffix("")) if path else ""

