"""Exporting transcripts to files and the clipboard, using the settings' folder and template."""
from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

from app import settings as S
from app.settings import Settings


@dataclass(frozen=True)
class ExportChoice:
    fmt: str          # engine.text.exports.FORMATS key
    label: str
    karaoke: bool = False
    timestamps: bool = False
    suffix: str = ""  # added to the stem, so two kinds of one format never share a file name

    @property
    def key(self) -> str:
        """A name for settings: "srt", "vtt.karaoke", "txt.timestamps", "md", "docx"."""
        return self.fmt + self.suffix


CHOICES = (
    ExportChoice("srt", "SubRip subtitles (.srt)"),
    ExportChoice("vtt", "WebVTT subtitles (.vtt)"),
    ExportChoice("vtt", "WebVTT with word highlighting (karaoke .vtt)", karaoke=True,
                 suffix=".karaoke"),
    ExportChoice("json", "JSON with segments and word times (.json)"),
    ExportChoice("txt", "Plain text (.txt)"),
    ExportChoice("txt", "Text with timestamps (.txt)", timestamps=True, suffix=".timestamps"),
    ExportChoice("md", "Markdown with times and speakers (.md)"),
    ExportChoice("docx", "Word document with times and speakers (.docx)"),
)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


def output_folder(settings: Settings, source_path: str) -> Path:
    """The export folder from settings, or the source file's own folder when none is set; a
    transcript with no file (a live session not recorded) goes to the last export folder or
    the documents folder, never the working directory."""
    configured = settings.get(S.EXPORT_DIR)
    if configured:
        return Path(configured)
    from app.widgets.dialog_folders import export_start_folder
    from app.paths import data_dir

    source = Path(source_path)
    # A live recording sits in the app's hidden data folder, and a live session without one
    # has no file at all: their exports go to the last export folder, else Documents.
    if not source.is_file() or _inside(source, data_dir()):
        return Path(export_start_folder(settings))
    return source.resolve().parent


def export_one(settings: Settings, transcript, source_path: str, choice: ExportChoice, *,
               stem: str | None = None, names=None, overwrite: bool = True, folder=None) -> Path:
    """Write one file; raises engine.text.exports.ExportError / ValueError with a plain message.
    ``stem``/``names`` come from one engine.text.exports.OutputNames per export run."""
    from engine.text.documents import DOCUMENT_FORMATS, export_document
    from engine.text.exports import export

    if choice.fmt in DOCUMENT_FORMATS:
        return export_document(transcript, choice.fmt, folder or output_folder(settings, source_path),
                               (stem or Path(source_path).stem) + choice.suffix,
                               template=settings.get(S.EXPORT_TEMPLATE) or "{stem}.{ext}",
                               names=names, overwrite=overwrite, title=Path(source_path).name)
    return export(transcript, choice.fmt, folder or output_folder(settings, source_path),
                  (stem or Path(source_path).stem) + choice.suffix, settings.cue_options(),
                  template=settings.get(S.EXPORT_TEMPLATE) or "{stem}.{ext}",
                  karaoke=choice.karaoke, timestamps=choice.timestamps, names=names,
                  overwrite=overwrite)


def export_many(settings: Settings, items, choice: ExportChoice, *, overwrite: bool = True,
                existing: list | None = None, folder=None,
                stem: str | None = None) -> tuple[list[Path], list[str]]:
    """Export (source_path, transcript) pairs; returns written paths and error messages.
    Names are unique within the export (talk.wav.srt, talk.flac.srt, ...): none replaces another.
    With ``overwrite=False`` a file already on disk is left alone and its (index, path) goes to
    ``existing``, so the caller can ask the user before exporting those again."""
    from engine.text.exports import ExportError, OutputNames

    items = list(items)
    # ``folder``: one folder for all (the export dialog's or Save As's); ``stem``: Save As's
    # name for a single file.
    names = OutputNames([source for source, _ in items],
                        [Path(folder) if folder else output_folder(settings, source)
                         for source, _ in items])
    written, errors = [], []
    for index, (source_path, transcript) in enumerate(items):
        try:
            written.append(export_one(settings, transcript, source_path, choice,
                                      stem=stem if stem and len(items) == 1 else names.stem(index),
                                      names=names, overwrite=overwrite, folder=folder))
        except ExportError as exc:
            if exc.errno == errno.EEXIST and existing is not None:
                existing.append((index, Path(exc.path)))
            else:
                errors.append(f"{Path(source_path).name}: {exc}")
        except (OSError, ValueError) as exc:
            errors.append(f"{Path(source_path).name}: {exc}")
    if written:
        from app.widgets.dialog_folders import remember_export

        remember_export(written[-1], settings)
    return written, errors


def clipboard_text(items, timestamps: bool = False) -> str:
    from engine.text.exports import to_txt

    parts = [to_txt(transcript, timestamps=timestamps).strip() for _, transcript in items]
    return "\n\n".join(p for p in parts if p) + "\n"


def chosen_formats(settings) -> list:
    """The export choices ticked last time (SRT when none)."""
    from app.settings.view_prefs import EXPORT_FORMATS

    keys = [k for k in str(settings.get(EXPORT_FORMATS) or "").split(",") if k]
    return [c for c in CHOICES if c.key in keys] or [CHOICES[0]]


def remember_formats(settings, choices) -> None:
    from app.settings.view_prefs import EXPORT_FORMATS

    settings.set(EXPORT_FORMATS, ",".join(c.key for c in choices))
