"""The command line: ``qwen3-asr transcribe FILE... --model DIR``."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from cli.inputs import OUTPUT_FORMATS

FORMAT_NAMES = tuple(OUTPUT_FORMATS)


def _formats(value: str) -> list[str]:
    formats = [f.strip().lower() for f in value.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMAT_NAMES]
    if bad or not formats:
        raise argparse.ArgumentTypeError(f"unknown format {', '.join(bad) or value!r}; choose from {', '.join(FORMAT_NAMES)}")
    return formats


def build_parser() -> argparse.ArgumentParser:
    from engine import __version__

    parser = argparse.ArgumentParser(prog="qwen3-asr", description="Transcribe speech locally with Qwen3-ASR.")
    parser.add_argument("--version", action="version", version=f"qwen3-asr {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("transcribe", help="transcribe audio or video files")
    t.add_argument("files", nargs="+", metavar="FILE", help="audio or video files, or folders (searched recursively)")
    t.add_argument("--model", help="model folder, or a Hugging Face id such as Qwen/Qwen3-ASR-0.6B (not with --server)")
    t.add_argument("--aligner", help="Qwen3-ForcedAligner folder or id, for word timestamps")
    t.add_argument("--language", help="force a language (name or code, e.g. English or en); default: detect")
    t.add_argument("--context", default="", help="context text: names, terms, topic")
    t.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available")
    t.add_argument("--dtype", choices=["float32", "bfloat16", "float16"])
    t.add_argument("--quantize", choices=["int8"],
                   help="int8 decoder weights on CPU: faster, not token-exact (default: off)")
    t.add_argument("--format", type=_formats, default=["txt"],
                   help="comma-separated: txt,json,srt,vtt; vtt-karaoke (a timestamp before each word: "
                        "NAME.karaoke.vtt), txt-timestamps (a time before each line: NAME.timestamps.txt)")
    t.add_argument("-o", "--output-dir", type=Path, help="where to write files (default: next to each input)")
    t.add_argument("--overwrite", action="store_true",
                   help="replace output files that already exist (default: refuse them, exit status 1)")
    t.add_argument("--max-chunk-seconds", type=float,
                   help="longest chunk sent to the model (default: the model's own, the same with or without "
                        "--aligner: 30 s unless its folder's transcription_defaults.json says otherwise)")
    t.add_argument("--kv-cache-mb", type=int,
                   help="KV cache budget in MiB, 16 or more (default: room for 64 chunks, within a quarter "
                        "of free memory on CPU; 60%% of free GPU memory)")
    t.add_argument("--no-vad", action="store_true", help="cut at quiet points instead of detecting speech")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run on a Ray cluster (needs -o): ADDRESS such as auto or head:6379; none: a running "
                        "local cluster, else a new one on this machine (pip install 'qwen3-asr-desktop[cluster]')")
    t.add_argument("--ray-engines", type=int, help="with --ray: engines (default: one per GPU, else CPUs / "
                                                   "--ray-cpus-per-engine)")
    t.add_argument("--ray-cpus-per-engine", type=int, default=2, help="with --ray: CPU cores per engine (default 2)")
    t.add_argument("--server", metavar="URL", help="transcribe on a qwen3-asr server (e.g. http://127.0.0.1:8000)")
    t.add_argument("--api-key", default=os.environ.get("QWEN3_ASR_API_KEY"),
                   help="the server's key (default $QWEN3_ASR_API_KEY)")
    from cli.serve import add_parser

    add_parser(sub)
    cues = t.add_argument_group("subtitle cues (srt, vtt), as in the app's Settings")
    cues.add_argument("--max-line-chars", type=int, help="characters per line (default 42)")
    cues.add_argument("--max-lines", type=int, help="lines per cue (default 2)")
    cues.add_argument("--min-cue-seconds", type=float, help="shortest cue, in seconds (default 1.0)")
    cues.add_argument("--max-cue-seconds", type=float, help="longest cue, in seconds (default 7.0)")
    cues.add_argument("--cue-gap-seconds", type=float, help="gap between cues, in seconds (default 0.08)")
    t.add_argument("--speakers", type=_speakers, metavar="N|auto",
                   help="label who speaks: a number of speakers, or auto to find it (default: no labels)")
    t.add_argument("--speaker-model", metavar="PATH",
                   help="GE2E speaker model weights (pretrained.pt); default: the installed or downloaded one")
    return parser


def _speakers(value: str):
    from engine.text.speakers import check_speakers

    try:
        return check_speakers(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _resolve_model(name: str) -> str:
    """A local folder as is; only an ``owner/name`` that exists nowhere here is downloaded.

    Anything that looks like a path stays local: a typo says "no model folder at ..."
    (ValueError) and never reaches the network or the data folder."""
    from modelhub.downloads import download_model, resolve_model_name

    kind, where = resolve_model_name(name)
    return str(where) if kind == "local" else str(download_model(where))



class ProgressBar:
    """A one-line progress bar on stderr for a terminal (silent when not a TTY)."""

    def __init__(self, total: int, enabled: bool):
        from cli.eta import CliEta

        self.total, self.enabled = total, enabled and sys.stderr.isatty()
        self.start = time.monotonic()
        self.eta = CliEta()   # steady time left (cli/eta.py)

    def show(self, done: float, label: str) -> None:
        if not self.enabled:
            return
        from cli.eta import clock

        frac = done / max(1, self.total)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        eta = self.eta.update(time.monotonic(), frac)
        sys.stderr.write(f"\r[{bar}] {frac * 100:5.1f}%  eta {clock(eta):>7}  {label[:40]:<40}")
        sys.stderr.flush()

    def clear(self) -> None:
        """Blank the bar's line, so a message printed next starts on a clean line (the bar comes
        back at the next show)."""
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def plan_outputs(args):
    """The run's inputs (each once) and its output names, before any model loads.

    Returns (files, names, error): ``error`` is a message for exit status 1 when -o is
    not a folder or when outputs exist already (without --overwrite); names are unique
    within the run (engine.text.exports.unique_stems), so no output replaces another."""
    from engine.text.exports import OutputNames, render_filename

    if args.output_dir is not None and args.output_dir.exists() and not args.output_dir.is_dir():
        return [], None, f"-o must be a folder: {args.output_dir} is a file"
    files, seen = [], set()
    for name in getattr(args, "inputs", args.files):
        key = str(Path(name).resolve())
        if key in seen:
            print(f"note: {name} is given more than once; it is transcribed once", file=sys.stderr)
            continue
        seen.add(key)
        files.append(name)
    out_dirs = [args.output_dir or Path(f).parent for f in files]
    names = OutputNames(files, out_dirs)
    existing = [out_dirs[i] / render_filename("{stem}.{ext}", stem=names.stem(i) + OUTPUT_FORMATS[fmt].suffix,
                                              fmt=OUTPUT_FORMATS[fmt].fmt)
                for i in range(len(files)) for fmt in args.format]
    existing = [str(p) for p in existing if p.exists()]
    if existing and not args.overwrite:
        return files, names, ("output files exist already; pass --overwrite to replace them:\n  "
                              + "\n  ".join(existing))
    return files, names, None


def _worth_compacting(files) -> bool:
    """Whether these inputs hold enough audio to repay compacting the weights at load
    (the platform's rule; lengths from the files' headers; unreadable files do not count)."""
    from engine.audio.decode import audio_info
    from engine.network.platform import COMPACT_MIN_AUDIO_SECONDS

    total = 0.0
    for name in files:
        try:
            total += float(audio_info(name).duration)
        except Exception:  # unreadable here: the engine reports it properly later
            continue
        if total >= COMPACT_MIN_AUDIO_SECONDS:
            return True
    return False


def transcribe_command(args) -> int:
    import engine
    from engine.arguments import check_cli_numbers
    from engine.text.exports import export

    try:   # every numeric flag, by its rule (engine.arguments), before anything loads
        numbers = check_cli_numbers(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from cli.inputs import check_language, cue_options, expand_inputs

    try:  # a typo in the language or the cue options is a usage error, found before the model loads
        args.language = check_language(args.language)
        options = cue_options(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.inputs, missing = expand_inputs(args.files)
    for problem in missing:  # reported now; the other files still run (exit status 1 at the end)
        print(f"error: {problem}", file=sys.stderr)
    if not args.inputs:
        return 1
    if args.ray is not None:
        from cli.ray_job import ray_transcribe_command

        rc = ray_transcribe_command(args, plan_outputs, _one_line)
        return max(rc, 1) if missing else rc
    files, names, problem = plan_outputs(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    if args.server:
        from cli.remote import transcribe_remote

        rc = transcribe_remote(args, files, names)
        return max(rc, 1) if missing else rc
    if not args.model:
        print("error: --model is required (or --server URL)", file=sys.stderr)
        return 2
    try:
        long_inputs = _worth_compacting(files)   # load-time work that short inputs do not repay
        config = engine.EngineConfig(device=args.device, dtype=args.dtype, quantize=args.quantize,
                                     use_vad=not args.no_vad, compact_weights=long_inputs,
                                     huge_page_weights=None if long_inputs else False,
                                     **_cache_option(numbers.get("kv_cache_mb")))
        eng = engine.load(_resolve_model(args.model), aligner=_resolve_model(args.aligner) if args.aligner else None,
                          config=config)
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # a model folder can break a library in any way: still one line, never a traceback
        print(f"error: cannot load the model in {args.model}: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    if getattr(args, "speakers", None) is not None:
        from engine.network.speaker_encoder import find_weights
        from modelhub.speaker_model import speaker_models_dir

        try:
            eng.speaker_model = str(find_weights(args.speaker_model, data_dir=speaker_models_dir()))
        except (OSError, ValueError) as e:
            print(f"error: {_one_line(e)}", file=sys.stderr)
            return 2
    if not args.quiet:
        weights = ", int8 weights" if getattr(eng, "quantize", None) else ""
        weights += ", compact weights" if getattr(eng.net, "compact_projections", 0) else ""
        chunk = numbers.get("max_chunk_seconds") or eng.default_chunk_seconds
        print(f"model {Path(eng.model_dir).name} on {eng.device}, {eng.dtype}{weights} ({eng.hardware}); "
              f"chunks up to {chunk:g} s", file=sys.stderr)
    words = eng.aligner is not None
    jobs = []
    for name in files:
        try:
            jobs.append(eng.submit_file(name, language=args.language, context=args.context, word_timestamps=words,
                                        max_chunk_seconds=numbers.get("max_chunk_seconds"),
                                        speakers=getattr(args, "speakers", None)))
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    bar = ProgressBar(len(jobs), not args.quiet)
    written, failed = set(), len(missing)
    while True:
        if eng.has_work():
            eng.step()
        done_jobs = [j for j in jobs if j.finished]
        bar.show(sum(j.progress if not j.finished else 1.0 for j in jobs),
                 next((Path(j.source).name for j in jobs if not j.finished), ""))
        for job in done_jobs:
            if job.id in written:
                continue
            written.add(job.id)
            bar.clear()
            if job.state == "failed":
                failed += 1
                print(f"error: {job.error}", file=sys.stderr)
                continue
            index = jobs.index(job)
            out_dir = args.output_dir or Path(job.source).parent
            for fmt in args.format:
                kind = OUTPUT_FORMATS[fmt]
                try:
                    path = export(job.transcript, kind.fmt, out_dir, names.stem(index) + kind.suffix, options,
                                  karaoke=kind.karaoke, timestamps=kind.timestamps, names=names,
                                  overwrite=args.overwrite)
                    if not args.quiet:
                        print(f"wrote {path}", file=sys.stderr)
                except OSError as e:
                    failed += 1
                    print(f"error: {e}", file=sys.stderr)
            for note in job.transcript.notes:
                print(f"note: {job.source}: {note}", file=sys.stderr)
            if args.format == ["txt"] and args.output_dir is None and not args.quiet:
                if getattr(args, "speakers", None) is not None:
                    from engine.text.exports import to_txt

                    print(to_txt(job.transcript), end="")
                else:
                    print(job.transcript.text)
        if len(written) == len(jobs):
            break
    bar.show(len(jobs), "done")
    bar.close()
    return 1 if failed else 0


def _cache_option(kv_cache_mb: int | None) -> dict:
    return {} if kv_cache_mb is None else {"kv_cache_bytes": kv_cache_mb << 20}


def _one_line(error: Exception) -> str:
    """An error message on one line (library messages may hold newlines)."""
    return " ".join(str(error).split())


_RAY_ADDRESS = re.compile(r"^(auto|local|([a-z]+://)?[\w.\-]+:\d+)$")


def _ray_address_or_input(argv: list[str]) -> list[str]:
    """``--ray a.wav b.wav``: the word after ``--ray`` is its ADDRESS only when it looks like one
    (auto, local, host:port, ray://host:port); otherwise it is the first input."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--ray" and not _RAY_ADDRESS.match(out[i + 1]):
            out[i] = "--ray="
    return out


def _one_line_warnings() -> None:
    """Library warnings (int8 cache, odd audio) as one "warning: ..." line, not two with a source line."""
    import warnings

    warnings.formatwarning = lambda message, *rest, **kw: f"warning: {' '.join(str(message).split())}\n"


def main(argv=None) -> int:
    _one_line_warnings()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = build_parser().parse_args(_ray_address_or_input(argv))
        if args.command == "transcribe":
            return transcribe_command(args)
        if args.command == "serve":
            from cli.serve import serve_command

            return serve_command(args, _resolve_model, _one_line)
        return 2
    except KeyboardInterrupt:
        # Ctrl+C: one line, no traceback; outputs already written are complete (written atomically)
        sys.stderr.write("\ninterrupted (Ctrl+C): stopped; files written before stay\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
