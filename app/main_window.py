"""The main window: queue and history on the left, the transcript on the right."""
from __future__ import annotations

import logging
from pathlib import Path

from PySide6.QtCore import QRect, Qt, QTimer, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QCheckBox,
    QLayout,
    QMainWindow,
    QMenu,
    QMessageBox,
    QSizePolicy,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import APP_NAME
from app.widgets import dialog_folders
from app import settings as S
from app.widgets.elided_label import ElidedLabel
from app.export.export_actions import CHOICES, clipboard_text, export_many
from app.export.export_run import ExportCommands
from app.queue.file_collect import collect_audio_files, describe_refused
from app.history.history_actions import HistoryActions
from app.history.history_panel import HistoryPanel
from app.widgets.notice_bar import NoticeBar
from app.queue.queue_controller import QueueController
from app.queue.queue_model import EDITABLE_STATES, IN_FLIGHT
from app.queue.queue_view import LOADING_MODEL_TEXT, QueuePanel
from app.transcript.edit_alignment import EditAlignment
from app.transcript.transcript_edits import TranscriptEdits
from app.transcript.transcript_view import TranscriptView

log = logging.getLogger(__name__)

WAITING_FOR_MODEL = "Waiting for a model — choose one in Models"
GETTING_STARTED = (
    "1. Choose a model: Tools ▸ Models… downloads one (Qwen3-ASR-0.6B is fast) or uses a folder "
    "you already have.\n\n"
    "2. Drop audio or video files or folders on the window (or File ▸ Add files…). They are "
    "transcribed one after another; the queue shows progress and time left.\n\n"
    "3. Click a finished file to read its transcript. Double-click a line to correct it; click a "
    "word to play from there.\n\n"
    "4. Export subtitles (SRT, VTT) or text with the Export button.\n\n"
    "Live captions (Ctrl+L) transcribe the microphone or what the computer plays as you listen.")


def can_ask_user() -> bool:
    """False on Qt's offscreen platform: a question box there would wait for an answer forever."""
    return QGuiApplication.platformName() not in ("offscreen", "minimal")


def toolbar_icon(name: str):
    """A toolbar icon from resources/icons; a blank icon when it is missing (icons are cosmetic)."""
    from PySide6.QtGui import QIcon

    try:
        import resources

        return QIcon(str(resources.resource_path(f"icons/toolbar-{name}.svg")))
    except (ImportError, FileNotFoundError, ValueError):
        return QIcon()


