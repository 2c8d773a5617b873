"""Live captions: microphone, a sound-server source (what an output plays, too) or a file played
as one, to text as it is spoken: a line per utterance, with its start time when "Times" is on.

The audio never passes through the UI thread: an AudioFeeder thread drains the AudioSource,
appends to the recording and feeds the engine stream through the EngineClient's queued call.
The engine worker sends caption events (the segments committed since its last event and the
tentative text), which the CaptionView appends: committed text shown normally, the tentative
tail in lighter italics since it may still change. A 50 ms UI timer only moves the level meter
and notices a failed or finished input.
"""
from __future__ import annotations

import datetime as _dt
import logging
import shutil
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.widgets import dialog_folders
from app import settings as S
from app.live.audio_feeder import AudioFeeder
from app.live.caption_view import TENTATIVE_COLOR, CaptionView, clock_text  # noqa: F401 (tests import them here)
from app.live.input_devices import (
    FILE_ITEM,
    IDLE_HINTS,
    PULSE_PREFIX,
    SYSTEM_AUDIO_ITEM,
    InputCombo,
    describe_input_error,
    friendly_input_name,  # noqa: F401 (tests import it from here)
    vanished_text,
)
from app.paths import recordings_dir

log = logging.getLogger(__name__)
LAG_SHOWN_ABOVE_S = 2.0      # below this the captions count as live; above, say how far behind they are


def lag_text(seconds: float) -> str:
    """The "behind" label: empty while the captions keep up."""
    return f"behind by {seconds:.0f} s" if seconds > LAG_SHOWN_ABOVE_S else ""


# A slim scroll bar in the caption panel's own colours: the light default one looked
# like a stray white box on the dark panel.
CAPTION_SCROLLBAR = (
    "QTextBrowser#liveTranscript QScrollBar:vertical { background: #0F172A; width: 8px;"
    " margin: 2px; border: none; }"
    "QTextBrowser#liveTranscript QScrollBar::handle:vertical { background: #475569;"
    " border-radius: 3px; min-height: 24px; }"
    "QTextBrowser#liveTranscript QScrollBar::add-line:vertical,"
    " QTextBrowser#liveTranscript QScrollBar::sub-line:vertical { height: 0; border: none; }"
    "QTextBrowser#liveTranscript QScrollBar::add-page:vertical,"
    " QTextBrowser#liveTranscript QScrollBar::sub-page:vertical { background: none; }")


def level_percent(dbfs: float) -> int:
    """Map -60..0 dBFS onto the meter's 0..100."""
    return int(max(0.0, min(100.0, (dbfs + 60.0) * 100.0 / 60.0)))


