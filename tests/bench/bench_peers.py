"""Side by side with other Qwen3-ASR engines on CPU: one-clip latency and a 16-clip queue.

    python tests/bench/bench_peers.py [--dtypes float32,bfloat16,int8] \\
        [--antirez-bin /path/to/qwen_asr] \\
        [--crispasr-python /path/to/venv/bin/python --crispasr-gguf-dir /path/to/ggufs] \\
        [--crispasr-lib /path/to/native/build/libcrispasr.so] \\
        [--sherpa-python /path/to/venv/bin/python --sherpa-dir /path/to/onnx-export] \\
        [--model DIR] [--clips 16 | --durations 2,5] [--repeat 3] [--threads 2]

Peers are not part of this project: build or install them yourself and pass their paths;
a peer whose path is not given is skipped with a message.

- antirez/qwen-asr (C, ``make blas``): its binary, one process per clip on a 16-bit WAV, with
  ``--language English -t THREADS``. Timed from its "Model loaded." line (stderr) to the
  arrival of the N-th generated token on stdout (it streams every token and flushes); the
  process is then killed. Its load time (process start to that line) is printed apart.
  Its time so includes reading the WAV and loading vocab.json, which it does per call.
- CrispASR (ggml): the ``crispasr`` Python package's ``Session(gguf, n_threads)`` in the venv
  given by ``--crispasr-python``, on every ``*f16*.gguf``, ``*q8_0*.gguf``, ``*q4_0*.gguf`` in
  ``--crispasr-gguf-dir`` (converted from ``--model``), ``set_max_new_tokens(N)``,
  ``transcribe(pcm, language="en")``, tokens counted by its token callback, which sees every
  generated token before its loop removal (the returned text has loops removed); one clip at a time (it has no batching). Run as a
  subprocess that prints its timings as JSON; load time printed apart. The PyPI wheel is built
  for AVX2; ``--crispasr-lib`` adds the same GGUFs through a library built from source for this
  CPU (``CRISPASR_LIB_PATH``), as a user who builds CrispASR gets::

      git clone --recursive https://github.com/CrispStrobe/CrispASR && cd CrispASR
      cmake -B build-native -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=ON \\
          -DCRISPASR_BUILD_EXAMPLES=OFF -DCRISPASR_BUILD_SERVER=OFF -DCRISPASR_BUILD_TESTS=OFF
      cmake --build build-native --target crispasr-lib -j2    # -> build-native/src/libcrispasr.so

- sherpa-onnx (ONNX Runtime): ``OfflineRecognizer.from_qwen3_asr`` in the venv given by
  ``--sherpa-python`` (``pip install sherpa-onnx onnx onnxruntime transformers==4.57.6``) over
  the graphs in ``--sherpa-dir``, exported from ``--model`` with github:Wasser1462/Qwen3-ASR-onnx
  (the exporter sherpa-onnx's model cards name)::

      python export_qwen3_asr_onnx.py --model MODEL --outdir DIR --max-total-len 512

  which writes fp32 (conv_frontend.onnx, encoder.onnx, decoder.onnx) and int8
  (``*.int8.onnx``) graphs; both are run. Token counts are made equal per clip with the stream
  option ``max_new_tokens``; sherpa cuts a decode that loops short (a random model loops), so
  the tokens it really generated (its filler words) are counted and every clip it cut is listed.
  It decides the language itself (no forced "language English" prefix: 3 prompt tokens fewer).
- ours: ``engine.load(model, device="cpu", dtype=...)`` for float32 and bfloat16, and int8
  with ``quantize="int8"`` where the engine has it. Batched: the whole queue submitted, then
  stepped; one by one: each clip submitted alone and stepped to the end (what
  ``eng.generate([clip])`` does), with ``ignore_eos=True`` so the repetition guard does not
  stop a random model's loops early. Each timed run of ours is on audio it has not seen
  (``common.unseen``): the engine caches encoder output and prompt KV blocks by audio, so a
  repeated clip would skip most of its first step, which no user's new file does.

Every side forces English ("language English<asr_text>" after the prompt) and generates
exactly the same number of tokens: 40 for the 10 s latency clip, 4 per second of audio for
each queued clip. The checkpoint (``peer_checkpoint.py``) makes that possible: Qwen's real
token ids, end tokens that never win, and every generated token one space-led word, so each
peer's token count is checked (antirez's by counting the words it prints).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import settled, synthetic_clip, unseen

DURATIONS = [2, 27, 5, 14, 29, 8, 3, 21, 11, 17, 6, 25, 9, 19, 4, 12]   # seconds, mixed
TOKENS_PER_SECOND = 4
LATENCY_SECONDS = 10
LATENCY_TOKENS = 40


# What tests/bench/avx2_only.sh sets to keep torch, oneDNN, fbgemm, numba and OpenBLAS off AVX-512.
AVX2_CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "FBGEMM_ENABLE_INSTRUCTIONS", "NUMBA_CPU_NAME",
             "OPENBLAS_CORETYPE")


def cpu_summary() -> str:
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model in ("unknown CPU", "", platform.processor()):
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    has = lambda f: "yes" if f in flags else "no"
    line = (f"CPU {model}, {os.cpu_count()} cores; AMX-BF16 {has('amx_bf16')}, AVX512-BF16 {has('avx512_bf16')}, "
            f"AVX512F {has('avx512f')}, AVX2 {has('avx2')}")
    capped = {name: os.environ[name] for name in AVX2_CAPS if name in os.environ}
    if capped:   # tests/bench/avx2_only.sh: an AVX2-only CPU's paths on this one
        line += "\n  instruction sets capped: " + ", ".join(f"{k}={v}" for k, v in capped.items())
    return line


def as_int16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def write_wav(path: Path, pcm16: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(pcm16.tobytes())


# ----------------------------------------------------------------------------- ours
def load_ours(model_dir, precision: str):
    """(Engine for a precision, its ``engine.load`` seconds), or (None, 0) with a message when the
    engine cannot do it. The load is timed as the peers' are: in a process that has its libraries
    imported, to the engine's return (its background move onto 2 MB pages not waited for)."""
    import engine
    import engine.api  # noqa: F401  (the peers' libraries are imported before their timers too)
    from transformers import AutoTokenizer  # noqa: F401

    start = time.perf_counter()
    if precision == "int8":
        try:
            eng = engine.load(model_dir, device="cpu", quantize="int8")
        except TypeError:
            print("int8: not available (engine.load has no quantize option)")
            return None, 0.0
    else:
        eng = engine.load(model_dir, device="cpu", dtype=precision)
    load = time.perf_counter() - start
    return settled(eng), load


