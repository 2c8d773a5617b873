"""``qwen3-asr serve``: the OpenAI-compatible server (server/) over one engine."""
from __future__ import annotations

import os
import sys


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="serve an OpenAI-compatible transcription API over HTTP")
    s.add_argument("--model", required=True, help="model folder, or a Hugging Face id such as Qwen/Qwen3-ASR-0.6B")
    s.add_argument("--aligner", help="Qwen3-ForcedAligner folder or id: word timestamps for clients that ask")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this computer only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--api-key", default=os.environ.get("QWEN3_ASR_API_KEY"),
                   help="Bearer key clients must send (default $QWEN3_ASR_API_KEY); required off loopback")
    s.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when available")
    s.add_argument("--dtype", choices=["float32", "bfloat16", "float16"])
    s.add_argument("--quantize", choices=["int8"], help="int8 decoder weights on CPU: faster, not token-exact")
    s.add_argument("--model-name", default="qwen3-asr", help="the model id /v1/models lists (default qwen3-asr)")
    s.add_argument("--max-upload-mb", type=int, default=200, help="largest upload accepted (default 200)")
    s.add_argument("--timeout", type=float, default=600.0, help="seconds a file request may take (default 600)")
    s.add_argument("--max-queue", type=int, default=64, help="files queued at once before 429 (default 64)")
    s.add_argument("--max-live-sessions", type=int, default=32, help="open live sessions (default 32)")
    s.add_argument("--decode-workers", type=int, default=2, help="threads checking uploads (default 2)")


def serve_command(args, resolve_model, one_line) -> int:
    import engine
    from server.settings import ServerSettings

    try:
        from engine.arguments import check_serve_numbers

        check_serve_numbers(args)   # each numeric flag by its rule, named, before anything loads
        settings = ServerSettings(host=args.host, port=args.port, api_key=args.api_key or None,
                                  model_name=args.model_name, max_upload_bytes=args.max_upload_mb * 2**20,
                                  request_timeout_s=args.timeout, max_queued_files=args.max_queue,
                                  decode_workers=args.decode_workers,
                                  max_live_sessions=args.max_live_sessions).check()
        from server.serve import serve
    except (ValueError, ImportError) as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    try:
        config = engine.EngineConfig(device=args.device, dtype=args.dtype, quantize=args.quantize)
        eng = engine.load(resolve_model(args.model), aligner=resolve_model(args.aligner) if args.aligner else None,
                          config=config)
    except Exception as e:  # one line, never a traceback
        print(f"error: cannot load the model in {args.model}: {one_line(e)}", file=sys.stderr)
        return 2
    print(f"serving {settings.model_name} ({eng.device}, {eng.dtype}) on http://{settings.host}:{settings.port}"
          f"{' with an API key' if settings.api_key else ''}", file=sys.stderr)
    summary = serve(eng, settings)
    print(f"stopped: {len(summary['finished'])} file(s) finished during shutdown, "
          f"{len(summary['cancelled'])} cancelled", file=sys.stderr)
    return 0