class LiveWindow(QWidget):
    # text, committed segments, recording path or None, seconds: one finished session, for History
    session_finished = Signal(str, object, object, float)

    def __init__(self, client, settings, parent=None):
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Live captions")
        self.resize(760, 420)
        self.client, self.settings = client, settings
        self.source = None
        self.feeder: AudioFeeder | None = None   # the capture thread of the running session
        self.stream_id: int | None = None
        self.recording_path: Path | None = None
        self.committed: list[str] = []
        self.committed_segments: list = []
        self.tentative = ""
        self._last_samples = 0      # the length of the session that ended
        self._session_saved = False

        self.device_combo = InputCombo()
        self.device_combo.setMinimumWidth(260)
        self.device_combo.selected_vanished.connect(self._input_vanished)
        self.device_combo.devices_changed.connect(self._inputs_changed)
        self.device_combo.select_key(settings.get(S.LIVE_DEVICE))   # the input chosen last time
        self.device_combo.currentIndexChanged.connect(self._input_chosen)
        self.device_combo.setAccessibleName("Input")
        self.start_button = QPushButton("Start")
        self.start_button.clicked.connect(self.toggle)
        self.meter = QProgressBar()
        self.meter.setObjectName("levelMeter")
        self.meter.setRange(0, 100)
        self.meter.setTextVisible(False)
        self.meter.setMaximumHeight(6)
        self.meter.setToolTip("Input level")
        self.font_spin = QSpinBox()
        self.font_spin.setRange(8, 72)
        self.font_spin.setSuffix(" pt")
        self.font_spin.setValue(settings.get(S.LIVE_FONT_SIZE))
        self.font_spin.valueChanged.connect(self._font_changed)
        self.on_top_check = QCheckBox("Stay on top")
        self.on_top_check.setChecked(settings.get(S.LIVE_STAY_ON_TOP))
        self.on_top_check.toggled.connect(self.set_stay_on_top)
        self.times_check = QCheckBox("Times")
        self.times_check.setToolTip("Show when each line was said, counted from Start")
        self.times_check.setChecked(settings.get(S.LIVE_SHOW_TIMES))
        self.times_check.toggled.connect(self._times_toggled)
        self.speakers_check = QCheckBox("Speakers")
        self.speakers_check.setToolTip("Label who speaks on each line (from the next Start; needs the speaker model)")
        self.speakers_check.toggled.connect(self._speakers_toggled)
        self.record_check = QCheckBox("Record audio")
        self.record_check.setChecked(settings.get(S.LIVE_RECORD_AUDIO))
        self.save_text_button = QPushButton("Save text…")
        self.save_text_button.clicked.connect(self.save_text_dialog)
        self.save_audio_button = QPushButton("Save audio…")
        self.save_audio_button.clicked.connect(self.save_audio_dialog)
        self.captions = CaptionView()
        self.captions.show_times = self.times_check.isChecked()
        self.captions.setObjectName("liveTranscript")
        self.captions.setPlaceholderText("Captions appear here as the words are heard.")
        self.status = QLabel(self.device_combo.idle_hint())
        self.status.setWordWrap(True)
        self.lag_label = QLabel()          # "behind by N s" when the engine cannot keep up
        self.lag_label.setObjectName("liveLag")
        self.lag_label.setToolTip("The computer is slower than the speech: captions arrive late, "
                                  "and tentative updates come less often until it catches up.")
        self.lag_label.hide()

        top = QHBoxLayout()
        top.addWidget(QLabel("Input:"))
        top.addWidget(self.device_combo, 1)
        top.addWidget(self.start_button)
        options = QHBoxLayout()
        options.addWidget(QLabel("Text size:"))
        options.addWidget(self.font_spin)
        options.addWidget(self.on_top_check)
        options.addWidget(self.times_check)
        options.addWidget(self.speakers_check)
        options.addWidget(self.record_check)
        options.addStretch(1)
        options.addWidget(self.save_text_button)
        options.addWidget(self.save_audio_button)
        level = QHBoxLayout()
        level_label = QLabel("Level:")
        level_label.setToolTip("Input level")
        level.addWidget(level_label)
        level.addWidget(self.meter, 1)
        level.addWidget(self.lag_label)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(level)
        layout.addWidget(self.captions, 1)
        layout.addLayout(options)
        layout.addWidget(self.status)

        self.pump = QTimer(self, interval=50)   # the meter and the input's health, nothing else
        self.pump.timeout.connect(self._watch_input)
        worker = client.worker
        worker.stream_captions.connect(self._stream_captions)
        worker.stream_finished.connect(self._stream_finished)
        if hasattr(worker, "stream_lag"):
            worker.stream_lag.connect(self._stream_lag)
        worker.stream_failed.connect(self._stream_failed)
        self._font_changed(self.font_spin.value())
        self._update_buttons()
        if self.on_top_check.isChecked():
            self.set_stay_on_top(True)

    # -- sources -----------------------------------------------------------------------
    def _input_vanished(self, name: str):
        self.status.setText(vanished_text(name))

    def _input_chosen(self, _index: int):
        self.settings.set(S.LIVE_DEVICE, self.device_combo.choice_key())

    def _inputs_changed(self):
        # Only the idle hints follow the list; a message about the last session stays.
        if self.status.text() in IDLE_HINTS:
            self.status.setText(self.device_combo.idle_hint())

    def toggle(self):
        if self.source is not None:
            self.stop()
            return
        choice = self.device_combo.currentData()
        try:
            if choice == FILE_ITEM:
                path = dialog_folders.open_media_file(self, "Play a file as live input", self.settings)
                if not path:
                    return
                from engine.audio.recorder import FileSource

                source, label = FileSource(path), Path(path).name
            elif choice == SYSTEM_AUDIO_ITEM:
                from engine.audio.system_audio import SystemAudioSource

                source, label = SystemAudioSource(), ""
            elif isinstance(choice, str) and choice.startswith(PULSE_PREFIX):
                from engine.audio.system_audio import SystemAudioSource

                source, label = SystemAudioSource(choice[len(PULSE_PREFIX):]), ""
            else:
                from engine.audio.microphone import MicrophoneSource

                source, label = MicrophoneSource(choice), ""
        except Exception as exc:
            self.status.setText(f"Cannot open the input: {exc}")
            return
        self.start_source(source, label)

    def start_source(self, source, label: str = "") -> bool:
        """Start captioning from any engine.audio.sources.AudioSource (tests pass a FileSource);
        ``label`` names a file being played, for the status line."""
        if self.source is not None:
            self.stop()
        if not self.client.model_dir:
            self.status.setText("No model is loaded yet: choose one in Models first.")
            return False
        try:
            source.start()
        except Exception as exc:
            self.status.setText(f"Cannot start the input: {exc}")
            return False
        # Unrecorded: no file (the last session's went to History with this session's text).
        self.recording_path = None
        recorder = self._open_recording() if self.record_check.isChecked() else None
        stream_id = self.client.open_stream(self.settings.get(S.LANGUAGE) or None,
                                            self.settings.get(S.CONTEXT))
        feeder = AudioFeeder(source, lambda pcm: self.client.feed_stream(stream_id, pcm), recorder)
        feeder.start()
        self.source, self.feeder, self.stream_id = source, feeder, stream_id
        self.committed, self.tentative = [], ""
        self.committed_segments = []
        self._last_samples = 0
        self._session_saved = False
        self.captions.clear_captions()
        self.pump.start()
        self.status.setText(f"Playing {label} as live input…" if label else "Listening…")
        self._update_buttons()
        return True

    def _open_recording(self):
        try:
            from engine.audio.recorder import SessionRecorder

            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            self.recording_path = recordings_dir() / f"live-{stamp}.wav"
            return SessionRecorder(self.recording_path)
        except Exception as exc:
            self.recording_path = None
            self.status.setText(f"Recording is off: {exc}")
            return None

    @property
    def _session_samples(self) -> int:
        """Samples heard in this session (the running one, else the last)."""
        return self.feeder.samples if self.feeder is not None else self._last_samples

    def stop(self):
        """Stop the input; the stream finishes the last words, then closes."""
        if self.source is None:
            return
        self.pump.stop()
        feeder, self.feeder, self.source = self.feeder, None, None
        feeder.stop()        # its thread feeds and records the last samples, then closes the recording
        self._last_samples = feeder.samples
        self.meter.setValue(0)
        if self.stream_id is not None:
            self.client.close_stream(self.stream_id)   # after every feed: same queue, later
        self.status.setText("Stopped." + (f" Audio recorded to {self.recording_path}."
                                          if self.recording_path else ""))
        if feeder.write_error:
            self.status.setText(feeder.write_error)
        self._update_buttons()

    def _watch_input(self):
        feeder = self.feeder
        if feeder is None:
            return
        self.meter.setValue(level_percent(feeder.level))
        if feeder.error:
            message = describe_input_error(feeder.source)
            self.stop()
            self.status.setText(message)
        elif feeder.finished:
            self.stop()  # a file source ran out: finish like a user pressing Stop

    # -- results -----------------------------------------------------------------------
    def _stream_captions(self, stream_id: int, event):
        """A caption event from the engine worker (app.backend.worker.CaptionEvent)."""
        if stream_id != self.stream_id:
            return
        new = list(event.segments)
        skip = len(self.committed_segments) - event.first   # segments this window already has
        if skip > 0:
            new = new[skip:]
        elif skip < 0:
            log.warning("live captions: %d committed segments never arrived", -skip)
        self.committed_segments.extend(new)
        self.committed.extend(seg.text for seg in new)
        self.tentative = event.tentative
        self.captions.update_captions(new, event.tentative, event.relabelled)

    def _stream_lag(self, stream_id: int, seconds: float):
        if stream_id == self.stream_id:
            text = lag_text(seconds)
            self.lag_label.setText(text)
            self.lag_label.setVisible(bool(text))

    def _stream_finished(self, stream_id: int):
        if stream_id == self.stream_id:
            self.lag_label.hide()
            self.tentative = ""
            self.captions.update_captions([], "")
            self.stream_id = None
            self._update_buttons()
            self._emit_session()

    def _emit_session(self):
        """Hand the finished session to History (once; an empty one is not kept)."""
        text = self.committed_text()
        if self._session_saved or not text:
            return
        self._session_saved = True
        self.session_finished.emit(text, list(self.committed_segments), self.recording_path,
                                   self._session_samples / 16000.0)

    def _stream_failed(self, stream_id: int, message: str):
        if stream_id == self.stream_id:
            self.stream_id = None
            self.stop()
            self.status.setText(message)

    def committed_text(self) -> str:
        return " ".join(t.strip() for t in self.committed if t.strip())

    # -- options and saving -------------------------------------------------------------
    def _speakers_toggled(self, on: bool):
        worker = getattr(self.client, "worker", None)   # a local engine; a remote one labels none
        if worker is not None:
            worker.live_speakers = on

    def _times_toggled(self, on: bool):
        self.settings.set(S.LIVE_SHOW_TIMES, on)
        self.captions.set_show_times(on)

    def _font_changed(self, size: int):
        # Light on dark like TV captions, in both themes: readable over any background.
        self.captions.setStyleSheet(
            f"QTextBrowser#liveTranscript {{ font-size: {size}pt; background-color: #0F172A;"
            f" color: #F8FAFC; border-radius: 10px; padding: 0px 6px; }}" + CAPTION_SCROLLBAR)
        # Room above the first line inside the document, not as widget padding: the padding
        # clipped the top caption line once the text scrolled.
        self.captions.document().setDocumentMargin(max(8, size // 2))
        self.settings.set(S.LIVE_FONT_SIZE, size)

    def set_stay_on_top(self, on: bool):
        self.settings.set(S.LIVE_STAY_ON_TOP, on)
        visible = self.isVisible()
        self.setWindowFlag(Qt.WindowType.WindowStaysOnTopHint, on)
        if visible:
            self.show()  # changing window flags hides the window

    def save_text(self, path) -> Path:
        from engine.text.exports import write_atomic

        return write_atomic(path, self.committed_text() + "\n")

    def save_text_dialog(self):
        path = dialog_folders.save_file(self, "Save the transcript", "live-captions.txt",
                                        "Text (*.txt)", self.settings)
        if path:
            try:
                self.save_text(path)
                self.status.setText(f"Saved {path}")
            except OSError as exc:
                self.status.setText(str(exc))

    def save_audio_dialog(self):
        if self.recording_path is None or not self.recording_path.exists():
            self.status.setText("Nothing recorded: tick “Record audio” before pressing Start.")
            return
        path = dialog_folders.save_file(self, "Save the recording", self.recording_path.name,
                                        "WAV audio (*.wav)", self.settings)
        if path:
            try:
                shutil.copyfile(self.recording_path, path)
                self.status.setText(f"Saved {path}")
            except OSError as exc:
                self.status.setText(f"Cannot save {path}: {exc}")

    def _update_buttons(self):
        running = self.source is not None
        self.start_button.setText("Stop" if running else "Start")
        self.device_combo.setEnabled(not running)
        self.record_check.setEnabled(not running)
        self.save_audio_button.setEnabled(not running and self.recording_path is not None)

    def closeEvent(self, event):
        self.stop()
        self.settings.set(S.LIVE_RECORD_AUDIO, self.record_check.isChecked())
        super().closeEvent(event)

    def showEvent(self, event):
        # A new opening starts a new session: the last one's text is in History.
        if self.source is None and self.stream_id is None:
            self.committed, self.tentative, self.committed_segments = [], "", []
            self.captions.clear_captions()
        self.device_combo.poll.start()   # inputs plugged in or out while it was hidden show up
        self.device_combo.check_devices()
        super().showEvent(event)

    def hideEvent(self, event):
        self.device_combo.poll.stop()    # nobody is looking: no PortAudio rescans
        super().hideEvent(event)
