"""Live stream cost over a long session: update time at minute 1 vs the last minute, commit latency.

    python tests/bench/bench_stream.py [--minutes 10] [--dtype bfloat16|float32] [--quantize int8]
        [--device cpu|cuda] [--checkpoint DIR]

A checkpoint with the real Qwen3-ASR-0.6B dimensions and random weights is built once and
cached (tests/bench/common.py). The stream is espeak-ng sentences with pauses of 0.5-2 s,
repeated to ``--minutes``. The engine is the clock: the next block of ``--block`` seconds is
fed as soon as the stream has no update in flight, one engine step per block, so the stream
runs as fast as the engine consumes it, every due update runs (none is skipped), final passes
run alongside, and a run does the same work on any machine.

Printed per run (the stream alone, then beside a file queue that keeps ``--queue-clips`` long
clips in flight, both engine-clocked, so they measure cost; then ``realtime``: beside the same
queue with the audio arriving at the speaker's pace, what a user sees, in stream_realtime.py):
the wall time of each update request (from the start of the engine step that submitted it to its
finish: the pass's encode counts whether the stream runs it before submitting or the step does),
its mean over the first and the last minute of stream time and their ratio (a pass only ever sees
the open utterance, so it should stay below 1.3), and the latency from an utterance's end (the step
that fed its last sample) to its final pass being resolved, in wall seconds and engine steps;
then the engine time per stream second, update wall time p50/p95, the share of draft tokens
(the previous pass's tokens) that verification accepted, and what the passes found in serving's caches
(prompt prefix in the KV cache, encoder chunks and windows in the encoder cache).

Random weights never say anything a tokenizer can spell and rarely stop, so every pass is
capped at what a real model says: 6 tokens (``language X<asr_text>``) plus ``--tokens-per-second``
(4) per second of its audio; queue clips likewise. The base context holds ``--context-chars``
characters to stand in for the recent committed text a real session sends along.

Random weights also understate the draft's worth: their tokens change with every new bit of
audio, where a real model's text of the words already heard stays put. ``--widened`` runs the
trained test model widened to the 0.6B dimensions instead (tests/widened_model.py): the 0.6B's
cost, a model that hears the held-out sentences it speaks, and the committed text's WER printed.

CPU cost (2 cores, AMD EPYC with AVX2 only, stored in bfloat16, run in float32 with compact
weights), one run each, 1 minute alone: random 0.6B 1.86 engine seconds per stream second,
update p50 1.43 s, 14% of draft tokens accepted; widened 0.6B 1.14-1.25, update p50 0.9-1.0 s,
61-70% accepted. That machine's speed moved by up to 1.5x within minutes: compare only inside
one run. A 10-minute run (both runs) takes about 35 minutes there.
"""
from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import time
import wave
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np
import torch
from common import CACHE, real_size_checkpoint, settled, unseen, widened_checkpoint

SR = 16000
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Speech recognition runs locally on this computer.",
    "Every sentence is followed by a short pause.",
    "The weather today is sunny and warm.",
    "Please remember to save your work often.",
    "We will meet again at half past seven tomorrow morning.",
    "A long session should cost the same at the end as at the start.",
    "Numbers like forty two and nineteen eighty four are common.",
    "She sells sea shells by the sea shore.",
    "The meeting was moved to the large room on the second floor.",
]
FILLER = ("Meeting notes about the quarterly plan, the budget review and the product launch; "
          "names: Alice, Bob, Qwen. ")


@dataclass
class Tracked:
    """A request the stream submitted, with when (wall, stream position, step) and when it finished."""

    request: object
    span: tuple[int, int]
    submitted: float
    step: int
    due: float          # when the engine step that submitted it began (its encode counts, wherever it runs)
    finished: float | None = None
    finished_step: int | None = None


def speak(text: str) -> np.ndarray:
    """espeak-ng speech as float32 16 kHz, cached, with its own leading and trailing silence trimmed."""
    folder = CACHE / "stream-sentences"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha1(text.encode()).hexdigest()[:16]}.wav"
    if not path.is_file():
        if shutil.which("espeak-ng") is None or shutil.which("sox") is None:
            raise SystemExit("espeak-ng and sox are needed to make the synthetic stream")
        raw = path.with_suffix(".raw.wav")
        subprocess.run(["espeak-ng", "-w", str(raw), text], check=True, capture_output=True)
        subprocess.run(["sox", "-R", str(raw), "-r", str(SR), "-c", "1", "-b", "16", str(path)], check=True)
        raw.unlink()
    with wave.open(str(path)) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    return audio[loud[0]:loud[-1] + 1]