def submit(eng, clip, n):
    """A request for exactly ``n`` tokens: ``ignore_eos`` also turns off the repetition guard,
    which would stop a random model's loops early (peers have no such guard)."""
    try:
        return eng.submit(clip, language="English", max_new_tokens=n, ignore_eos=True)
    except TypeError:
        return eng.submit(clip, language="English", max_new_tokens=n)


def run_ours(eng, clips, tokens, latency_clip, repeat, one_by_one=True):
    def generate(clip, n):      # one clip at a time, as eng.generate([clip]) does
        req = submit(eng, clip, n)
        while not req.finished:
            eng.step()
        assert len(req.token_ids) == n, (len(req.token_ids), n)

    # Every timed run gets audio the engine has not seen (common.unseen): a repeat of the same
    # clip would find its encoder output and its prompt's KV blocks cached and skip most of step 1.
    generate(unseen(latency_clip, 1)[:16000], 2)                           # warm-up
    latency = min(_timed(lambda: generate(unseen(latency_clip, 2 + r), LATENCY_TOKENS)) for r in range(repeat))
    first = min(_timed(lambda: generate(unseen(latency_clip, 2 + repeat + r), 1))   # encoder, prefill, token 1
                for r in range(repeat))
    step = (latency - first) / (LATENCY_TOKENS - 1)                        # one decode step of one row

    def queue():
        reqs = [submit(eng, c, n) for c, n in zip(clips, tokens)]
        while not all(r.finished for r in reqs):
            eng.step()
        got = [len(r.token_ids) for r in reqs]
        assert got == tokens, (got, tokens)

    batched = _timed(queue)
    single = _timed(lambda: [generate(unseen(c, 1), n) for c, n in zip(clips, tokens)]) if one_by_one else None
    return latency, batched, single, step


