"""``qwen3-asr transcribe --ray [ADDRESS]``: the archive job of cluster.archive from the command line."""
from __future__ import annotations

import argparse
import sys


def ray_transcribe_command(args, plan_outputs, one_line) -> int:
    """``transcribe --ray``: the CLI's inputs, output names (``plan_outputs``) and formats, run by
    cluster.archive on Ray; ``one_line`` formats an error as the CLI does."""
    from cluster import RayMissing

    address = args.ray
    if getattr(args, "server", None):
        print("error: --ray and --server are two ways to run elsewhere: give one of them", file=sys.stderr)
        return 2
    if not args.model:
        print("error: --ray needs --model (a folder at the same path on every node, or a Hugging Face id)",
              file=sys.stderr)
        return 2
    if args.output_dir is None:
        print("error: --ray needs -o OUT (the folder for the outputs and the job's manifest)", file=sys.stderr)
        return 2
    # existing outputs are checked by the job: those of files finished by an earlier run are skipped
    files, names, problem = plan_outputs(argparse.Namespace(**{**vars(args), "overwrite": True}))
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    try:
        from cluster.archive import ArchiveJob, ArchiveOptions, print_progress, run_job

        options = ArchiveOptions(model=args.model, aligner=args.aligner, language=args.language, context=args.context,
                                 device=args.device, dtype=args.dtype, quantize=args.quantize,
                                 max_chunk_seconds=args.max_chunk_seconds, use_vad=not args.no_vad,
                                 formats=tuple(args.format), engines=args.ray_engines,
                                 cpus_per_engine=args.ray_cpus_per_engine, overwrite=args.overwrite)
        job = ArchiveJob(files, args.output_dir, options, names=names, address=address or None)
        summary = run_job(job, None if args.quiet else print_progress)
    except RayMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FileExistsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ConnectionError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    failed = summary.count("failed")
    if not args.quiet:
        print(f"{summary.count('done')} done, {summary.count('skipped')} skipped (done before), {failed} failed "
              f"on {summary.engines} engine(s) in {summary.wall_seconds:.1f} s "
              f"({summary.files_per_minute:.1f} files/min)", file=sys.stderr)
    return 1 if failed else 0