def synthetic_stream(minutes: float, sentences: list[str], seed: int = 0) -> tuple[np.ndarray, str]:
    """Sentences in a shuffled cycle with pauses of 0.5-2 s, ``minutes`` long; and the text of
    the sentences that end inside it, in order."""
    rng = np.random.default_rng(seed)
    spoken = [speak(t) for t in sentences]
    parts, total, want, said = [np.zeros(SR // 2, np.float32)], SR // 2, int(minutes * 60 * SR), []
    while total < want:
        for i in rng.permutation(len(spoken)):
            pause = np.zeros(int(rng.uniform(0.5, 2.0) * SR), np.float32)
            parts += [spoken[i], pause]
            if total + len(spoken[i]) <= want:
                said.append(sentences[i])
            total += len(spoken[i]) + len(pause)
    return np.concatenate(parts)[:want], " ".join(said)


class FileQueue:
    """Keeps ``size`` long clips in the engine at normal priority, topping up as they finish."""

    def __init__(self, eng, audio: np.ndarray, size: int, seconds: float, cap):
        self.eng, self.audio, self.size, self.cap = eng, audio, size, cap
        self.length = int(seconds * SR)
        self.active: list = []
        self.done = 0
        self._next = 0

    def top_up(self) -> None:
        self.done += sum(r.finished for r in self.active)
        self.active = [r for r in self.active if not r.finished]
        while len(self.active) < self.size:
            start = self._next % max(1, len(self.audio) - self.length)
            # turned (common.unseen): clips a third apart would otherwise start on windows the
            # encoder cache holds from the one before (30 s clips: every one after the first)
            clip = unseen(self.audio[start:start + self.length], 1 + self.done + len(self.active))
            self._next += self.length // 3 + SR
            self.active.append(self.eng.submit(clip, max_new_tokens=self.cap(len(clip) / SR)))

    def stop(self) -> None:
        for r in self.active:
            r.cancel()


def run_session(eng, audio: np.ndarray, args, queue: FileQueue | None) -> dict:
    """Stream ``audio`` one block per engine step; return what was measured."""
    stream = open_stream(eng, args)
    encoder_before = encoder_counts(eng)
    step, tracked, resolved, fed = 0, {"update": [], "final": []}, [], []
    step_began: list[float] = []
    stream.on_request = lambda kind, req, span: tracked[kind].append(
        Tracked(req, span, time.perf_counter(), step, step_began[-1]))
    stream.on_final = lambda final: resolved.append((final.end, time.perf_counter(), step))
    block = max(1, int(args.block * SR))
    started, pos, last_report = time.perf_counter(), 0, 0.0

    def one_step():
        nonlocal step
        if queue is not None and pos < len(audio):
            queue.top_up()
        step_began.append(time.perf_counter())
        eng.step()
        step += 1
        mark_finished(tracked["update"], step)

    while pos < len(audio):
        if any(t.finished is None for t in tracked["update"]):
            one_step()                           # the engine is still on the last update: let it finish
            continue
        stream.feed(audio[pos:pos + block])
        pos = min(len(audio), pos + block)
        fed.append((pos, time.perf_counter(), step))
        one_step()
        if args.progress and pos / SR - last_report >= 60:
            last_report = pos / SR
            print(f"  ... {last_report / 60:.0f} min of stream after {time.perf_counter() - started:.0f} s",
                  flush=True)
    stream.close()
    while not stream.finished:
        one_step()
    wall = time.perf_counter() - started
    if queue is not None:
        queue.stop()
        eng.step()
    if stream.error:
        raise SystemExit(stream.error)
    return dict(wall=wall, steps=step, seconds=len(audio) / SR, updates=tracked["update"],
                finals=tracked["final"], resolved=resolved, fed=fed, committed=len(stream.committed), stream=stream,
                queue_done=queue.done if queue is not None else None,
                encoder=[b - a for a, b in zip(encoder_before, encoder_counts(eng))])


def encoder_counts(eng) -> list[int]:
    """The runner's encoder cache counters (chunks and windows reused and computed), engine-wide."""
    enc = eng.runner.encoder_cache
    return [enc.chunks_reused, enc.chunks_computed, enc.windows_reused, enc.windows_computed]


def mark_finished(updates: list[Tracked], step: int) -> None:
    """Date the update that finished in the step just run (at most one is in flight)."""
    now = time.perf_counter()
    for t in updates[-2:]:
        if t.finished is None and t.request.finished:
            t.finished, t.finished_step = now, step


def open_stream(eng, args):
    context = (FILLER * (args.context_chars // len(FILLER) + 1))[:args.context_chars]
    return eng.open_stream(language=args.language, context=context, update_interval=args.update_interval,
                           max_new_tokens=token_cap(args))


def token_cap(args):
    """What a real model would say for ``seconds`` of speech: the language prefix, then the words."""
    return lambda seconds: 6 + int(args.tokens_per_second * seconds)


def latencies(result: dict) -> tuple[list[float], list[int]]:
    """Wall seconds and steps from the step that fed an utterance's last sample to its final resolving."""
    positions = [p for p, _, _ in result["fed"]]
    walls, steps = [], []
    for end, when, step in result["resolved"]:
        i = min(bisect_left(positions, end), len(positions) - 1)
        walls.append(when - result["fed"][i][1])
        steps.append(step - result["fed"][i][2])
    return walls, steps


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def report(name: str, result: dict, minutes: float) -> None:
    done = [t for t in result["updates"] if t.finished is not None and t.request.finish_reason != "cancelled"]
    last_from = max(0.0, minutes - 1) * 60 * SR
    first_done = [t for t in done if t.span[1] <= 60 * SR]
    last_done = [t for t in done if t.span[1] > last_from]
    first = [t.finished - t.due for t in first_done]
    last = [t.finished - t.due for t in last_done]
    first_steps = statistics.fmean([t.finished_step - t.step for t in first_done]) if first_done else float("nan")
    last_steps = statistics.fmean([t.finished_step - t.step for t in last_done]) if last_done else float("nan")
    longest = max((t.span[1] - t.span[0] for t in result["updates"]), default=0) / SR
    walls, steps = latencies(result)
    mean_first = statistics.fmean(first) if first else float("nan")
    mean_last = statistics.fmean(last) if last else float("nan")
    print(f"\n== {name}: {result['seconds'] / 60:.1f} min of stream in {result['wall']:.0f} s wall "
          f"({result['seconds'] / result['wall']:.2f}x real time), {result['steps']} steps")
    print(f"   updates: {len(result['updates'])} submitted, {len(done)} finished, longest audio {longest:.1f} s; "
          f"finals: {len(result['finals'])} ({result['committed']} with text)"
          + (f"; queue clips finished: {result['queue_done']}" if result["queue_done"] is not None else ""))
    print(f"   update time, minute 1:  mean {mean_first:.3f} s ({first_steps:.1f} steps) over {len(first)}")
    print(f"   update time, minute {minutes:g}: mean {mean_last:.3f} s ({last_steps:.1f} steps) over {len(last)}")
    ratio = mean_last / mean_first if first and last else float("nan")
    verdict = "ok" if ratio < 1.3 else "TOO HIGH" if ratio == ratio else "n/a"
    print(f"   ratio last/first: {ratio:.2f} ({verdict}; should stay < 1.3)")
    print(f"   end of utterance -> final resolved: p50 {percentile(walls, 50):.2f} s, p95 {percentile(walls, 95):.2f} s "
          f"wall; p50 {percentile(steps, 50):.0f}, p95 {percentile(steps, 95):.0f} steps")
    report_reuse(result, done)


def report_reuse(result: dict, done: list[Tracked]) -> None:
    """Engine time per stream second, update wall times, and how much each pass took from the last one."""
    walls = [t.finished - t.due for t in done]
    from_submission = [t.finished - t.submitted for t in done]
    print(f"   engine time per stream second: {result['wall'] / result['seconds']:.2f} "
          f"(at most 1.0 keeps up with real time)")
    print(f"   tentative update wall time: p50 {percentile(walls, 50):.3f} s, p95 {percentile(walls, 95):.3f} s "
          f"over {len(walls)} (from the step that submitted it; from the submission itself: p50 "
          f"{percentile(from_submission, 50):.3f} s)")
    # A final pass may be the last update itself (Stream._end): count each request once.
    passes = list({id(t.request): t.request for t in result["updates"] + result["finals"]}.values())
    offered = sum(r.draft_offered for r in passes)
    accepted = sum(r.draft_accepted for r in passes)
    tokens = sum(len(r.token_ids) for r in passes)
    print(f"   draft tokens accepted: {accepted} of {offered} verified "
          f"({accepted / max(1, offered):.0%}); {tokens} tokens in all passes")
    # Reuse is serving's: each pass's prompt tokens found in the prefix cache when it started, and the
    # runner's encoder cache over the run (files included, when a queue runs beside the stream).
    cached = sum(r.prefix_cached for r in passes)
    prompt = sum(len(r.prompt_ids) for r in passes)
    chunks_reused, chunks_computed, windows_reused, windows_computed = result["encoder"]
    print(f"   prompt tokens from the prefix cache: {cached} of {prompt} ({cached / max(1, prompt):.0%}); "
          f"encoder chunks reused {chunks_reused} of {chunks_reused + chunks_computed}, windows reused "
          f"{windows_reused} of {windows_reused + windows_computed}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="stream length (default 10)")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--quantize", choices=["int8"], help="CPU int8 weights (engine.load(quantize=...))")
    parser.add_argument("--no-compact-weights", action="store_true",
                        help="keep float weights (engine.load(compact_weights=False)); compact weights apply "
                             "to bf16-stored checkpoints on CPUs without bf16 hardware")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--checkpoint", help="a model folder to use instead of the cached random 0.6B one")
    parser.add_argument("--widened", action="store_true",
                        help="the trained tiny model widened to the 0.6B dimensions (tests/widened_model.py): "
                             "the 0.6B's cost with a model that hears words")
    parser.add_argument("--block", type=float, default=0.25, help="seconds of stream per engine step (0.25)")
    parser.add_argument("--update-interval", type=float, default=0.75)
    parser.add_argument("--tokens-per-second", type=float, default=None,
                        help="tokens a pass may say per second of its audio, plus 6 (default 4: random weights "
                             "never stop; 12 with --widened, which stops by itself)")
    parser.add_argument("--context-chars", type=int, default=200, help="base context length standing in for "
                        "recent committed text (default 200)")
    parser.add_argument("--language", default=None)
    parser.add_argument("--queue-clips", type=int, default=2, help="long clips kept in flight beside the stream")
    parser.add_argument("--queue-clip-seconds", type=float, default=30.0)
    parser.add_argument("--runs", default="alone,queue,realtime",
                        help="which runs, comma-separated: alone, queue (engine-clocked), realtime (beside the "
                             "queue, audio at real-time pace; stream_realtime.py); default all three")
    parser.add_argument("--progress", action="store_true", help="print a line per minute of stream")
    args = parser.parse_args()
    if args.minutes <= 0 or not 0 < args.block <= args.update_interval:
        parser.error("--minutes must be positive and 0 < --block <= --update-interval")
    if args.widened and args.checkpoint:
        parser.error("--widened and --checkpoint name two models; pick one")
    if args.tokens_per_second is None:
        args.tokens_per_second = 12.0 if args.widened else 4.0

    import engine

    model_dir = args.checkpoint or (widened_checkpoint() if args.widened else real_size_checkpoint())
    t = time.perf_counter()
    eng = engine.load(model_dir, device=args.device, dtype=args.dtype,
                      **({"quantize": args.quantize} if args.quantize else {}),
                      **({"compact_weights": False} if args.no_compact_weights else {}))
    settled(eng)
    if args.widened:
        from widened_model import use_widened_positions

        use_widened_positions(eng)
    print(f"model {model_dir} on {eng.device} in {eng.dtype}{' int8' if args.quantize else ''}{', compact weights' if eng.net.compact_projections else ''}, loaded in {time.perf_counter() - t:.1f} s; "
          f"torch threads {torch.get_num_threads()}")
    if eng.device == "cpu":
        from engine.network.loading import cpu_description

        print(f"CPU: {cpu_description()}")
    if args.widened:       # sentences like the trained model's own held-out set: its words are right
        from real_speech import heldout_sentences

        sentences = heldout_sentences()[:len(SENTENCES)]
    else:
        sentences = SENTENCES
    audio, said = synthetic_stream(args.minutes, sentences)
    eng.generate([audio[SR:3 * SR]], max_new_tokens=2)         # warm-up outside the measurement
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    for run in runs:
        if run not in ("alone", "queue", "realtime"):
            parser.error(f"unknown run {run!r}")
        queue = FileQueue(eng, audio, args.queue_clips, args.queue_clip_seconds, token_cap(args)) \
            if run != "alone" else None
        name = "stream alone" if queue is None else (f"stream beside a file queue ({args.queue_clips} x "
                                                     f"{args.queue_clip_seconds:g} s clips)")
        if run == "realtime":
            from stream_realtime import report_realtime, run_realtime   # it imports this module

            result = run_realtime(eng, audio, args, queue)
            report_realtime(name + ", audio at real-time pace", result, args.update_interval)
            walls, _ = latencies(result)
            print(f"   end of utterance -> final resolved: p50 {percentile(walls, 50):.2f} s, "
                  f"p95 {percentile(walls, 95):.2f} s wall")
        else:
            result = run_session(eng, audio, args, queue)
            report(name, result, args.minutes)
        if args.widened:
            from real_speech import wer

            committed = " ".join(seg.text for seg in result["stream"].committed)
            print(f"   committed text: WER {wer([said], [committed]):.1%} against the spoken sentences; "
                  f"starts {committed[:100]!r}")


if __name__ == "__main__":
    main()