def decode_rate_line(eng, precision: str, step: float, machine: dict[str, float]) -> str:
    """One decode step's time, and (float weights) the GB/s it reads against the machine's best GEMV."""
    line = f"  one-clip decode step {step * 1e3:.1f} ms"
    if precision in ("float32", "bfloat16") and machine:
        from profile_one_clip import decode_bytes

        nbytes = decode_bytes(eng.runner.net)
        best = max(machine.values())
        line += (f": reads {nbytes / 1e9:.2f} GB -> {nbytes / step / 1e9:.1f} GB/s, {nbytes / step / 1e9 / best:.0%} "
                 f"of this machine's best GEMV ({best:.1f} GB/s)")
    return line


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ----------------------------------------------------------------------------- antirez
def antirez_clip(binary, model_dir, wav: Path, n_tokens: int, threads: int) -> tuple[float, float]:
    """(seconds from "Model loaded." to the n-th generated token, load seconds)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(binary), "-d", str(model_dir), "-i", str(wav), "-t", str(threads),
                             "--language", "English"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    loaded = None
    err, words, done_at = b"", 0, None
    try:
        while done_at is None:
            events = sel.select(timeout=600)
            if not events:
                raise RuntimeError("antirez: no output for 600 s")
            for key, _ in events:
                chunk = os.read(key.fileobj.fileno(), 65536)
                now = time.perf_counter()
                if not chunk:
                    sel.unregister(key.fileobj)
                    if not sel.get_map():
                        raise RuntimeError(f"antirez ended after {words} tokens: {err.decode(errors='replace')[-800:]}")
                    continue
                if key.data == "err":
                    err += chunk
                    if loaded is None and b"Model loaded." in err:
                        loaded = now
                elif loaded is not None:
                    words += chunk.count(b" ")      # every generated token is one " w..." word
                    if words >= n_tokens:
                        done_at = now
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    if words != n_tokens:
        raise RuntimeError(f"antirez: read {words} tokens in one piece of output, expected {n_tokens}")
    return done_at - loaded, loaded - t0


def run_antirez(binary, model_dir, wavs, tokens, latency_wav, threads, repeat):
    antirez_clip(binary, model_dir, latency_wav, 2, threads)                # warm the page cache
    runs = [antirez_clip(binary, model_dir, latency_wav, LATENCY_TOKENS, threads) for _ in range(repeat)]
    latency, load = min(r[0] for r in runs), min(r[1] for r in runs)
    queue = sum(antirez_clip(binary, model_dir, w, n, threads)[0] for w, n in zip(wavs, tokens))
    return latency, queue, load


# ----------------------------------------------------------------------------- CrispASR
# What both peers' worker scripts start with: their config, the clips read from WAV files.
_WORKER_HEAD = r"""
import json, sys, time, wave
import numpy as np

cfg = json.load(open(sys.argv[1]))

def read(p):
    with wave.open(p) as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768.0

