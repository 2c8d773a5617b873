"""Models: download a known Qwen3-ASR checkpoint, or pick a local folder.

Downloads run in a QThread through modelhub.downloads; the dialog shows bytes done and
can cancel. Offline, it says so plainly and points to the local-folder option. Models not
yet downloaded show how big the download is (app.models.model_sizes).
"""
from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import Qt, QThread, Signal
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
)

from app.widgets import dialog_folders

from app.models import model_sizes
from app.models.model_choice import description_label, mark_local_folder
from app.models.model_sizes import format_size
from modelhub import downloads as hub
from modelhub.downloads import KNOWN_MODELS, default_model_dest, is_model_dir

MODEL_ROLE = Qt.ItemDataRole.UserRole + 30


class DownloadThread(QThread):
    progress = Signal(float, float)  # bytes done, bytes total (floats: sizes pass 2 GiB)
    succeeded = Signal(str)          # folder
    failed = Signal(str)             # message for the user

    def __init__(self, repo_id: str, dest: Path, parent=None):
        super().__init__(parent)
        self.repo_id, self.dest = repo_id, dest
        self.cancel_event = threading.Event()

    def run(self):
        try:
            path = hub.download_model(self.repo_id, self.dest,
                                      progress=lambda d, t: self.progress.emit(float(d), float(t)),
                                      cancel=self.cancel_event)
        except hub.DownloadCancelled:
            self.failed.emit("Download cancelled.")
        except hub.NetworkUnavailable as exc:
            self.failed.emit(str(exc))
        except Exception as exc:  # disk full, repository gone, ...: tell the user what happened
            self.failed.emit(f"Downloading {self.repo_id} failed: {exc}")
        else:
            self.succeeded.emit(str(path))


LAYOUTS_EXPLAINED = (
    "Each model comes in two layouts that give the same results: the original one "
    "(Qwen/Qwen3-ASR-0.6B) and one arranged for the transformers library (names ending in -hf). "
    "Either works here; you need only one of them.")


def same_folder(a, b) -> bool:
    if not a or not b:
        return False
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return str(a) == str(b)


def folder_size(folder) -> int:
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file())


def in_use_text(current_model: str) -> str:
    """Which model the app uses now, in words (a local folder counts too)."""
    if not current_model:
        return "No model in use yet."
    for model in KNOWN_MODELS:
        if same_folder(default_model_dest(model.repo_id), current_model):
            return f"In use now: {model.repo_id} (downloaded)."
    return f"In use now: the model folder {current_model}"


