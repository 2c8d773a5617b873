"""Transcripts as documents people send to colleagues: Markdown and Word (.docx).

One paragraph per segment, led by its time (``[0:07]``) and its speaker's name when speakers
were labelled (``Segment.speaker``, named through ``Transcript.speaker_names``). DOCX needs
python-docx, an optional extra imported only here, with a message naming the pip command.
"""
from __future__ import annotations

import errno
from pathlib import Path

from engine.text.exports import ExportError, render_filename, write_bytes_atomic
from engine.text.types import Transcript

DOCUMENT_FORMATS = {"md": "Markdown (.md)", "docx": "Word document (.docx)"}
DOCX_MISSING = ("Word (.docx) export needs the python-docx package: "
                "pip install 'qwen3-asr-desktop[docx]' (or pip install python-docx)")


def _clock(seconds: float) -> str:
    seconds = int(max(0.0, float(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def paragraphs(transcript: Transcript) -> list[tuple[str, str, str]]:
    """(time, speaker name or "", text) per non-empty segment; consecutive segments of one
    speaker keep their own times but name the speaker only when it changes."""
    names = getattr(transcript, "speaker_names", None) or {}
    out, last = [], None
    for seg in transcript.segments:
        text = " ".join((seg.text or "").split())
        if not text:
            continue
        label = getattr(seg, "speaker", None)
        speaker = names.get(label, label) if label and label != last else ""
        last = label
        out.append((_clock(seg.start), speaker or "", text))
    if not out and (transcript.text or "").strip():
        out.append((_clock(0.0), "", " ".join(transcript.text.split())))
    return out


def _details(transcript: Transcript) -> str:
    parts = [transcript.language or "", _clock(transcript.duration) if transcript.duration else ""]
    return " · ".join(p for p in parts if p)


def to_markdown(transcript: Transcript, title: str = "Transcript") -> str:
    lines = [f"# {title}", ""]
    details = _details(transcript)
    if details:
        lines += [f"*{details}*", ""]
    for time, speaker, text in paragraphs(transcript):
        who = f"**{_md_escape(speaker)}:** " if speaker else ""
        lines += [f"`[{time}]` {who}{_md_escape(text)}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _md_escape(text: str) -> str:
    # Characters that would start markup at a line's start or inside a line.
    for char in ("\\", "*", "_", "`", "[", "]", "#", "<", ">"):
        text = text.replace(char, "\\" + char)
    return text


def to_docx_bytes(transcript: Transcript, title: str = "Transcript") -> bytes:
    try:
        import docx
        from docx.shared import Pt, RGBColor
    except ImportError as exc:
        raise ValueError(DOCX_MISSING) from exc
    import io

    document = docx.Document()
    document.core_properties.title = title
    document.add_heading(title, level=1)
    details = _details(transcript)
    if details:
        document.add_paragraph(details).runs[0].italic = True
    for time, speaker, text in paragraphs(transcript):
        paragraph = document.add_paragraph()
        stamp = paragraph.add_run(f"[{time}] ")
        stamp.font.color.rgb = RGBColor(0x66, 0x66, 0x66)
        stamp.font.size = Pt(9)
        if speaker:
            paragraph.add_run(f"{speaker}: ").bold = True
        paragraph.add_run(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def document_filename(template: str, *, stem: str, fmt: str, language=None, date=None) -> str:
    """``render_filename`` for md/docx: the name it gives for .txt with the extension swapped
    where ``{ext}`` put it (found by rendering for two formats and comparing)."""
    as_txt = render_filename(template, stem=stem, fmt="txt", language=language, date=date)
    as_srt = render_filename(template, stem=stem, fmt="srt", language=language, date=date)
    if as_txt == as_srt:   # the template has no {ext}
        return as_txt
    start = next(i for i, (a, b) in enumerate(zip(as_txt, as_srt)) if a != b)
    return as_txt[:start] + fmt + as_txt[start + 3:]


def export_document(transcript: Transcript, fmt: str, out_dir, stem: str, *,
                    template: str = "{stem}.{ext}", names=None, overwrite: bool = True,
                    title: str | None = None) -> Path:
    """Write ``transcript`` as Markdown or DOCX into ``out_dir`` (the same naming and refusal
    rules as engine.text.exports.export); returns the path."""
    if fmt not in DOCUMENT_FORMATS:
        raise ValueError(f"unknown document format {fmt!r}; choose one of {', '.join(DOCUMENT_FORMATS)}")
    title = title or stem
    data = to_markdown(transcript, title).encode("utf-8") if fmt == "md" \
        else to_docx_bytes(transcript, title)
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(out_dir, exc.strerror or str(exc), exc.errno) from exc
    name = document_filename(template, stem=stem, fmt=fmt, language=transcript.language)
    path = names.claim(out_dir / name) if names is not None else out_dir / name
    if not overwrite and path.exists():
        raise ExportError(path, "the file already exists and was not replaced", errno.EEXIST)
    return write_bytes_atomic(path, data)