clips = [read(p) for p in cfg["clips"]]
lat = read(cfg["latency_clip"])
out = {}
"""


CRISP_SCRIPT = _WORKER_HEAD + "import crispasr\n" + r'''
for label, path in cfg["ggufs"].items():
    t = time.perf_counter()
    s = crispasr.Session(path, n_threads=cfg["threads"])
    load = time.perf_counter() - t

    # Count tokens with the token callback, which sees every generated token before loop removal
    # (for qwen3 it runs after the whole decode): the returned segments are after CrispASR's
    # fix_loops, which drops repeated n-grams (a random model repeats), so they undercount.
    generated = []
    s.set_token_callback(lambda piece, index: generated.append(index))

    def run(pcm, n):
        s.set_max_new_tokens(n)
        generated.clear()
        s.transcribe(pcm, language="en")
        return len(generated)

    run(lat[:16000], 2)
    best, got = float("inf"), None
    for _ in range(cfg["repeat"]):
        t = time.perf_counter()
        got = run(lat, cfg["latency_tokens"])
        best = min(best, time.perf_counter() - t)
    t = time.perf_counter()
    counts = [run(c, n) for c, n in zip(clips, cfg["tokens"])]
    queue = time.perf_counter() - t
    out[label] = dict(backend=s.backend, load_s=load, latency_s=best, latency_tokens=got,
                      queue_s=queue, queue_tokens=counts)
    s.close()
print("JSON:" + json.dumps(out), flush=True)
'''


def crisp_ggufs(folder: Path) -> dict[str, str]:
    found = {}
    for label in ("f16", "q8_0", "q4_0"):
        hits = sorted(p for p in folder.glob("*.gguf") if label in p.name.lower())
        if hits:
            found[label] = str(hits[0])
    return found


def run_crisp(python, ggufs, wavs, tokens, latency_wav, threads, repeat, workdir: Path, lib: Path | None = None):
    cfg = {"ggufs": ggufs, "clips": [str(w) for w in wavs], "tokens": tokens, "latency_clip": str(latency_wav),
           "latency_tokens": LATENCY_TOKENS, "threads": threads, "repeat": repeat}
    (workdir / "crisp.json").write_text(json.dumps(cfg))
    (workdir / "crisp_bench.py").write_text(CRISP_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if lib is not None:            # the binding loads this build instead of the wheel's library
        env["CRISPASR_LIB_PATH"] = str(lib)
    proc = subprocess.run([str(python), str(workdir / "crisp_bench.py"), str(workdir / "crisp.json")],
                          capture_output=True, text=True, env=env, check=False)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("JSON:")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"CrispASR run failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
    return json.loads(line[5:])


# ----------------------------------------------------------------------------- sherpa-onnx
SHERPA_SCRIPT = _WORKER_HEAD + "import sherpa_onnx\n" + r"""
for label, g in cfg["graphs"].items():
    t = time.perf_counter()
    rec = sherpa_onnx.OfflineRecognizer.from_qwen3_asr(
        conv_frontend=g["conv_frontend"], encoder=g["encoder"], decoder=g["decoder"], tokenizer=cfg["tokenizer"],
        num_threads=cfg["threads"], max_total_len=cfg["max_total_len"], max_new_tokens=max(cfg["tokens"] + [cfg["latency_tokens"]]))
    load = time.perf_counter() - t

    def run(pcm, n):
        s = rec.create_stream()
        s.set_option("max_new_tokens", str(n))
        s.accept_waveform(16000, pcm)
        rec.decode_stream(s)
        return sum(1 for w in s.result.text.split() if w.startswith("w"))   # one filler word a token

    run(lat[:16000], 2)
    best, got = float("inf"), None
    for _ in range(cfg["repeat"]):
        t = time.perf_counter()
        got = run(lat, cfg["latency_tokens"])
        best = min(best, time.perf_counter() - t)
    t = time.perf_counter()
    counts = [run(c, n) for c, n in zip(clips, cfg["tokens"])]
    queue = time.perf_counter() - t
    out[label] = dict(load_s=load, latency_s=best, latency_tokens=got, queue_s=queue, queue_tokens=counts)