class MainWindow(ExportCommands, QMainWindow):
    def __init__(self, client, history, settings, parent=None):
        super().__init__(parent)
        self.setWindowTitle(APP_NAME)
        self.setAcceptDrops(True)
        self.resize(1180, 720)
        # The window's minimum is ours, never the content's: a long file name once made it
        # 2225 px wide. Panels shrink and elide instead.
        self.setMinimumSize(640, 420)
        self.client, self.history, self.settings = client, history, settings
        self.queue = QueueController(client, history, settings.get(S.PARALLEL_FILES), self)
        self.queue.word_timestamps = bool(settings.get(S.WORD_TIMESTAMPS) and settings.get(S.ALIGNER))
        self.queue.max_chunk_seconds = settings.get(S.MAX_CHUNK_SECONDS)
        self.queue_panel = QueuePanel(self.queue.model)
        self.history_panel = HistoryPanel()
        self.transcript_view = TranscriptView()
        self.tabs = QTabWidget()
        self.tabs.addTab(self.queue_panel, "Queue")
        self.tabs.addTab(self.history_panel, "History")
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.tabs)
        self.splitter.addWidget(self.transcript_view)
        self.splitter.setSizes([672, 508])   # the queue: room for names beside five columns
        central = QWidget()
        margins = QVBoxLayout(central)  # breathing room: panels do not touch the window edges
        margins.setContentsMargins(6, 6, 6, 0)
        self.notice = NoticeBar()
        margins.addWidget(self.notice)
        margins.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.layout().setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.live_window = None
        self._selected_id: int | None = None
        self._model_loading_now = False
        self.edits = TranscriptEdits(history, self)   # undo/redo of transcript edits
        # an edited segment's words re-aligned by the loaded aligner (else they stay estimated)
        self.edit_alignment = EditAlignment(self.edits, history, client, self.transcript_view, self)
        self._build_actions()
        self._build_status_bar()
        self._connect()
        self.history_actions = HistoryActions(self)   # delete, versions, re-adding a known file
        self._build_edit_menu()
        from app.widgets import keyboard  # Space, Left/Right, F3, the View menu and the Tab order

        keyboard.install(self)
        from app.settings.view_prefs import MACHINE_SPEED   # the ETA's bound, measured in earlier runs

        client.worker.speed.value = settings.get(MACHINE_SPEED) or None
        client.worker.speed_measured.connect(lambda value: settings.set(MACHINE_SPEED, value))
        self.history_panel.set_records(history.list_transcripts())
        resumed = self.queue.restore(history.unfinished())
        if resumed:
            n = len(resumed)
            self.notice.show_notice(f"{n} unfinished file{'s were' if n != 1 else ' was'} resumed "
                                    "from the last session.")
        from app.watch.watch_folder_service import WatchFolderService

        self.watch_folder = WatchFolderService(self.settings, self.queue, parent=self)
        self.watch_folder.message.connect(lambda text: self.statusBar().showMessage(text, 10000))

    # -- construction ---------------------------------------------------------------------
    def _action(self, text, slot, shortcut=None, tip=""):
        action = QAction(text, self)
        action.triggered.connect(slot)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.setStatusTip(tip)
        return action

    def _build_actions(self):
        self.add_action = self._action("Add files…", self.add_files_dialog,
                                       QKeySequence.StandardKey.Open, "Add audio or video files")
        self.add_folder_action = self._action("Add folder…", self.add_folder_dialog)
        self.quit_action = self._action("Quit", self.close, QKeySequence.StandardKey.Quit)
        self.live_action = self._action("Live captions", self.open_live_window, "Ctrl+L",
                                        "Transcribe the microphone as you speak")
        self.models_action = self._action("Models…", self.open_model_manager)
        self.settings_action = self._action("Settings…", self.open_settings,
                                            QKeySequence.StandardKey.Preferences)
        self.about_action = self._action("About", self.open_about)
        self.getting_started_action = self._action("Getting started", self.open_getting_started,
                                                   QKeySequence.StandardKey.HelpContents)
        self.shortcuts_action = self._action("Keyboard shortcuts", self.open_shortcuts)
        self.data_folder_action = self._action("Open data folder", self.open_data_folder, None,
                                               "History, downloaded models, recordings and logs")
        table = self.queue_panel.table
        self.cancel_action = self._action("Cancel", lambda: self.queue.cancel(table.selected_job_ids()))
        self.retry_action = self._action("Retry", lambda: self.queue.retry(table.selected_job_ids()))
        self.again_action = self._action(
            "Transcribe again", lambda: self.history_actions.transcribe_again(table.selected_job_ids()))
        self.remove_action = self._action("Remove", self.remove_selected)
        self.context_action = self._action("Context…", lambda: self.queue_panel.edit_context(), None,
                                           "Names, terms or a topic that help recognition")
        self.speakers_action = self._action("Speakers…", lambda: self.queue_panel.edit_speakers(), None,
                                            "Label who speaks in the selected files (Off, Automatic, 1-8)")
        self.export_menu = QMenu("Export", self)
        self.export_actions = []
        for choice in CHOICES:
            action = self.export_menu.addAction(choice.label)
            action.triggered.connect(lambda _=False, c=choice: self.export_selected(c))
            self.export_actions.append(action)
        self.export_menu.addSeparator()
        self.copy_action = self.export_menu.addAction("Copy text to clipboard")
        self.copy_action.triggered.connect(self.copy_selected)
        # Ctrl+E exports in the formats ticked in Export… (SRT until then); the menu has the rest.
        self.export_default_action = self._action("Export in the chosen formats",
                                                  self.export_in_chosen_formats, "Ctrl+E")
        self.export_dialog_action = self._action("Export…", self.open_export_dialog, "Ctrl+Shift+E",
                                                 "Several formats at once, all files, or Save As")
        self.export_all_action = self._action("Export all finished files", self.export_all)
        self.export_menu.insertActions(self.export_menu.actions()[0],
                                       [self.export_dialog_action, self.export_all_action])
        self.export_menu.insertSeparator(self.export_menu.actions()[2])
        # The menu is built for the rows under the pointer, so it offers only what applies.
        table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        table.customContextMenuRequested.connect(self._queue_context_menu)
        file_menu = self.menuBar().addMenu("&File")
        for action in (self.add_action, self.add_folder_action):
            file_menu.addAction(action)
        file_menu.addMenu(self.export_menu)
        file_menu.addAction(self.export_default_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        tools = self.menuBar().addMenu("&Tools")
        for action in (self.live_action, self.models_action, self.settings_action):
            tools.addAction(action)
        help_menu = self.menuBar().addMenu("&Help")
        for action in (self.getting_started_action, self.shortcuts_action, self.data_folder_action):
            help_menu.addAction(action)
        help_menu.addSeparator()
        help_menu.addAction(self.about_action)
        for action, name in ((self.add_action, "add"), (self.live_action, "live"),
                             (self.models_action, "models"), (self.settings_action, "settings")):
            action.setIcon(toolbar_icon(name))
        toolbar = self.addToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setMovable(False)
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        toolbar.addAction(self.add_action)
        export_button = QToolButton()
        export_button.setText("Export")
        export_button.setIcon(toolbar_icon("export"))
        export_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        export_button.setMenu(self.export_menu)
        export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        toolbar.addWidget(export_button)
        toolbar.addSeparator()
        for action in (self.live_action, self.models_action, self.settings_action):
            toolbar.addAction(action)

    def _build_status_bar(self):
        from app.widgets.status_bar import ElidingStatusBar   # long messages end in "…" at a word

        self.setStatusBar(ElidingStatusBar())
        # A long model folder name ends in "…" (full text in the tooltip): a plain label was cut
        # off at the window's edge with nothing to say so.
        self.model_label = ElidedLabel("No model", mode=Qt.TextElideMode.ElideRight)
        self.activity_label = ElidedLabel("")
        for label in (self.model_label, self.activity_label):
            # Its own width, eliding only when squeezed: with the label's default Ignored policy
            # the status bar gave it a few pixels and it painted over the model label.
            label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
            label.setContentsMargins(8, 0, 8, 0)
        self.statusBar().addPermanentWidget(self.activity_label)
        self.statusBar().addPermanentWidget(self.model_label)

    def _connect(self):
        panel = self.queue_panel
        panel.cancel_clicked.connect(lambda: self.queue.cancel(panel.table.selected_job_ids()))
        panel.retry_clicked.connect(lambda: self.queue.retry(panel.table.selected_job_ids()))
        panel.again_clicked.connect(
            lambda: self.history_actions.transcribe_again(panel.table.selected_job_ids()))
        self.transcript_view.models_requested.connect(self.open_model_manager)
        panel.remove_clicked.connect(self.remove_selected)
        panel.move_clicked.connect(lambda d: self.queue.move(panel.table.selected_job_ids(), d))
        panel.table.selectionModel().currentRowChanged.connect(self._queue_row_changed)
        self.history_panel.transcript_selected.connect(self._show_history_transcript)
        self.transcript_view.segment_edited.connect(self.edits.edit)
        self.edits.saved.connect(self._edit_saved)
        self.edits.failed.connect(lambda text: self.statusBar().showMessage(text, 10000))
        self.transcript_view.speakers_edited.connect(self._speakers_edited)
        self.queue.message.connect(lambda text: self.statusBar().showMessage(text, 8000))
        self.queue.job_done.connect(self._job_done)
        self.queue.job_changed.connect(self._job_changed)
        worker = self.client.worker
        from app.transcript.speaker_setup import speaker_choice, speakers_setting, voice_match_setting
        from app.transcript.speaker_names import SpeakerNamer

        worker.speakers = speakers_setting(self.settings)
        self.queue.speakers = speaker_choice(worker.speakers)     # each new file's own choice
        # renames carried to re-runs and remembered voices (voice_profiles.json in the data folder)
        self.speaker_namer = SpeakerNamer(threshold=voice_match_setting(self.settings))
        self.queue.speaker_namer = self.speaker_namer
        self.transcript_view.speakers.namer = self.speaker_namer
        worker.model_loading.connect(self._model_loading)
        worker.model_loaded.connect(self._model_loaded)
        worker.model_failed.connect(self._model_failed)
        worker.activity.connect(self._activity)

    # -- files in -----------------------------------------------------------------------------
    def add_paths(self, paths) -> list[int]:
        """Queue files and folders (recursively); unsupported ones are reported, not queued."""
        collected = collect_audio_files(paths)
        accepted = self.history_actions.new_paths(collected.accepted)   # done before: ask
        ids = self.queue.add_files(accepted, self.settings.get(S.LANGUAGE) or None,
                                   self.settings.get(S.CONTEXT))
        if ids:
            self.tabs.setCurrentWidget(self.queue_panel)
        if collected.refused:
            # A notice, not a status message: the queue's own messages replaced it within a second.
            added = f"Added {len(ids)} file{'s' if len(ids) != 1 else ''}. " if ids else ""
            self.notice.show_notice(added + describe_refused(collected.refused))
        return ids

    def receive_files(self, paths) -> None:
        """Files handed over by a second start of the app: come to the front and queue them."""
        from app.single_instance import bring_to_front

        bring_to_front(self)
        if paths:
            self.add_paths(paths)

    def add_files_dialog(self):
        self.add_paths(dialog_folders.open_media_files(self, "Add audio or video files", self.settings))

    def add_folder_dialog(self):
        folder = dialog_folders.choose_folder(self, "Add every audio file in a folder", self.settings)
        if folder:
            self.add_paths([folder])

    def dragEnterEvent(self, event):
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dragMoveEvent(self, event):
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event):
        paths = [url.toLocalFile() for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self.add_paths(paths)

    # -- selection and transcript ------------------------------------------------------------
    def _queue_row_changed(self, current, _previous):
        if current.isValid():
            self._show_queue_item(self.queue.model.items[current.row()].job_id)

    def _show_queue_item(self, job_id: int):
        item = self.queue.model.item(job_id)
        if item is None:
            return
        self._selected_id = job_id
        waiting_for_model = item.state == "waiting" and not self.client.model_dir
        status = {"waiting": "Waiting to start.",
                  "running": f"Transcribing… {item.progress * 100:.0f}%",
                  "failed": item.error or "Failed.", "cancelled": "Cancelled."}.get(item.state, "")
        placeholder = {"failed": "No transcript: this file failed. Press Retry to try again.",
                       "cancelled": "No transcript: this file was cancelled. Press Retry to "
                                    "queue it again."}.get(item.state, "")
        if waiting_for_model:
            status = self.queue.model.wait_text or WAITING_FOR_MODEL
            placeholder = status
        partial = self.queue.partials.get(job_id) if item.transcript is None else None
        if partial:   # a running file's lines so far (app/partial_view.py)
            from app.transcript.partial_view import show_partial

            show_partial(self.transcript_view, item, partial, status)
            self.transcript_view.show_models_button(False)
            return
        self.transcript_view.show_transcript(job_id, item.transcript, item.path, item.name, status,
                                             placeholder)
        self.transcript_view.show_models_button(waiting_for_model and not self._model_loading_now)

    def _show_history_transcript(self, file_id: int):
        record, transcript = self.history.get_file(file_id), self.history.get_transcript(file_id)
        if record is not None and transcript is not None:
            self._selected_id = file_id
            self.transcript_view.show_transcript(file_id, transcript, record.path,
                                                 Path(record.path).name)
            # The queue marks the same file (or none): it kept marking the last one clicked.
            table, row = self.queue_panel.table, self.queue.model.row_of(file_id)
            blocker = table.selectionModel().blockSignals(True)
            try:
                table.clearSelection()
                if row >= 0:
                    table.selectRow(row)
            finally:
                table.selectionModel().blockSignals(blocker)
            table.viewport().update()
            self.queue_panel.refresh()

    def _job_done(self, job_id: int):
        item = self.queue.model.item(job_id)
        rec = self.history.get_file(job_id)
        self.history_panel.add(job_id, item.path, rec.finished_at if rec else None, item.transcript)
        if self._selected_id == job_id or self._selected_id is None:
            self.queue_panel.table.selectRow(self.queue.model.row_of(job_id))
            self._show_queue_item(job_id)

    def _job_changed(self, job_id: int):
        if self._selected_id != job_id:
            return
        view, item = self.transcript_view, self.queue.model.item(job_id)
        from app.transcript.partial_view import partial_is_shown

        if view.model.transcript is None:
            self._show_queue_item(job_id)
        elif item is not None and partial_is_shown(view, item):
            lines = self.queue.partials.get(job_id)
            if lines is None or len(lines) != view.model.rowCount():
                self._show_queue_item(job_id)   # more lines (or none: failed, cancelled)

    def _build_edit_menu(self):
        self.undo_action, self.redo_action = self.edits.actions(self)
        self.versions_action = self._action("Versions…", lambda: self.history_actions.open_versions(),
                                            None, "Every transcription and saved edit of this transcript")
        edit_menu = QMenu("&Edit", self)
        edit_menu.addActions([self.undo_action, self.redo_action])
        edit_menu.addSeparator()
        edit_menu.addAction(self.versions_action)
        self.menuBar().insertMenu(self.menuBar().actions()[1], edit_menu)

    def _edit_saved(self, file_id: int, index: int, transcript):
        """An edit (or its undo or redo) is stored: show it everywhere the transcript appears."""
        item = self.queue.model.item(file_id)
        if item is not None:
            item.transcript = transcript
        if self.transcript_view.model.file_id == file_id:
            self.transcript_view.model.replace_segment(index, transcript.segments[index])
        rec = self.history.get_file(file_id)
        self.history_panel.add(file_id, rec.path, rec.finished_at, transcript, edited=True)
        self.statusBar().showMessage("Edit saved", 3000)

    def _speakers_edited(self, file_id: int):
        """Speakers renamed, merged or reassigned in the view: store the transcript as shown."""
        import copy

        transcript = copy.deepcopy(self.transcript_view.model.transcript)
        self.history.save_transcript(file_id, transcript, edited=True)
        item = self.queue.model.item(file_id)
        if item is not None:
            item.transcript = transcript
        rec = self.history.get_file(file_id)
        if rec is not None:
            self.history_panel.add(file_id, rec.path, rec.finished_at, transcript, edited=True)
        self.statusBar().showMessage("Speakers saved", 3000)

    def selected_transcripts(self) -> list[tuple[str, object]]:
        """(source path, transcript) for the selected finished files, else the one shown."""
        out = []
        if self.tabs.currentWidget() is self.queue_panel:
            for job_id in self.queue_panel.table.selected_job_ids():
                transcript = self.history.get_transcript(job_id)
                if transcript is not None:
                    out.append((self.queue.model.item(job_id).path, transcript))
        if not out and self._selected_id is not None:
            rec, transcript = self.history.get_file(self._selected_id), \
                self.history.get_transcript(self._selected_id)
            if rec is not None and transcript is not None:
                out.append((rec.path, transcript))
        return out

    def export_selected(self, choice) -> list[Path]:
        items = self.selected_transcripts()
        if not items:
            self.statusBar().showMessage("Select a finished file to export.", 8000)
            return []
        existing: list = []
        written, errors = export_many(self.settings, items, choice, overwrite=False, existing=existing)
        if existing and self.ask_replace([path for _, path in existing]):
            # The same run again, replacing: names come out as in the first pass.
            written, errors = export_many(self.settings, items, choice, overwrite=True)
        if errors:
            QMessageBox.warning(self, "Export", "\n".join(errors))
        if written:
            where = written[0] if len(written) == 1 else f"{len(written)} files in {written[0].parent}"
            folder = written[0].parent
            self.notice.show_notice(f"Exported {where}", "Open folder",
                                    lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))))
        elif existing:
            self.statusBar().showMessage("Nothing exported: the files already there were kept.", 8000)
        return written

    def ask_replace(self, paths) -> bool:
        """Ask before an export replaces files that are already there (tests replace this).
        With no one to ask (an offscreen run) the files are kept."""
        if not can_ask_user():
            return False
        what = f"{paths[0].name} already exists" if len(paths) == 1 else \
            f"{len(paths)} files already exist"
        box = QMessageBox(QMessageBox.Icon.Question, "Replace files?",
                          f"{what} in {paths[0].parent}.\nReplace?", parent=self)
        if len(paths) > 1:
            box.setDetailedText("\n".join(p.name for p in paths))
        replace = box.addButton("Replace", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Keep the existing files", QMessageBox.ButtonRole.RejectRole)
        box.exec()
        return box.clickedButton() is replace

    def copy_selected(self):
        items = self.selected_transcripts()
        if items:
            QGuiApplication.clipboard().setText(clipboard_text(items))
            self.statusBar().showMessage("Copied the transcript text", 5000)

    def remove_selected(self):
        self.queue.remove(self.queue_panel.table.selected_job_ids())

    def queue_context_actions(self) -> list:
        """The context menu's entries for the selected rows: only those that would do something."""
        table = self.queue_panel.table
        states = {self.queue.model.item(j).state for j in table.selected_job_ids()}
        if not states:
            return []
        out = []
        if states & {"waiting", *IN_FLIGHT}:
            out.append(self.cancel_action)
        if states & {"failed", "cancelled"}:
            out.append(self.retry_action)
        if "done" in states:
            out.append(self.again_action)
        if states & set(EDITABLE_STATES):
            out.append(self.context_action)
        out.append(self.remove_action)
        if states & {*EDITABLE_STATES, "done"}:
            out.append(self.speakers_action)
        if "done" in states:
            out.append(self.export_menu.menuAction())
        return out

    def _queue_context_menu(self, pos):
        actions = self.queue_context_actions()
        if actions:
            menu = QMenu(self)
            menu.addActions(actions)
            menu.exec(self.queue_panel.table.viewport().mapToGlobal(pos))

    # -- model --------------------------------------------------------------------------
    def load_configured_model(self) -> bool:
        from app.backend.remote_engine import remote_model

        server = remote_model(self.settings)   # Settings > Engine: Server
        if server:
            self.client.load_model(server)
            return True
        model = self.settings.get(S.MODEL)
        if not model:
            self.model_label.setText("No model")
            self._set_wait_text(WAITING_FOR_MODEL)
            return False
        device = self.settings.get(S.DEVICE)
        dtype, quantize = S.model_precision(self.settings)
        self.client.load_model(model, "" if device == "auto" else device, dtype, self.settings.get(S.ALIGNER),
                               kv_cache_mb=self.settings.get(S.KV_CACHE_MB), quantize=quantize)
        return True

    def _model_loading(self, model_dir: str):
        self._model_loading_now = True
        self.model_label.setText(f"Loading {Path(model_dir).name}…")
        self._set_wait_text(LOADING_MODEL_TEXT)

    def _activity(self, text: str):
        # The model label already says "Loading …": the same words twice read as two loads.
        self.activity_label.setText("" if text.startswith("Loading model") else text)

    def _set_wait_text(self, text: str):
        self.queue.model.set_wait_text(text)
        if self._selected_id is not None and self.queue.model.item(self._selected_id) is not None:
            self._show_queue_item(self._selected_id)

    def _model_loaded(self, model_dir: str, device: str):
        self._model_loading_now = False
        self._set_wait_text("")
        self.model_label.setText(f"Model: {Path(model_dir).name} on {device}")
        self.statusBar().showMessage(f"Model ready: {Path(model_dir).name} on {device}", 8000)

    def _model_failed(self, message: str):
        self._model_loading_now = False
        self._set_wait_text(WAITING_FOR_MODEL)
        self.model_label.setText("Model failed to load")
        self.statusBar().showMessage(message, 20000)
        QMessageBox.warning(self, "Model", f"{message}\n\nChoose another model in Models….")

    # -- other windows ---------------------------------------------------------------------------
    def open_live_window(self):
        from app.live.live_window import LiveWindow

        if self.live_window is None:
            self.live_window = LiveWindow(self.client, self.settings)
            self.live_window.session_finished.connect(self.save_live_session)
        self.live_window.show()
        self.live_window.raise_()
        return self.live_window

    def save_live_session(self, text: str, segments, recording_path, seconds: float) -> int:
        """Keep a finished live session in History, with its recording when there is one."""
        import datetime as _dt

        from engine.text.types import Segment, Transcript

        stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        path = str(recording_path) if recording_path else f"Live captions {stamp}"
        segments = [Segment(s.start, s.end, s.text, list(getattr(s, "words", []) or []),
                            getattr(s, "language", None)) for s in segments if s.text.strip()] \
            or [Segment(0.0, seconds, text)]
        language = next((s.language for s in segments if s.language), None)
        transcript = Transcript(text=text, language=language, duration=seconds, segments=segments,
                                model=self.client.model_dir)
        file_id = self.history.add_file(path)
        self.history.save_transcript(file_id, transcript)
        rec = self.history.get_file(file_id)
        self.history_panel.add(file_id, path, rec.finished_at if rec else None, transcript)
        self.statusBar().showMessage("Live session saved in History", 8000)
        return file_id

    def open_settings(self):
        from app.settings.settings_dialog import SettingsDialog

        from app.backend.remote_engine import engine_choice

        before = [self.settings.get(k) for k in (S.MODEL, S.ALIGNER, S.DEVICE, S.DTYPE, S.QUANTIZE)] + engine_choice(self.settings)
        dialog = SettingsDialog(self.settings, self, model_chunk_seconds=self.client.model_chunk_seconds)
        if dialog.exec():
            self.apply_settings(before)
        return dialog

    def apply_settings(self, model_before=None):
        from app.widgets.theme import apply_theme

        self.queue.parallel = max(1, self.settings.get(S.PARALLEL_FILES))
        self.queue.word_timestamps = bool(self.settings.get(S.WORD_TIMESTAMPS)
                                          and self.settings.get(S.ALIGNER))
        self.queue.max_chunk_seconds = self.settings.get(S.MAX_CHUNK_SECONDS)
        from app.transcript.speaker_setup import speakers_setting

        self.client.worker.speakers = speakers_setting(self.settings)   # files queued from now on
        from app.transcript.speaker_setup import speaker_choice, voice_match_setting

        self.queue.speakers = speaker_choice(self.client.worker.speakers)
        self.speaker_namer.threshold = voice_match_setting(self.settings)
        self.history_actions.prune_recordings()
        if hasattr(self, "watch_folder"):
            self.watch_folder.configure()
        app = QGuiApplication.instance()
        if app is not None:
            apply_theme(app, self.settings.get(S.THEME))
        from app.backend.remote_engine import engine_choice

        now = [self.settings.get(k) for k in (S.MODEL, S.ALIGNER, S.DEVICE, S.DTYPE, S.QUANTIZE)] + engine_choice(self.settings)
        if model_before is not None and now != model_before:
            self.load_configured_model()
        self.queue.dispatch()

    def open_model_manager(self, first_run: bool = False):
        from app.models.model_manager import ModelManagerDialog

        dialog = ModelManagerDialog(self.settings.get(S.MODEL), first_run, self)
        dialog.model_chosen.connect(self._model_chosen)
        dialog.open()
        return dialog

    def _model_chosen(self, folder: str, kind: str):
        self.settings.set(S.ALIGNER if kind == "aligner" else S.MODEL, folder)
        self.settings.sync()
        self.apply_settings(model_before=[])

    def open_about(self):
        from app.widgets.about_dialog import AboutDialog

        dialog = AboutDialog(self.client.model_dir, self.client.device, self, hardware=self.client.hardware)
        dialog.open()
        return dialog

    def start(self):
        """After the window shows: load the model, or guide a first-time user to Models."""
        if not self.load_configured_model():
            QTimer.singleShot(0, lambda: self.open_model_manager(first_run=True))

    def unfinished_count(self) -> int:
        return self.queue.model.count("waiting", *IN_FLIGHT)

    def ask_quit(self, unfinished: int) -> tuple[bool, bool]:
        """(quit?, don't ask again?) from a question box (tests replace this).
        With no one to ask (an offscreen run) the app quits, as it did before asking existed."""
        if not can_ask_user():
            return True, False
        box = QMessageBox(QMessageBox.Icon.Question, "Quit?",
                          f"{unfinished} file{'s are' if unfinished != 1 else ' is'} still being "
                          "transcribed or waiting.\nQuit now? They continue the next time you start "
                          "the app.", parent=self)
        quit_button = box.addButton("Quit", QMessageBox.ButtonRole.AcceptRole)
        box.addButton("Keep working", QMessageBox.ButtonRole.RejectRole)
        dont_ask = QCheckBox("Don't ask again")
        box.setCheckBox(dont_ask)
        box.exec()
        return box.clickedButton() is quit_button, dont_ask.isChecked()

    def closeEvent(self, event):
        unfinished = self.unfinished_count()
        if unfinished and self.settings.get(S.CONFIRM_QUIT):
            quit_now, dont_ask = self.ask_quit(unfinished)
            if not quit_now:
                event.ignore()
                return
            if dont_ask:
                self.settings.set(S.CONFIRM_QUIT, False)
        self.queue.shutdown()
        if self.live_window is not None:
            self.live_window.close()
        self.settings.set_raw("window/geometry", self.saveGeometry())
        self.settings.set_raw("window/splitter", self.splitter.saveState())
        self.settings.sync()
        super().closeEvent(event)

    def restore_geometry(self):
        # raw_bytes drops hand-edited values with a log line; Qt refuses malformed states itself
        geometry, splitter = self.settings.raw_bytes("window/geometry"), self.settings.raw_bytes("window/splitter")
        if geometry is not None and not self.restoreGeometry(geometry):
            self.settings.report_bad("window/geometry", geometry, "not a saved window geometry")
        if splitter is not None and not self.splitter.restoreState(splitter):
            self.settings.report_bad("window/splitter", splitter, "not a saved splitter state")
        self.fit_on_screen()

    def fit_on_screen(self) -> None:
        """Keep the window inside the screen it is on: a geometry saved on a larger screen (or
        made too wide by content) must not leave it wider than the screen at the next start."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        if screen is None:
            return
        area: QRect = screen.availableGeometry()
        if self.isMaximized() or self.isFullScreen():
            return
        width = min(self.width(), area.width())
        height = min(self.height(), area.height())
        if (width, height) != (self.width(), self.height()):
            self.resize(width, height)
        x = min(max(self.x(), area.left()), area.right() - width + 1)
        y = min(max(self.y(), area.top()), area.bottom() - height + 1)
        if (x, y) != (self.x(), self.y()):
            self.move(x, y)

    # -- help ---------------------------------------------------------------------------
    def open_getting_started(self):
        QMessageBox.information(self, "Getting started", GETTING_STARTED)

    def open_shortcuts(self):
        from app.widgets.keyboard import shortcuts_html

        QMessageBox.information(self, "Keyboard shortcuts", shortcuts_html())

    def open_data_folder(self):
        from app.paths import data_dir

        folder = data_dir()
        folder.mkdir(parents=True, exist_ok=True)
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder)))
