"""One export run from the main window: several formats for several files, asking once
before replacing files already there, and one notice with "Open folder" at the end."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox

from app.export_actions import CHOICES, export_many
from app.view_prefs import EXPORT_FORMATS


def chosen_formats(settings) -> list:
    """The export choices ticked last time (SRT when none)."""
    keys = [k for k in str(settings.get(EXPORT_FORMATS) or "").split(",") if k]
    return [c for c in CHOICES if c.key in keys] or [CHOICES[0]]


def remember_formats(settings, choices) -> None:
    settings.set(EXPORT_FORMATS, ",".join(c.key for c in choices))


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
