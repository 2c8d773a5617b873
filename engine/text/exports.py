"""Exporters: a transcript as SRT, WebVTT, JSON or plain text, and safe file writing.

Each ``to_*`` function is pure: it takes a :class:`~engine.text.types.Transcript`
and returns the file content as a string. ``export`` renders one format and
writes it atomically, so an existing file is never left half written.
"""
from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import math
import os
import re
import secrets
import string
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from engine.text.cues import CueOptions, build_cues, words_by_line
from engine.text.joining import clean_text, glue
from engine.text.speaker_exports import json_speakers, speaker_cues, txt_blocks
from engine.text.speakers import has_speakers
from engine.text.types import Transcript


class ExportError(OSError):
    """A file could not be written; the message names the path and the reason."""

    def __init__(self, path, reason: str, code: int | None = None):
        self.message = f"cannot write {path}: {reason}"
        super().__init__(self.message)
        self.path = str(path)
        self.filename = str(path)
        self.reason = reason
        self.errno = code

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class ExportFormat:
    """One output format: its file extension, a label for menus, and its renderer."""

    ext: str
    label: str
    render: Callable[..., str]


def format_timestamp(seconds: float, sep: str = ".") -> str:
    """``HH:MM:SS.mmm`` (``sep=","`` gives the SRT form); negatives and NaN give zero."""
    seconds = seconds if isinstance(seconds, (int, float)) and math.isfinite(seconds) else 0.0
    ms = int(round(max(0.0, seconds) * 1000))
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{ms:03d}"


def escape_vtt(text: str) -> str:
    """Escape the characters WebVTT cue text reserves: ``&``, ``<`` and ``>``."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cues(transcript: Transcript, options: CueOptions | None):
    """(cue, speaker name or "") pairs; with speakers, no cue mixes two of them."""
    if has_speakers(transcript):
        return speaker_cues(transcript, options)
    return [(cue, "") for cue in build_cues(transcript, options)]


def to_srt(transcript: Transcript, options: CueOptions | None = None) -> str:
    """SubRip subtitles: numbered cues with ``HH:MM:SS,mmm`` times (``Name: `` first when
    speakers are labelled)."""
    blocks = []
    for n, (cue, name) in enumerate(_cues(transcript, options), 1):
        times = f"{format_timestamp(cue.start, ',')} --> {format_timestamp(cue.end, ',')}"
        blocks.append(f"{n}\n{times}\n{name + ': ' if name else ''}{cue.text}\n")
    return "\n".join(blocks)


def _karaoke_lines(cue) -> list[str]:
    """Cue lines with a ``<HH:MM:SS.mmm>`` timestamp before every word but the first."""
    by_line = words_by_line(cue) if cue.words else None
    if by_line is None:
        return [escape_vtt(line) for line in cue.lines]
    lines, last, prev = [], cue.start, None
    for words in by_line:
        parts = []
        for i, word in enumerate(words):
            text = escape_vtt(word.text)
            if prev is not None:
                last = min(max(word.start, last), cue.end)
                text = f"<{format_timestamp(last)}>{text}"
            parts.append((glue(words[i - 1].text, word.text) if i else "") + text)
            prev = word
        lines.append("".join(parts))
    return lines


def to_vtt(transcript: Transcript, options: CueOptions | None = None,
           karaoke: bool = False) -> str:
    """WebVTT subtitles; ``karaoke=True`` adds per-word timestamps inside each cue; speakers
    are voice tags (``<v Name>``)."""
    blocks = ["WEBVTT\n"]
    for cue, name in _cues(transcript, options):
        lines = _karaoke_lines(cue) if karaoke else [escape_vtt(line) for line in cue.lines]
        if name and lines:
            lines[0] = f"<v {escape_vtt(name)}>{lines[0]}"
        times = f"{format_timestamp(cue.start)} --> {format_timestamp(cue.end)}"
        blocks.append(times + "\n" + "\n".join(lines) + "\n")
    return "\n".join(blocks)


def _sec(value) -> float | None:
    """Seconds rounded to the millisecond, or None for a missing or non-finite time."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return round(value, 3) if math.isfinite(value) else None


def to_json(transcript: Transcript) -> str:
    """The whole transcript as indented JSON, segments with their nested words."""
    data = {
        "text": transcript.text,
        "language": transcript.language,
        "duration": _sec(transcript.duration),
        "model": transcript.model,
        "words_note": transcript.words_note,
        "audio_track": transcript.audio_track,
        "notes": list(transcript.notes),
        "segments": [
            {
                "start": _sec(seg.start), "end": _sec(seg.end), "text": seg.text,
                "language": seg.language,
                "timing": seg.timing,
                "words": [{"text": w.text, "start": _sec(w.start), "end": _sec(w.end)}
                          for w in seg.words],
            }
            for seg in transcript.segments
        ],
    }
    if has_speakers(transcript):
        data = json_speakers(transcript, data)
    return json.dumps(data, ensure_ascii=False, indent=2) + "\n"