class ModelManagerDialog(QDialog):
    model_chosen = Signal(str, str)  # folder, kind ("asr" or "aligner")

    def __init__(self, current_model: str = "", first_run: bool = False, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Models")
        self.setMinimumSize(820, 360)
        intro = QLabel(
            "<b>Choose a speech model to get started.</b> Download one (it is stored on this "
            "computer and works offline afterwards), or pick a folder that already holds one."
            if first_run else "Download a model, or use a model folder you already have.")
        intro.setWordWrap(True)
        self.current_model = current_model
        self.in_use = QLabel(in_use_text(current_model))
        self.in_use.setObjectName("modelInUse")
        self.in_use.setWordWrap(True)
        self.in_use.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layouts = QLabel(LAYOUTS_EXPLAINED)
        layouts.setWordWrap(True)
        layouts.setStyleSheet("color: palette(placeholder-text);")
        self.list = QTreeWidget()
        self.list.setObjectName("modelList")
        # "Size": on disk once downloaded, the download's size before.
        self.list.setHeaderLabels(["Model", "Status", "Size", "What it is"])
        self.list.setRootIsDecorated(False)
        self.list.setAlternatingRowColors(True)
        self.list.setWordWrap(True)
        header = self.list.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        for model in KNOWN_MODELS:
            item = QTreeWidgetItem(self.list)
            item.setData(0, MODEL_ROLE, model)
            item.setText(0, model.repo_id)
            item.setText(3, model.description)
            item.setToolTip(3, model.description)
        self.refresh_list(current_model)
        self.list.currentItemChanged.connect(lambda *_: self._update_buttons())
        self.progress = QProgressBar()
        self.progress.setVisible(False)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.download_button = QPushButton("Download")
        self.download_button.clicked.connect(self.start_download)
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.clicked.connect(self.cancel_download)
        self.use_button = QPushButton("Use this model")
        self.use_button.clicked.connect(self.use_selected)
        self.folder_button = QPushButton("Choose a local folder…")
        self.folder_button.clicked.connect(self.choose_folder)
        self.delete_button = QPushButton("Delete download")
        self.delete_button.setToolTip("Remove the downloaded files from this computer")
        self.delete_button.clicked.connect(self.delete_selected)
        row = QHBoxLayout()
        for button in (self.download_button, self.cancel_button, self.use_button,
                       self.delete_button):
            row.addWidget(button)
        row.addWidget(self.folder_button)
        row.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        row.addWidget(close)  # one row of buttons, Close at the end of it
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.in_use)
        layout.addWidget(self.list, 1)
        self.description = description_label(self.list)
        layout.addWidget(self.description)
        layout.addWidget(layouts)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        layout.addLayout(row)
        self.thread: DownloadThread | None = None
        model_sizes.lookup().found.connect(self._size_found)
        self.select(0)
        if current_model and not any(same_folder(default_model_dest(m.repo_id), current_model)
                                     for m in KNOWN_MODELS):
            mark_local_folder(self.list, current_model, "asr")
        self._update_buttons()

    def showEvent(self, event):
        # Lazily: only a dialog someone looks at asks the Hub, and never on the UI thread.
        model_sizes.lookup().ask([m.repo_id for m in KNOWN_MODELS
                                  if not is_model_dir(default_model_dest(m.repo_id))])
        super().showEvent(event)

    def _size_found(self, repo_id: str):
        self.refresh_list()
        self._update_buttons()

    def select(self, row: int):
        self.list.setCurrentItem(self.list.topLevelItem(row))

    def refresh_list(self, current_model: str = ""):
        for row in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(row)
            model = item.data(0, MODEL_ROLE)
            if model is None:   # a local folder's row (app.models.model_choice)
                continue
            dest = default_model_dest(model.repo_id)
            if is_model_dir(dest):
                state = "In use" if same_folder(dest, current_model or self.current_model) \
                    else "Downloaded"
                item.setText(2, format_size(folder_size(dest)))
            else:
                state = "Not downloaded"
                item.setText(2, model_sizes.download_size_text(model.repo_id))
            item.setText(1, state)

    def selected_model(self):
        item = self.list.currentItem()
        return item.data(0, MODEL_ROLE) if item else None

    def _update_buttons(self):
        model = self.selected_model()
        busy = self.thread is not None and self.thread.isRunning()
        downloaded = model is not None and is_model_dir(default_model_dest(model.repo_id))
        self.download_button.setEnabled(model is not None and not busy and not downloaded)
        self.download_button.setText(
            f"Download ({model_sizes.download_size_text(model.repo_id)})"
            if model is not None and not downloaded else "Download")
        self.cancel_button.setEnabled(busy)
        self.use_button.setEnabled(downloaded and not busy)
        in_use = model is not None and same_folder(default_model_dest(model.repo_id),
                                                   self.current_model)
        self.delete_button.setEnabled(downloaded and not busy and not in_use)
        self.list.setEnabled(not busy)

    def delete_selected(self, confirm: bool = True) -> bool:
        """Delete the selected download (never the model in use); asks first unless told not to."""
        import shutil

        from PySide6.QtWidgets import QMessageBox

        model = self.selected_model()
        if model is None:
            return False
        dest = default_model_dest(model.repo_id)
        if not is_model_dir(dest) or same_folder(dest, self.current_model):
            return False
        if confirm and QMessageBox.question(
                self, "Delete download",
                f"Delete {model.repo_id} ({format_size(folder_size(dest))}) from this computer? "
                "You can download it again later.") != QMessageBox.StandardButton.Yes:
            return False
        try:
            shutil.rmtree(dest)
        except OSError as exc:
            self.status.setText(f"Could not delete {dest}: {exc}")
            return False
        self.status.setText(f"Deleted {model.repo_id}.")
        self.refresh_list()
        self._update_buttons()
        return True

    def start_download(self):
        model = self.selected_model()
        if model is None:
            return
        self.thread = DownloadThread(model.repo_id, default_model_dest(model.repo_id), self)
        self.thread.progress.connect(self._progress)
        self.thread.succeeded.connect(self._downloaded)
        self.thread.failed.connect(self._failed)
        self.thread.finished.connect(self._update_buttons)
        self.progress.setRange(0, 0)
        self.progress.setVisible(True)
        self.status.setText(f"Connecting to download {model.repo_id}…")
        self.thread.start()
        self._update_buttons()

    def cancel_download(self):
        if self.thread is not None:
            self.thread.cancel_event.set()
            self.status.setText("Cancelling…")

    def _progress(self, done: float, total: float):
        if total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * min(1.0, done / total)))
            self.status.setText(f"Downloaded {done / 1e6:,.0f} of {total / 1e6:,.0f} MB")

    def _downloaded(self, folder: str):
        self.progress.setVisible(False)
        model = self.selected_model()
        self.status.setText(f"Downloaded to {folder}.")
        self.refresh_list()
        if model is not None:
            self.model_chosen.emit(folder, model.kind)
            self._close_after_choice()

    def _failed(self, message: str):
        self.progress.setVisible(False)
        self.status.setText(message)

    def use_selected(self):
        model = self.selected_model()
        if model is not None:
            folder = str(default_model_dest(model.repo_id))
            self.model_chosen.emit(folder, model.kind)
            self.status.setText(f"Using {model.repo_id}.")
            self._now_using(folder, model.kind)
            self.refresh_list(folder)
            self._close_after_choice()

    def choose_folder(self):
        folder = dialog_folders.choose_folder(self, "Choose a model folder", remember_parent=True,
                                              key=dialog_folders.MODELS_FOLDER)
        if folder:
            self.use_folder(folder)

    def use_folder(self, folder: str) -> bool:
        try:   # a path that is missing or a file says so, and is never taken for a Hub id
            hub.local_model_folder(folder)
        except ValueError as exc:
            self.status.setText(f"{exc}.")
            return False
        if not is_model_dir(folder):
            self.status.setText(f"{folder} does not hold a model: it needs config.json, "
                                "*.safetensors weights and tokenizer files.")
            return False
        from engine.errors import CheckpointError
        from engine.network.model_kind import ALIGNER, KIND_NAMES, model_kind

        try:   # the checkpoint's own config says what it is, never the folder's name
            kind = model_kind(folder)
        except (CheckpointError, OSError) as exc:
            self.status.setText(f"{exc}.")
            return False
        self.model_chosen.emit(folder, kind)
        self.status.setText(f"Using {folder} as the aligner (word timestamps): it holds "
                            f"{KIND_NAMES[kind]}." if kind == ALIGNER else f"Using {folder}.")
        self._now_using(folder, kind)
        mark_local_folder(self.list, folder, kind)
        self._close_after_choice()
        return True

    def _close_after_choice(self):
        """A choice made is the dialog's job done (it stays open on the first run's download
        errors only, which never reach here)."""
        if self.isVisible():
            self.accept()

    def _now_using(self, folder: str, kind: str) -> None:
        if kind == "asr":  # the aligner is an extra: "in use" names the speech model
            self.current_model = folder
            self.in_use.setText(in_use_text(folder))
            self._update_buttons()

    def closeEvent(self, event):
        self.cancel_download()
        if self.thread is not None:
            self.thread.wait(5000)
        super().closeEvent(event)

    def reject(self):
        self.cancel_download()
        if self.thread is not None:
            self.thread.wait(5000)
        super().reject()
