"""The command line: ``qwen3-asr transcribe FILE... --model DIR``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

FORMAT_NAMES = ("txt", "json", "srt", "vtt")


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
    t.add_argument("files", nargs="+", metavar="FILE")
    t.add_argument("--model", required=True, help="model folder, or a Hugging Face id such as Qwen/Qwen3-ASR-0.6B")
    t.add_argument("--aligner", help="Qwen3-ForcedAligner folder or id, for word timestamps")
    t.add_argument("--language", help="force a language (name or code, e.g. English or en); default: detect")
    t.add_argument("--context", default="", help="context text: names, terms, topic")
    t.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available")
    t.add_argument("--dtype", choices=["float32", "bfloat16", "float16"])
    t.add_argument("--quantize", choices=["int8"],
                   help="int8 decoder weights on CPU: faster, not token-exact (default: off)")
    t.add_argument("--format", type=_formats, default=["txt"], help="comma-separated: txt,json,srt,vtt")
    t.add_argument("-o", "--output-dir", type=Path, help="where to write files (default: next to each input)")
    t.add_argument("--overwrite", action="store_true",
                   help="replace output files that already exist (default: refuse them, exit status 1)")
    t.add_argument("--max-chunk-seconds", type=float, help="longest chunk sent to the model (default 30)")
    t.add_argument("--kv-cache-mb", type=int,
                   help="KV cache budget in MiB, 16 or more (default: room for 64 chunks, within a quarter "
                        "of free memory on CPU; 60%% of free GPU memory)")
    t.add_argument("--no-vad", action="store_true", help="cut at quiet points instead of detecting speech")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def _resolve_model(name: str) -> str:
    """A local folder as is; only an ``owner/name`` that exists nowhere here is downloaded.

    Anything that looks like a path stays local: a typo says "no model folder at ..."
    (ValueError) and never reaches the network or the data folder."""
    from modelhub.downloads import download_model, resolve_model_name

    kind, where = resolve_model_name(name)
    return str(where) if kind == "local" else str(download_model(where))


def _hardware_note(eng) -> str:
    """Why this dtype: on CPU, the CPU and whether it computes bfloat16 natively."""
    import torch

    if eng.device != "cpu":
        return torch.cuda.get_device_name(eng.torch_device) if eng.device == "cuda" else eng.device
    from engine.network.loading import cpu_description

    return f"{cpu_description()}, {torch.get_num_threads()} threads"


class ProgressBar:
    """A one-line progress bar on stderr for a terminal (silent when not a TTY)."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled and sys.stderr.isatty()
        self.start = time.monotonic()

    def show(self, done: float, label: str) -> None:
        if not self.enabled:
            return
        frac = done / max(1, self.total)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        elapsed = time.monotonic() - self.start
        eta = elapsed / frac - elapsed if frac > 0.01 else 0
        sys.stderr.write(f"\r[{bar}] {frac * 100:5.1f}%  eta {eta:5.0f}s  {label[:40]:<40}")
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
    for name in args.files:
        key = str(Path(name).resolve())
        if key in seen:
            print(f"note: {name} is given more than once; it is transcribed once", file=sys.stderr)
            continue
        seen.add(key)
        files.append(name)
    out_dirs = [args.output_dir or Path(f).parent for f in files]
    names = OutputNames(files, out_dirs)
    existing = [out_dirs[i] / render_filename("{stem}.{ext}", stem=names.stem(i), fmt=fmt)
                for i in range(len(files)) for fmt in args.format]
    existing = [str(p) for p in existing if p.exists()]
    if existing and not args.overwrite:
        return files, names, ("output files exist already; pass --overwrite to replace them:\n  "
                              + "\n  ".join(existing))
    return files, names, None


# Compact weights (engine/network/fp16_weights.py) make float32 decoding 1.4-1.6x faster on
# CPUs without bfloat16 hardware but take ~10 s more to load on 2 cores. Measured with the
# 0.6B dims (random weights) on 2 AVX2 cores, end to end: a 6 s file 24 s float, 27-30 s
# compact; a 1-minute file 66.9 s float, 51.6 s compact. Random weights decode more tokens per
# second of audio than speech does, so the bar sits above their break-even (~20 s). The app
# loads once and keeps them on.
COMPACT_MIN_AUDIO_SECONDS = 60.0


def _worth_compacting(files) -> bool:
    """Whether these inputs hold enough audio to repay compacting the weights at load
    (lengths from the files' headers; unreadable files do not count)."""
    from engine.audio.decode import audio_info

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
    files, names, problem = plan_outputs(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    try:
        eng = engine.load(_resolve_model(args.model), device=args.device, dtype=args.dtype,
                          quantize=args.quantize, aligner=_resolve_model(args.aligner) if args.aligner else None,
                          use_vad=not args.no_vad, compact_weights=_worth_compacting(files),
                          **_cache_option(numbers.get("kv_cache_mb")))
    except (ValueError, RuntimeError, OSError) as e:
        print(f"error: {_one_line(e)}", file=sys.stderr)
        return 2
    except Exception as e:  # a model folder can break a library in any way: still one line, never a traceback
        print(f"error: cannot load the model in {args.model}: {type(e).__name__}: {_one_line(e)}", file=sys.stderr)
        return 2
    if not args.quiet:
        weights = ", int8 weights" if getattr(eng, "quantize", None) else ""
        weights += ", compact weights" if getattr(eng.net, "compact_projections", 0) else ""
        print(f"model {Path(eng.model_dir).name} on {eng.device}, {eng.dtype}{weights} ({_hardware_note(eng)})",
              file=sys.stderr)
    words = eng.aligner is not None
    jobs = []
    for name in files:
        try:
            jobs.append(eng.submit_file(name, language=args.language, context=args.context, word_timestamps=words,
                                        max_chunk_seconds=numbers.get("max_chunk_seconds")))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    bar = ProgressBar(len(jobs), not args.quiet)
    written, failed = set(), 0
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
            if job.state == "failed":
                failed += 1
                bar.close() if bar.enabled else None
                print(f"error: {job.error}", file=sys.stderr)
                continue
            index = jobs.index(job)
            out_dir = args.output_dir or Path(job.source).parent
            for fmt in args.format:
                try:
                    path = export(job.transcript, fmt, out_dir, names.stem(index), names=names,
                                  overwrite=args.overwrite)
                    if not args.quiet:
                        print(f"wrote {path}", file=sys.stderr)
                except OSError as e:
                    failed += 1
                    print(f"error: {e}", file=sys.stderr)
            for note in job.transcript.notes:
                print(f"note: {job.source}: {note}", file=sys.stderr)
            if args.format == ["txt"] and args.output_dir is None and not args.quiet:
                print(job.transcript.text)
        if len(written) == len(jobs):
            break
    bar.close()
    return 1 if failed else 0


def _cache_option(kv_cache_mb: int | None) -> dict:
    return {} if kv_cache_mb is None else {"kv_cache_bytes": kv_cache_mb << 20}


def _one_line(error: Exception) -> str:
    """An error message on one line (library messages may hold newlines)."""
    return " ".join(str(error).split())


def _one_line_warnings() -> None:
    """Library warnings (int8 cache, odd audio) as one "warning: ..." line, not two with a source line."""
    import warnings

    warnings.formatwarning = lambda message, *rest, **kw: f"warning: {' '.join(str(message).split())}\n"


def main(argv=None) -> int:
    _one_line_warnings()
    args = build_parser().parse_args(argv)
    if args.command == "transcribe":
        return transcribe_command(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