def to_txt(transcript: Transcript, timestamps: bool = False) -> str:
    """Plain text, one segment per line; ``timestamps=True`` prefixes ``[start --> end]``.
    With speakers: a ``Name: text`` paragraph per speaker turn."""
    if has_speakers(transcript):
        return txt_blocks(transcript, timestamps, format_timestamp)
    lines = []
    for seg in transcript.segments:
        text = clean_text(seg.text)
        if not text:
            continue
        if timestamps:
            text = f"[{format_timestamp(seg.start)} --> {format_timestamp(seg.end)}] {text}"
        lines.append(text)
    if not transcript.segments and clean_text(transcript.text):
        text = clean_text(transcript.text)
        if timestamps:
            text = f"[{format_timestamp(0.0)} --> {format_timestamp(transcript.duration)}] {text}"
        lines.append(text)
    return "".join(line + "\n" for line in lines)


FORMATS: dict[str, ExportFormat] = {
    "srt": ExportFormat("srt", "SubRip subtitles (.srt)", to_srt),
    "vtt": ExportFormat("vtt", "WebVTT subtitles (.vtt)", to_vtt),
    "json": ExportFormat("json", "JSON with word times (.json)", to_json),
    "txt": ExportFormat("txt", "Plain text (.txt)", to_txt),
}


def _format(fmt: str) -> ExportFormat:
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return FORMATS[fmt]


def render(transcript: Transcript, fmt: str, options: CueOptions | None = None, *,
           karaoke: bool = False, timestamps: bool = False) -> str:
    """The content of one format: cue options apply to srt/vtt, ``karaoke`` to vtt,
    ``timestamps`` to txt."""
    _format(fmt)
    if fmt == "srt":
        return to_srt(transcript, options)
    if fmt == "vtt":
        return to_vtt(transcript, options, karaoke=karaoke)
    if fmt == "json":
        return to_json(transcript)
    return to_txt(transcript, timestamps=timestamps)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "disk full (no space left on device)"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"permission denied, the folder may be read-only ({exc.strerror or exc})"
    return exc.strerror or str(exc)


