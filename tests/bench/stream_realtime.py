"""The live stream beside a file queue with the audio arriving at the speaker's pace.

``bench_stream.py``'s other runs make the engine the clock: the next block of audio is fed as
soon as the last update is done, so every bit of queue work done meanwhile counts against the
stream. That measures cost. A user's microphone is the clock instead: audio arrives in real
time, the engine works on the queue whenever the stream leaves it time, and what matters is
whether the captions keep up. This run feeds the stream by the wall clock (one ``--block`` at
a time, as a capture callback does), steps the engine whenever it has work and sleeps when it
has none, and measures what the user sees: how far the text is behind the audio
(``Stream.lag_seconds`` after every step), update and final-commit latency in wall seconds,
updates run against those due, and the queue clips finished meanwhile.
"""
from __future__ import annotations

import time

import numpy as np
from bench_stream import SR, Tracked, mark_finished, open_stream, percentile


def run_realtime(eng, audio: np.ndarray, args, queue) -> dict:
    """Stream ``audio`` at real-time pace beside ``queue``; return what was measured, in the
    shape ``bench_stream.report`` reads, plus ``lags`` (seconds behind, after every step)."""
    stream = open_stream(eng, args)
    step, tracked, resolved, fed, lags = 0, {"update": [], "final": []}, [], [], []
    step_began: list[float] = []
    stream.on_request = lambda kind, req, span: tracked[kind].append(
        Tracked(req, span, time.perf_counter(), step, step_began[-1]))
    stream.on_final = lambda final: resolved.append((final.end, time.perf_counter(), step))
    block = max(1, int(args.block * SR))
    busy = 0.0
    started, pos, closed = time.perf_counter(), 0, False
    while not stream.finished:
        now = time.perf_counter()
        due = min(len(audio), int((now - started) * SR) // block * block)
        if due > pos:                             # the capture callback hands over what has arrived
            for at in range(pos, due, block):
                stream.feed(audio[at:min(due, at + block)])
            pos = due
            fed.append((pos, now, step))
        if pos >= len(audio) and not closed:
            stream.close()
            closed = True
            if queue is not None:
                queue.stop()
        elif queue is not None and not closed:
            queue.top_up()
        if eng.has_work():
            t = time.perf_counter()
            step_began.append(t)
            eng.step()
            busy += time.perf_counter() - t
            step += 1
            mark_finished(tracked["update"], step)
            lags.append(stream.lag_seconds)
        elif pos < len(audio):
            time.sleep(max(0.0, started + (pos + block) / SR - time.perf_counter()))
    wall = time.perf_counter() - started
    if stream.error:
        raise SystemExit(stream.error)
    return dict(wall=wall, steps=step, seconds=len(audio) / SR, updates=tracked["update"], busy=busy,
                finals=tracked["final"], resolved=resolved, fed=fed, committed=len(stream.committed), stream=stream,
                queue_done=queue.done if queue is not None else None, lags=lags)


def report_realtime(name: str, result: dict, interval: float) -> None:
    """What a user watching the captions would notice."""
    lags = result["lags"] or [0.0]
    updates = result["updates"]
    done = [t for t in updates if t.finished is not None and t.request.finish_reason != "cancelled"]
    walls = [t.finished - t.due for t in done]     # from the step that submitted it (bench_stream.Tracked)
    speech = sum(t.span[1] - t.span[0] for t in result["finals"]) / SR
    print(f"\n== {name}: {result['seconds'] / 60:.1f} min of stream in {result['wall']:.0f} s wall, {result['steps']} steps, "
          f"engine busy {result['busy'] / result['wall']:.0%} of the time")
    print(f"   queue clips finished meanwhile: {result['queue_done']}")
    print(f"   behind the audio (Stream.lag_seconds after each step): p50 {percentile(lags, 50):.2f} s, "
          f"p95 {percentile(lags, 95):.2f} s, max {max(lags):.2f} s")
    print(f"   updates: {len(updates)} run, {len(done)} finished; about {speech / interval:.0f} were due "
          f"(one per {interval:g} s of utterance audio); update wall time p50 {percentile(walls, 50):.3f} s, "
          f"p95 {percentile(walls, 95):.3f} s")
    behind = result["wall"] - result["seconds"]
    print(f"   after the audio ended, the last final was in {behind:.2f} s later")
