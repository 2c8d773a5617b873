"""``qwen3-asr transcribe --server URL``: the same files and outputs, transcribed by a server."""
from __future__ import annotations

import concurrent.futures
import sys
from pathlib import Path

PARALLEL_UPLOADS = 4     # enough for the server to batch chunks of several files in one step


def transcribe_remote(args, files, names) -> int:
    from engine.text.exports import export
    from server.client import ServerError, health, transcribe_file

    try:
        info = health(args.server, args.api_key)
    except ServerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    words = bool(info.get("aligner"))
    if not args.quiet:
        print(f"server {args.server}: model {info.get('model')}{', word timestamps' if words else ''}", file=sys.stderr)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(PARALLEL_UPLOADS) as pool:
        futures = [pool.submit(transcribe_file, args.server, name, api_key=args.api_key, language=args.language,
                               context=args.context, word_timestamps=words) for name in files]
        for index, (name, future) in enumerate(zip(files, futures)):
            try:
                transcript = future.result()
            except (ServerError, OSError) as e:
                failed += 1
                print(f"error: {name}: {e}", file=sys.stderr)
                continue
            out_dir = args.output_dir or Path(name).parent
            for fmt in args.format:
                try:
                    path = export(transcript, fmt, out_dir, names.stem(index), names=names, overwrite=args.overwrite)
                    if not args.quiet:
                        print(f"wrote {path}", file=sys.stderr)
                except OSError as e:
                    failed += 1
                    print(f"error: {e}", file=sys.stderr)
            if args.format == ["txt"] and args.output_dir is None and not args.quiet:
                print(transcript.text)
    return 1 if failed else 0
