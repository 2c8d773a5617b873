"""What the CLI checks before any model loads: its inputs, the language, the output formats and
the cue options, so a typo costs a second, not a model load."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class OutputFormat:
    """One ``--format`` name: the exporter's format, its variant, and the stem suffix that keeps two
    variants of one format apart (``talk.vtt`` and ``talk.karaoke.vtt``, as the app names them)."""

    name: str
    fmt: str
    karaoke: bool = False
    timestamps: bool = False
    suffix: str = ""


OUTPUT_FORMATS = {f.name: f for f in (
    OutputFormat("txt", "txt"), OutputFormat("json", "json"), OutputFormat("srt", "srt"),
    OutputFormat("vtt", "vtt"),
    OutputFormat("vtt-karaoke", "vtt", karaoke=True, suffix=".karaoke"),
    OutputFormat("txt-timestamps", "txt", timestamps=True, suffix=".timestamps"),
)}


def expand_inputs(paths) -> tuple[list[str], list[str]]:
    """(files, problems): a folder becomes the audio files inside it (recursively, as the app
    takes a dropped folder); a missing path or a folder without audio is a problem line. A file
    named directly is kept as typed, whatever its extension: the decoder judges it."""
    from engine.audio.collect import audio_files_in

    files, problems = [], []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = audio_files_in(path)
            files.extend(str(p) for p in found)
            if not found:
                problems.append(f"{raw}: the folder holds no audio or video files")
        elif path.exists():
            files.append(str(raw))
        else:
            problems.append(f"{raw}: not found")
    return files, problems


def check_language(value: str | None) -> str | None:
    """The language as the engine names it, or a ValueError that suggests the nearest one
    ("unknown language 'englsh'; did you mean English?")."""
    from engine.text.prompt import LANGUAGES, language_name

    try:
        return language_name(value)
    except ValueError as exc:
        key = str(value).strip().lower()
        names = {name.lower(): name for name in LANGUAGES.values()}
        near = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
        if near:
            raise ValueError(f"unknown language {value!r}; did you mean {names[near[0]]}?") from None
        raise exc from None


def cue_options(args):
    """engine.text.cues.CueOptions from the cue flags (None values keep the defaults)."""
    from engine.text.cues import CueOptions

    given = {"max_line_chars": args.max_line_chars, "max_lines": args.max_lines,
             "min_duration": args.min_cue_seconds, "max_duration": args.max_cue_seconds,
             "min_gap": args.cue_gap_seconds}
    return CueOptions(**{k: v for k, v in given.items() if v is not None})