print("JSON:" + json.dumps(out), flush=True)
"""


def sherpa_graphs(folder: Path) -> dict[str, dict[str, str]]:
    """fp32 and int8 graph sets found in an export folder. The exporter quantizes the encoder and
    the decoder only: an int8 set takes the fp32 conv_frontend.onnx when there is no int8 one."""
    found = {}
    for label, suffix in (("fp32", ".onnx"), ("int8", ".int8.onnx")):
        g = {part: str(folder / f"{part}{suffix}") for part in ("conv_frontend", "encoder", "decoder")}
        if not Path(g["conv_frontend"]).is_file():
            g["conv_frontend"] = str(folder / "conv_frontend.onnx")
        if all(Path(p).is_file() for p in g.values()):
            found[label] = g
    return found


def sherpa_tokenizer(model_dir: Path, workdir: Path) -> Path:
    """vocab.json, merges.txt and a tokenizer_config.json with ``added_tokens_decoder``, the only
    place sherpa-onnx reads special tokens from (built from tokenizer.json's added tokens)."""
    out = workdir / "sherpa_tokenizer"
    out.mkdir(exist_ok=True)
    for name in ("vocab.json", "merges.txt"):
        (out / name).write_bytes((model_dir / name).read_bytes())
    config = json.loads((model_dir / "tokenizer_config.json").read_text())
    added = json.loads((model_dir / "tokenizer.json").read_text())["added_tokens"]
    config["added_tokens_decoder"] = {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added}
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


def run_sherpa(python, graphs, tokenizer, wavs, tokens, latency_wav, threads, repeat, workdir: Path,
               max_total_len=512):
    cfg = {"graphs": graphs, "tokenizer": str(tokenizer), "clips": [str(w) for w in wavs], "tokens": tokens,
           "latency_clip": str(latency_wav), "latency_tokens": LATENCY_TOKENS, "threads": threads,
           "repeat": repeat, "max_total_len": max_total_len}
    (workdir / "sherpa.json").write_text(json.dumps(cfg))
    (workdir / "sherpa_bench.py").write_text(SHERPA_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    proc = subprocess.run([str(python), str(workdir / "sherpa_bench.py"), str(workdir / "sherpa.json")],
                          capture_output=True, text=True, env=env, check=False)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("JSON:")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"sherpa-onnx run failed (rc {proc.returncode}): {proc.stderr[-1500:]}")
    return json.loads(line[5:])


def token_note(latency_tokens, queue_tokens, tokens) -> str:
    """Empty when every count is as asked; else which clips stopped early and the totals."""
    cut = [f"clip {i}: {got}/{want}" for i, (got, want) in enumerate(zip(queue_tokens, tokens)) if got != want]
    parts = []
    if latency_tokens != LATENCY_TOKENS:
        parts.append(f"1-clip {latency_tokens}/{LATENCY_TOKENS} tokens")
    if cut:
        parts.append(f"queue {sum(queue_tokens)}/{sum(tokens)} tokens, cut short: {', '.join(cut)}")
    return "; ".join(parts)


# ----------------------------------------------------------------------------- main
def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="checkpoint (default: peer_checkpoint.py's, built once)")
    parser.add_argument("--dtypes", default="float32,bfloat16,int8", help="ours: float32,bfloat16,int8")
    parser.add_argument("--antirez-bin", type=Path, help="antirez/qwen-asr binary (qwen_asr)")
    parser.add_argument("--crispasr-gguf-dir", type=Path, help="folder with *f16*/*q8_0*/*q4_0* .gguf of --model")
    parser.add_argument("--crispasr-python", type=Path, help="python of a venv with crispasr installed")
    parser.add_argument("--crispasr-lib", type=Path,
                        help="libcrispasr.so built from source with native flags (see above); run beside the wheel")
    parser.add_argument("--sherpa-python", type=Path, help="python of a venv with sherpa-onnx installed")
    parser.add_argument("--sherpa-dir", type=Path, help="Wasser1462/Qwen3-ASR-onnx export of --model (fp32, int8)")
    parser.add_argument("--skip-crispasr-wheel", action="store_true", help="only the --crispasr-lib build")
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--durations", help="comma-separated clip seconds instead of the 16-clip set (quick runs)")
    parser.add_argument("--repeat", type=int, default=3, help="latency: best of this many runs")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-ours", action="store_true")
    parser.add_argument("--no-one-by-one", action="store_true",
                        help="ours: skip the queue run one clip at a time (the slowest part on a 2-core CPU)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if args.model is None:
        from peer_checkpoint import peer_checkpoint

        args.model = peer_checkpoint()
    durations = [int(d) for d in args.durations.split(",")] if args.durations else (DURATIONS * 4)[:args.clips]
    tokens = [TOKENS_PER_SECOND * d for d in durations]
    audio_seconds = sum(durations)
    clips16 = [as_int16(synthetic_clip(d, i)) for i, d in enumerate(durations)]
    latency16 = as_int16(synthetic_clip(LATENCY_SECONDS, 1000))
    clips = [c.astype(np.float32) / 32768.0 for c in clips16]
    latency_clip = latency16.astype(np.float32) / 32768.0

    print(cpu_summary())
    print(f"threads {args.threads} everywhere; checkpoint {args.model}")
    print(f"queue: {len(clips)} clips, {audio_seconds} s of audio, {sum(tokens)} tokens ({TOKENS_PER_SECOND} per "
          f"second of audio); latency: one {LATENCY_SECONDS} s clip, {LATENCY_TOKENS} tokens; English forced, "
          f"end token never wins, same token counts on every side\n", flush=True)

    rows = []    # (side, precision, latency, queue wall, note)
    work = Path(tempfile.mkdtemp(prefix="bench_peers_"))
    wavs = []
    for i, c in enumerate(clips16):
        wavs.append(work / f"clip{i:02d}.wav")
        write_wav(wavs[-1], c)
    latency_wav = work / "latency.wav"
    write_wav(latency_wav, latency16)

    machine = {}
    if not args.skip_ours:
        from profile_one_clip import gemv_bandwidth_apart

        machine = gemv_bandwidth_apart(args.threads)
        print("GEMV bandwidth over a 1 GiB weight (what a decode step can read from memory): "
              + ", ".join(f"{k} {v:.1f} GB/s" for k, v in machine.items()), flush=True)
        for precision in args.dtypes.split(","):
            eng, load = load_ours(args.model, precision)
            if eng is None:
                continue
            latency, batched, single, step = run_ours(eng, clips, tokens, latency_clip, args.repeat,
                                                      one_by_one=not args.no_one_by_one)
            label = precision if precision != "int8" else f"int8 ({eng.dtype})"
            rows.append(("ours batched", label, latency, batched, f"load {load:.1f} s"))
            if single is not None:
                rows.append(("ours one by one", label, latency, single, f"load {load:.1f} s"))
            print(f"ours {label}: latency {latency:.2f} s, queue batched {batched:.2f} s"
                  + (f", one by one {single:.2f} s" if single is not None else ""), flush=True)
            print(decode_rate_line(eng, precision, step, machine), flush=True)
            del eng

    if args.crispasr_gguf_dir is None or args.crispasr_python is None:
        print("CrispASR: skipped (give --crispasr-python and --crispasr-gguf-dir)")
    else:
        ggufs = crisp_ggufs(args.crispasr_gguf_dir)
        builds = ([] if args.skip_crispasr_wheel else [("wheel", None)]) + \
            ([("native", args.crispasr_lib)] if args.crispasr_lib else [])
        if not ggufs:
            print(f"CrispASR: skipped (no *f16*/*q8_0*/*q4_0* .gguf in {args.crispasr_gguf_dir})")
        for build, lib in builds if ggufs else []:
            try:
                res = run_crisp(args.crispasr_python, ggufs, wavs, tokens, latency_wav, args.threads, args.repeat,
                                work, lib)
            except RuntimeError as e:
                print(f"CrispASR {build}: FAILED: {e}", flush=True)
                continue
            for label, r in res.items():
                counts = token_note(r["latency_tokens"], r["queue_tokens"], tokens)
                note = f"{r['backend']}, load {r['load_s']:.1f} s" + (f"; TOKEN COUNTS DIFFER: {counts}" if counts else "")
                rows.append((f"CrispASR {build}", label, r["latency_s"], r["queue_s"], note))
                print(f"CrispASR {build} {label}: latency {r['latency_s']:.2f} s, queue {r['queue_s']:.2f} s ({note})",
                      flush=True)

    if args.sherpa_python is None or args.sherpa_dir is None:
        print("sherpa-onnx: skipped (give --sherpa-python and --sherpa-dir)")
    else:
        graphs = sherpa_graphs(args.sherpa_dir)
        if not graphs:
            print(f"sherpa-onnx: skipped (no conv_frontend/encoder/decoder[.int8].onnx in {args.sherpa_dir})")
        else:
            res = run_sherpa(args.sherpa_python, graphs, sherpa_tokenizer(args.model, work), wavs, tokens, latency_wav,
                             args.threads, args.repeat, work)
            for label, r in res.items():
                counts = token_note(r["latency_tokens"], r["queue_tokens"], tokens)
                note = f"load {r['load_s']:.1f} s" + (f"; STOPPED EARLY: {counts}" if counts else "")
                rows.append(("sherpa-onnx", label, r["latency_s"], r["queue_s"], note))
                print(f"sherpa-onnx {label}: latency {r['latency_s']:.2f} s, queue {r['queue_s']:.2f} s ({note})",
                      flush=True)

    if args.antirez_bin is None:
        print("antirez: skipped (give --antirez-bin)")
    else:
        latency, queue, load = run_antirez(args.antirez_bin, args.model, wavs, tokens, latency_wav, args.threads,
                                           args.repeat)
        rows.append(("antirez", "bf16 weights, f32 math", latency, queue,
                     f"load {load:.1f} s (start to 'Model loaded.'), not counted"))
        print(f"antirez: latency {latency:.2f} s, queue {queue:.2f} s, load {load:.1f} s", flush=True)

    print(f"\n{'side':18s} {'precision':24s} {'1-clip s':>9s} {'16-clip s':>10s} {'audio-s/s':>10s}  note")
    for side, prec, lat, wall, note in rows:
        print(f"{side:18s} {prec:24s} {lat:9.2f} {wall:10.2f} {audio_seconds / wall:10.2f}  {note}")
    ours = [r for r in rows if r[0].startswith("ours")]
    peers = [r for r in rows if not r[0].startswith("ours")]
    if ours and peers:
        print("\nratios, peer time / our time (above 1: ours faster); latency | 16-clip queue")
        for side, prec, lat, wall, _ in peers:
            parts = [f"vs ours {o[0].removeprefix('ours ')} {o[1]}: {lat / o[2]:.2f}x | {wall / o[3]:.2f}x"
                     for o in ours]
            print(f"{side} {prec}:")
            for p in parts:
                print(f"    {p}")


if __name__ == "__main__":
    main()