def write_atomic(path, text: str) -> Path:
    """Write ``text`` as UTF-8 to ``path`` through a temp file in the same folder.

    The old file stays intact if anything fails, and the temp file is removed.

    Raises:
        ExportError: the folder is not writable, the disk is full, and so on;
            the message names the path.
        UnicodeEncodeError: ``text`` holds characters UTF-8 cannot encode
            (nothing is written then).
    """
    return write_bytes_atomic(Path(path), text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` as ``write_atomic`` writes text (DOCX and other binary exports)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except OSError as exc:
        raise ExportError(path, _reason(exc), exc.errno) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise ExportError(path, _reason(exc), exc.errno) from exc
        raise
    return path


_ILLEGAL = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f]')
_RESERVED = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)),
             *(f"LPT{i}" for i in range(1, 10))}
_PLACEHOLDERS = ("stem", "ext", "date", "lang")


def _safe(text: str) -> str:
    return " ".join(_ILLEGAL.sub("", str(text)).split())


# File names are at most 255 bytes (NAME_MAX) on Linux, macOS and Windows; write_atomic's
# temp name adds 14 (".", "." + 8 hex digits + ".tmp"), so an export name keeps under 241.
NAME_MAX_BYTES = 241
STEM_MAX_BYTES = 150


def safe_stem(stem: str, max_bytes: int = STEM_MAX_BYTES) -> str:
    """``stem`` without characters illegal in file names, at most ``max_bytes`` of UTF-8.

    A stem that had to be shortened ends in "~" and 8 hex digits of the full stem's hash,
    so two long names that differ only at their ends still give different files."""
    clean = _safe(stem) or "transcript"
    data = clean.encode("utf-8", "surrogateescape")
    if len(data) <= max_bytes:
        return clean
    tag = "~" + hashlib.sha1(data).hexdigest()[:8]
    cut = data[:max(1, max_bytes - len(tag))].decode("utf-8", "ignore").rstrip(". ")
    return cut + tag


def render_filename(template: str, *, stem: str, fmt: str, date=None,
                    language: str | None = None) -> str:
    """A file name from ``template`` such as ``"{date}_{stem}_{lang}.{ext}"``.

    Placeholders: ``{stem}``, ``{ext}`` (from ``fmt``), ``{date}`` (YYYY-MM-DD;
    today when None) and ``{lang}`` ("und" when unknown). Characters illegal in
    file names are stripped.

    Raises:
        ValueError: an unknown placeholder, a malformed template or an unknown format.
    """
    ext = _format(fmt).ext
    if date is None:
        date = _dt.date.today()
    if isinstance(date, (_dt.date, _dt.datetime)):
        date = date.strftime("%Y-%m-%d")
    values = {"stem": safe_stem(stem), "ext": ext,
              "date": _safe(date), "lang": _safe(language or "") or "und"}
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"malformed file name template {template!r}: {exc}") from None
    out = []
    for literal, name, spec, conversion in parts:
        out.append(_ILLEGAL.sub("", literal))
        if name is None:
            continue
        if name not in values or spec or conversion:
            raise ValueError(f"unknown placeholder {{{name}}} in file name template "
                             f"{template!r}; use {', '.join('{%s}' % p for p in _PLACEHOLDERS)}")
        out.append(values[name])
    name = "".join(out).strip().rstrip(". ")
    over = len(name.encode("utf-8", "surrogateescape")) - NAME_MAX_BYTES
    stem_bytes = len(values["stem"].encode("utf-8", "surrogateescape"))
    if over > 0 and "{stem}" in template and stem_bytes > 16:  # a long date or language around a long stem
        return render_filename(template, stem=safe_stem(stem, max(16, stem_bytes - over)), fmt=fmt, date=date,
                               language=language)
    if not name:
        raise ValueError(f"file name template {template!r} gives an empty name")
    if name.split(".")[0].upper() in _RESERVED:
        name = "_" + name
    return name


def export(transcript: Transcript, fmt: str, out_dir, stem: str,
           options: CueOptions | None = None, *, template: str = "{stem}.{ext}",
           karaoke: bool = False, timestamps: bool = False, date=None,
           names: "OutputNames | None" = None, overwrite: bool = True) -> Path:
    """Render one format and write it atomically into ``out_dir``; returns the path.

    ``names`` (one per run) keeps a file written earlier in the run from being
    replaced: a second file of the same name gets `` (2)``. ``overwrite=False``
    refuses to replace a file that is already there.

    Raises:
        ValueError: unknown format or bad template.
        ExportError: the folder cannot be created, the file cannot be written, or
            it exists and ``overwrite`` is False.
    """
    text = render(transcript, fmt, options, karaoke=karaoke, timestamps=timestamps)
    name = render_filename(template, stem=stem, fmt=fmt, date=date,
                           language=transcript.language)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(out_dir, _reason(exc), exc.errno) from exc
    path = names.claim(out_dir / name) if names is not None else out_dir / name
    if not overwrite and path.exists():
        raise ExportError(path, "the file already exists and was not replaced", errno.EEXIST)
    return write_atomic(path, text)


def unique_stems(sources, out_dirs=None) -> list[str]:
    """A file-name stem per source, unique among sources that write into the same folder.

    Names stay the source's stem (``talk``) unless two sources of one run would give
    the same name in one folder; then, for those only, the source's extension is kept
    (``talk.wav``, ``talk.flac``), then its folder's name is added (``talk.wav (a)``,
    ``talk.wav (b)``), then a number (``talk (2)``: the same file twice). Each step is
    taken only when it tells some of them apart. ``out_dirs`` defaults to each source's
    own folder; names compare case-insensitively (Windows and macOS folders do).
    """
    paths = [Path(os.fsdecode(s)) for s in sources]
    dirs = [Path(d) for d in out_dirs] if out_dirs is not None else [p.parent for p in paths]
    stems = [p.stem or p.name for p in paths]
    groups: dict[tuple[str, str], list[int]] = {}
    for i, stem in enumerate(stems):
        groups.setdefault((_folder_key(dirs[i]), stem.casefold()), []).append(i)
    layers = (lambda p, name: p.name, lambda p, name: f"{name} ({p.parent.name or p.anchor})")
    for members in (m for m in groups.values() if len(m) > 1):
        pending = members
        for layer in layers:
            candidate = {i: layer(paths[i], stems[i]) for i in pending}
            counts = Counter(c.casefold() for c in candidate.values())
            if len(counts) == 1:
                continue   # this step tells none of them apart: do not lengthen the names
            for i in pending:
                stems[i] = candidate[i]
            pending = [i for i in pending if counts[candidate[i].casefold()] > 1]
            if len(pending) < 2:
                break
        for n, i in enumerate(pending[1:], 2):
            stems[i] = f"{stems[i]} ({n})"
    return stems


class OutputNames:
    """The files one run (a CLI call, one export) writes: unique stems for its sources, and
    no path handed out twice, so no output of the run replaces another."""

    def __init__(self, sources=(), out_dirs=None):
        self.sources = [str(s) for s in sources]
        self._stems = unique_stems(self.sources, out_dirs)
        self._claimed: set[str] = set()

    def stem(self, index: int) -> str:
        """The stem for the ``index``-th source."""
        return self._stems[index]

    def claim(self, path) -> Path:
        """``path``, or ``name (2).ext`` ... when an earlier file of this run took it."""
        path = Path(path)
        candidate, n = path, 1
        while _folder_key(candidate) in self._claimed:
            n += 1
            base, dot, ext = path.name.rpartition(".")
            candidate = path.with_name(f"{base} ({n}).{ext}" if dot and base else f"{path.name} ({n})")
        self._claimed.add(_folder_key(candidate))
        return candidate


def _folder_key(path) -> str:
    return os.path.normcase(os.path.abspath(os.fsdecode(path))).casefold()
