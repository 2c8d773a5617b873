"""The app's file dialogs: where they open, and the audio/video filter they offer.

Every open dialog opens in the last folder the user chose in any of them, else the home folder:
Qt's default is the process's working directory, which for a desktop launch is "/" or the
app's own install folder, never where the user keeps recordings. Every save (export) dialog
opens in the last folder something was exported to, else the user's documents folder.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

LAST_FOLDER = "ui/last_folder"   # a raw Settings entry: a path, or nothing yet
LAST_EXPORT_FOLDER = "ui/last_export_folder"   # where the last export or save went
# Model folders are remembered apart: after choosing a model, "Add files" opened among the
# models instead of where the user's recordings are.
MODELS_FOLDER = "ui/last_models_folder"


def _settings(settings):
    if settings is not None:
        return settings
    from app.settings import Settings

    return Settings()   # QSettings objects on one file share their values within the process


def start_folder(settings=None, key: str = LAST_FOLDER) -> str:
    """The last folder used when it is still there, else the home folder."""
    last = _settings(settings).raw(key) or ""
    return str(last) if last and Path(str(last)).is_dir() else str(Path.home())


def documents_folder() -> str:
    """The user's documents folder (home when the system names none that exists)."""
    from PySide6.QtCore import QStandardPaths

    docs = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DocumentsLocation)
    return docs if docs and Path(docs).is_dir() else str(Path.home())


def export_start_folder(settings=None) -> str:
    """Where exports and saves go when the user has not said: the last export folder when it
    is still there, else the documents folder (never the working directory)."""
    last = _settings(settings).raw(LAST_EXPORT_FOLDER) or ""
    return str(last) if last and Path(str(last)).is_dir() else documents_folder()


def remember_export(path, settings=None) -> None:
    """After an export or save: its folder is where the next save dialog opens."""
    if path:
        path = Path(str(path))
        _settings(settings).set_raw(LAST_EXPORT_FOLDER, str(path if path.is_dir() else path.parent))


def remember(path, settings=None, key: str = LAST_FOLDER) -> None:
    """After a choice: a chosen folder, or the folder of a chosen (or to be written) file."""
    if not path:
        return
    path = Path(str(path))
    folder = path if path.is_dir() else path.parent
    _settings(settings).set_raw(key, str(folder))


def media_filter() -> str:
    """The open dialogs' name filter: the audio and video files the engine decodes, or any."""
    from app.queue.file_collect import supported_extensions

    patterns = " ".join(f"*{ext}" for ext in sorted(supported_extensions()))
    return f"Audio and video files ({patterns});;All files (*)"


def open_media_files(parent, title: str, settings=None) -> list[str]:
    paths, _ = QFileDialog.getOpenFileNames(parent, title, start_folder(settings), media_filter())
    if paths:
        remember(paths[0], settings)
    return list(paths)


def open_media_file(parent, title: str, settings=None) -> str:
    path, _ = QFileDialog.getOpenFileName(parent, title, start_folder(settings), media_filter())
    remember(path, settings)
    return path


def save_file(parent, title: str, name: str, name_filter: str, settings=None) -> str:
    """A save dialog suggesting ``name`` in the last export folder (else the documents folder)."""
    path, _ = QFileDialog.getSaveFileName(parent, title, str(Path(export_start_folder(settings)) / name),
                                          name_filter)
    remember_export(path, settings)
    return path


def choose_folder(parent, title: str, settings=None, current: str = "", *, remember_parent: bool = False,
                  key: str = LAST_FOLDER) -> str:
    """A folder dialog opening at ``current`` (a field's folder) when given, else the start folder.

    ``remember_parent``: for a model folder, the next dialog opens where it sits, not inside it
    (else "Add files" would open among a model's weight files)."""
    folder = QFileDialog.getExistingDirectory(parent, title, current or start_folder(settings, key))
    remember(str(Path(folder).parent) if folder and remember_parent else folder, settings, key)
    return folder
