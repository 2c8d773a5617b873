"""The watch folder in the app: polls app/watch_folder.py on a timer, queues what is ready and
exports each finished transcript to the chosen folder in the chosen formats."""
from __future__ import annotations

import logging
import time
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal

from app import settings as S
from app.watch.watch_folder import DONE, FAILED, FolderWatcher, WatchState

log = logging.getLogger(__name__)

# The formats a watch folder can write, named as on the command line (cli/inputs.py):
# name -> (format, karaoke, timestamps, stem suffix), the suffixes the app's export uses.
WATCH_FORMATS = {
    "srt": ("srt", False, False, ""), "vtt": ("vtt", False, False, ""),
    "vtt-karaoke": ("vtt", True, False, ".karaoke"), "json": ("json", False, False, ""),
    "txt": ("txt", False, False, ""), "txt-timestamps": ("txt", False, True, ".timestamps"),
}
POLL_MS = 2000


def parse_formats(value: str) -> list[str]:
    """Known names from a comma-separated setting, in order; unknown ones are ignored."""
    return [f for f in (p.strip() for p in str(value).split(",")) if f in WATCH_FORMATS]


def state_file() -> Path:
    from app.paths import data_dir

    return data_dir() / "watch-folder.json"


class WatchFolderService(QObject):
    """Owns the FolderWatcher for the folder in Settings; ``queue`` is the QueueController."""

    message = Signal(str)

    def __init__(self, settings, queue, state_path: Path | None = None, clock=time.monotonic,
                 interval_ms: int = POLL_MS, parent=None):
        super().__init__(parent)
        self.settings, self.queue, self.clock = settings, queue, clock
        self.state = WatchState(state_path or state_file())
        self.watcher: FolderWatcher | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.poll)
        queue.job_done.connect(self._job_done)
        queue.job_changed.connect(self._job_changed)
        self.configure()

    def configure(self) -> None:
        """Follow the Settings: start, stop or move the watch (a new folder starts a new baseline)."""
        folder = self.settings.get(S.WATCH_DIR).strip()
        if not folder:
            self.watcher = None
            self.timer.stop()
            return
        settle = max(0.0, float(self.settings.get(S.WATCH_SETTLE_SECONDS)))
        if self.watcher is None or self.watcher.folder != Path(folder).resolve():
            self.watcher = FolderWatcher(folder, self.state, settle, clock=self.clock)
        self.watcher.settle_seconds = settle
        self.timer.start()

    def poll(self) -> list[int]:
        """Queue the files that are ready; returns their job ids."""
        if self.watcher is None:
            return []
        ids = []
        for path in self.watcher.poll():
            added = self.queue.add_files([path], self.settings.get(S.LANGUAGE) or None,
                                         self.settings.get(S.CONTEXT))
            self.watcher.handed_out(path, added[0] if added else None)
            ids += added
        if ids:
            self.message.emit(f"Watch folder: queued {len(ids)} new file{'s' if len(ids) != 1 else ''}")
        return ids

    def output_folder(self, source: str) -> Path:
        chosen = self.settings.get(S.WATCH_OUTPUT_DIR).strip()
        return Path(chosen) if chosen else Path(source).parent

    def _job_done(self, job_id: int) -> None:
        from engine.text.exports import export

        source = self.state.path_of_job(job_id)
        item = self.queue.model.item(job_id)
        if source is None or item is None or item.transcript is None:
            return
        written, errors = [], []
        for name in parse_formats(self.settings.get(S.WATCH_FORMATS)):
            fmt, karaoke, timestamps, suffix = WATCH_FORMATS[name]
            try:
                written.append(export(item.transcript, fmt, self.output_folder(source), Path(source).stem + suffix,
                                      self.settings.cue_options(), karaoke=karaoke, timestamps=timestamps,
                                      template=self.settings.get(S.EXPORT_TEMPLATE) or "{stem}.{ext}"))
            except (OSError, ValueError) as exc:
                errors.append(str(exc))
        self.state.set_status(source, FAILED if errors else DONE)
        if errors:
            log.warning("watch folder: %s", "; ".join(errors))
            self.message.emit(f"Watch folder: {Path(source).name}: {errors[0]}")
        elif written:
            self.message.emit(f"Watch folder: exported {Path(source).name} to {written[0].parent}")

    def _job_changed(self, job_id: int) -> None:
        item = self.queue.model.item(job_id)
        if item is not None and item.state == "failed":
            source = self.state.path_of_job(job_id)
            if source is not None:
                self.state.set_status(source, FAILED)
