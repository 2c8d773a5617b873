"""Preferences: model, transcription defaults, subtitle cue limits, export, appearance."""
from __future__ import annotations

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.widgets import dialog_folders
from app import settings as S
from app.languages import fill_language_combo
from app.settings import Settings


def _form_page() -> tuple[QWidget, QFormLayout]:
    """A settings page whose text fields fill the row while numbers and choices keep
    their natural width (a 400-pixel box around "42" looks broken)."""
    page, form = QWidget(), QFormLayout()
    form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
    page.setLayout(form)
    return page, form


def _folder_row(edit: QLineEdit, title: str, parent, settings=None, *, model: bool = False) -> QWidget:
    row = QWidget()
    row.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(edit, 1)
    browse = QPushButton("Browse…")

    def choose():
        # The field's folder, else the last one the user chose (never the working folder).
        folder = dialog_folders.choose_folder(parent, title, settings, edit.text().strip(), remember_parent=model)
        if folder:
            edit.setText(folder)

    browse.clicked.connect(choose)
    layout.addWidget(browse)
    return row


class SettingsDialog(QDialog):
    """``model_chunk_seconds``: the loaded model's automatic chunk length, shown beside "Automatic"."""

    def __init__(self, settings: Settings, parent=None, *, model_chunk_seconds: float | None = None):
        super().__init__(parent)
        self.model_chunk_seconds = model_chunk_seconds
        self.setWindowTitle("Settings")
        self.settings = settings
        tabs = QTabWidget()
        tabs.addTab(self._model_tab(), "Model")
        tabs.addTab(self._transcription_tab(), "Transcription")
        tabs.addTab(self._subtitles_tab(), "Subtitles")
        tabs.addTab(self._export_tab(), "Export")
        from app.watch.watch_folder_page import WatchFolderPage

        self.watch_page = WatchFolderPage(settings)
        tabs.addTab(self.watch_page, "Watch folder")
        tabs.addTab(self._appearance_tab(), "Appearance")
        tabs.addTab(self._history_tab(), "History")
        from app.settings.engine_page import EnginePage

        self.engine_page = EnginePage()
        tabs.addTab(self.engine_page, "Engine")
        # every tab's name in view: with scroll arrows (and a fixed 560 px minimum) "Engine", the
        # server's page, sat off the edge; without them the layout keeps the dialog as wide as its tabs
        tabs.setUsesScrollButtons(False)
        self.tabs = tabs
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(tabs)
        layout.addWidget(buttons)
        self.load()

    def _model_tab(self):
        page, form = _form_page()
        self.model_edit = QLineEdit()
        self.model_edit.setPlaceholderText("Folder of a Qwen3-ASR model (use Models… to download)")
        self.aligner_edit = QLineEdit()
        self.aligner_edit.setPlaceholderText("Optional: Qwen3-ForcedAligner folder, for word times")
        self.device_combo = QComboBox()
        self.device_combo.addItems(S.DEVICES)
        self.dtype_combo = QComboBox()
        self.dtype_combo.addItems(S.DTYPES)
        self.quantize_combo = QComboBox()
        self.quantize_combo.addItem("none (exact weights)", "none")
        self.quantize_combo.addItem("int8 (CPU): faster, not token-exact", "int8")
        for combo in (self.device_combo, self.dtype_combo, self.quantize_combo):
            combo.setMinimumWidth(160)
        form.addRow("Speech model:",
                    _folder_row(self.model_edit, "Choose a model folder", self, self.settings, model=True))
        form.addRow("Word aligner:",
                    _folder_row(self.aligner_edit, "Choose an aligner folder", self, self.settings, model=True))
        form.addRow("Device:", self.device_combo)
        form.addRow("Precision:", self.dtype_combo)
        form.addRow("Quantization:", self.quantize_combo)
        form.addRow(QLabel("“auto” uses the GPU when there is one, in bfloat16; else the CPU.\n"
                           "int8 quantization stores the decoder weights as int8: faster on CPU, "
                           "not token-exact."))
        return page

    def _transcription_tab(self):
        page, form = _form_page()
        self.language_combo = QComboBox()
        self.context_edit = QLineEdit()
        self.context_edit.setPlaceholderText("Names, terms or a topic that help recognition")
        self.words_check = QCheckBox("Word timestamps (needs the aligner)")
        self.parallel_spin = QSpinBox()
        self.parallel_spin.setRange(1, 64)
        self.parallel_spin.setToolTip("How many queued files the engine opens at once (its "
                                      "max_decoding_files); the next starts as soon as one has been "
                                      "read. With a server as the engine, the server decides.")
        self.parallel_spin.setMinimumWidth(100)
        self.chunk_spin = QSpinBox()
        self.chunk_spin.setRange(0, 1200)   # engine.arguments.MAX_CHUNK_SECONDS
        self.chunk_spin.setSuffix(" s")
        automatic = "Automatic"
        if self.model_chunk_seconds:
            automatic += f" (this model: {self.model_chunk_seconds:g} s)"
        self.chunk_spin.setSpecialValueText(automatic)
        self.chunk_spin.setToolTip("Long files are cut at pauses into chunks of at most this length, "
                                   "with or without word timestamps. Automatic: the model's own length "
                                   "(30 s for Qwen3-ASR; a model folder may declare another in its "
                                   "transcription_defaults.json). Shorter chunks suit small models.")
        self.chunk_spin.setMinimumWidth(100)
        form.addRow("Default language:", self.language_combo)
        form.addRow("Default context:", self.context_edit)
        form.addRow("", self.words_check)
        form.addRow("Files at once:", self.parallel_spin)
        form.addRow("Longest chunk:", self.chunk_spin)
        from app.transcript.speaker_setup import speaker_count_combo, voice_match_spin

        self.speakers_combo = speaker_count_combo()
        form.addRow("Speaker labels:", self.speakers_combo)
        self.voice_match_spin = voice_match_spin()
        form.addRow("Voice match:", self.voice_match_spin)
        self.kv_cache_spin = QSpinBox()
        self.kv_cache_spin.setRange(0, 1 << 20)   # engine.arguments.KV_CACHE_MB; 1-15 are saved as 16
        self.kv_cache_spin.setSingleStep(256)
        self.kv_cache_spin.setSuffix(" MiB")
        self.kv_cache_spin.setSpecialValueText("Automatic")
        self.kv_cache_spin.setToolTip("Memory for the model's attention cache (takes effect at the next model "
                                      "load). Automatic: room for 64 chunks, within a quarter of free memory "
                                      "on CPU. Raise it when long chunks are cut to fit.")
        self.kv_cache_spin.setMinimumWidth(100)
        form.addRow("KV cache budget:", self.kv_cache_spin)
        return page

    def _subtitles_tab(self):
        page, form = _form_page()
        self.line_chars_spin = QSpinBox()
        self.line_chars_spin.setRange(10, 200)
        self.lines_spin = QSpinBox()
        self.lines_spin.setRange(1, 5)
        self.min_dur_spin, self.max_dur_spin, self.gap_spin = (QDoubleSpinBox() for _ in range(3))
        for spin, top in ((self.min_dur_spin, 30.0), (self.max_dur_spin, 60.0), (self.gap_spin, 2.0)):
            spin.setRange(0.0, top)
            spin.setDecimals(2)
            spin.setSingleStep(0.1)
            spin.setSuffix(" s")
        for spin in (self.line_chars_spin, self.lines_spin, self.min_dur_spin, self.max_dur_spin,
                     self.gap_spin):
            spin.setMinimumWidth(100)
        form.addRow("Characters per line:", self.line_chars_spin)
        form.addRow("Lines per cue:", self.lines_spin)
        form.addRow("Shortest cue:", self.min_dur_spin)
        form.addRow("Longest cue:", self.max_dur_spin)
        form.addRow("Gap between cues:", self.gap_spin)
        return page

    def _export_tab(self):
        page, form = _form_page()
        self.export_dir_edit = QLineEdit()
        self.export_dir_edit.setPlaceholderText("Next to each audio file")
        self.template_edit = QLineEdit()
        form.addRow("Export folder:",
                    _folder_row(self.export_dir_edit, "Choose the export folder", self, self.settings))
        form.addRow("File name:", self.template_edit)
        hint = QLabel("Placeholders: {stem} (audio file name), {ext}, {date}, {lang}")
        hint.setWordWrap(True)
        form.addRow("", hint)
        return page

    def _appearance_tab(self):
        page, form = _form_page()
        self.theme_combo = QComboBox()
        for value, label in (("system", "Follow the system"), ("light", "Light"), ("dark", "Dark")):
            self.theme_combo.addItem(label, value)
        form.addRow("Theme:", self.theme_combo)
        return page

    def _history_tab(self):
        page, form = _form_page()
        self.recordings_days_spin = QSpinBox()
        self.recordings_days_spin.setRange(0, 3650)
        self.recordings_days_spin.setSuffix(" days")
        self.recordings_days_spin.setSpecialValueText("Never")
        self.recordings_days_spin.setMinimumWidth(100)
        self.recordings_days_spin.setToolTip("Recordings of live captions older than this are deleted "
                                             "when the app starts; their transcripts stay in History.")
        form.addRow("Delete recordings older than:", self.recordings_days_spin)
        hint = QLabel("To delete transcripts, select them in History and press Delete.")
        hint.setWordWrap(True)
        form.addRow("", hint)
        return page

    def load(self):
        g = self.settings.get
        self.model_edit.setText(g(S.MODEL))
        self.aligner_edit.setText(g(S.ALIGNER))
        self.device_combo.setCurrentText(g(S.DEVICE))
        dtype, quantize = S.model_precision(self.settings)
        self.dtype_combo.setCurrentText(dtype or "auto")
        self.quantize_combo.setCurrentIndex(max(0, self.quantize_combo.findData(quantize or "none")))
        fill_language_combo(self.language_combo, g(S.LANGUAGE))
        self.context_edit.setText(g(S.CONTEXT))
        self.words_check.setChecked(g(S.WORD_TIMESTAMPS))
        self.parallel_spin.setValue(g(S.PARALLEL_FILES))
        self.chunk_spin.setValue(g(S.MAX_CHUNK_SECONDS))
        self.kv_cache_spin.setValue(g(S.KV_CACHE_MB))
        from app.transcript.speaker_setup import set_speaker_choice, speakers_setting, voice_match_setting

        set_speaker_choice(self.speakers_combo, speakers_setting(self.settings))
        self.voice_match_spin.setValue(voice_match_setting(self.settings))
        self.line_chars_spin.setValue(g(S.MAX_LINE_CHARS))
        self.lines_spin.setValue(g(S.MAX_LINES))
        self.min_dur_spin.setValue(g(S.MIN_DURATION))
        self.max_dur_spin.setValue(g(S.MAX_DURATION))
        self.gap_spin.setValue(g(S.MIN_GAP))
        self.export_dir_edit.setText(g(S.EXPORT_DIR))
        self.template_edit.setText(g(S.EXPORT_TEMPLATE))
        self.theme_combo.setCurrentIndex(max(0, self.theme_combo.findData(g(S.THEME))))
        self.recordings_days_spin.setValue(max(0, g(S.DELETE_RECORDINGS_AFTER_DAYS)))
        self.engine_page.load(self.settings)
        self.watch_page.load()

    def save(self):
        s = self.settings.set
        s(S.MODEL, self.model_edit.text().strip())
        s(S.ALIGNER, self.aligner_edit.text().strip())
        s(S.DEVICE, self.device_combo.currentText())
        s(S.DTYPE, self.dtype_combo.currentText())
        s(S.QUANTIZE, self.quantize_combo.currentData())
        s(S.LANGUAGE, self.language_combo.currentData() or "")
        s(S.CONTEXT, self.context_edit.text())
        s(S.WORD_TIMESTAMPS, self.words_check.isChecked())
        s(S.PARALLEL_FILES, self.parallel_spin.value())
        s(S.MAX_CHUNK_SECONDS, self.chunk_spin.value())
        s(S.KV_CACHE_MB, self.kv_cache_spin.value() and max(16, self.kv_cache_spin.value()))
        s(S.SPEAKERS, self.speakers_combo.currentData())
        s(S.VOICE_MATCH, round(self.voice_match_spin.value(), 2))
        s(S.MAX_LINE_CHARS, self.line_chars_spin.value())
        s(S.MAX_LINES, self.lines_spin.value())
        s(S.MIN_DURATION, self.min_dur_spin.value())
        s(S.MAX_DURATION, max(self.max_dur_spin.value(), self.min_dur_spin.value()))
        s(S.MIN_GAP, self.gap_spin.value())
        s(S.EXPORT_DIR, self.export_dir_edit.text().strip())
        s(S.EXPORT_TEMPLATE, self.template_edit.text().strip() or "{stem}.{ext}")
        s(S.THEME, self.theme_combo.currentData())
        s(S.DELETE_RECORDINGS_AFTER_DAYS, self.recordings_days_spin.value())
        self.engine_page.save(self.settings)
        self.watch_page.save()
        self.settings.sync()

    def accept(self):
        self.save()
        super().accept()
