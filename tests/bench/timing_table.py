"""Sentence start errors, zero-length words and cue-rule breaks on espeak-ng files with known times.

Runs the engine found on PYTHONPATH (point it at another checkout to measure that one) over
recordings of one-sentence utterances by several voices joined with 0.5-2.5 s pauses, transcribed
without and with the shipped tiny aligner. Prints one Markdown table row per file.

    PYTHONPATH=$PWD python tests/bench/timing_table.py --minutes 1 5
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import engine  # noqa: E402  first: the helpers below put this repository on sys.path, and the engine
#                           measured must be the one PYTHONPATH names (another checkout for "before")
from engine.text.cues import build_cues  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))           # tests/ helpers
from known_times import known_times_recording, sentence_start_errors, zero_length_share  # noqa: E402
from real_speech import ALIGNER_DIR, ASR_DIR  # noqa: E402
from cue_rules import cue_rule_breaks  # noqa: E402


def _pct(errors, q):
    return float(np.percentile(errors, q)) if errors else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, nargs="+", default=[1.0, 5.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk", type=float, default=None, help="max_chunk_seconds (default: the engine's)")
    ap.add_argument("--grouping", default=None, help="sentence, run or run+retry: how the aligner's requests "
                    "group a chunk's sentences (engine.pipelines.sentence_alignment.GROUPING)")
    args = ap.parse_args()
    if args.grouping:
        from engine.pipelines import sentence_alignment

        sentence_alignment.GROUPING = args.grouping

    print(f"# engine from {Path(engine.__file__).resolve().parent.parent}", flush=True)
    plain = engine.load(ASR_DIR, device="cpu", dtype="float32")
    timed = engine.load(ASR_DIR, device="cpu", dtype="float32", aligner=ALIGNER_DIR)
    print("| file | sentences | same text | no aligner: median / p90 start error (s) | aligner: median / p90 "
          "(s) | zero-length words | estimated segments (aligner) | cue breaks no aligner / aligner |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for minutes in args.minutes:
            known = known_times_recording(Path(tmp), minutes * 60, seed=args.seed, name=f"k{minutes}.wav")
            t0 = time.monotonic()
            a = plain.transcribe(str(known.path), max_chunk_seconds=args.chunk)
            b = timed.transcribe(str(known.path), word_timestamps=True, max_chunk_seconds=args.chunk)
            ea, eb = sentence_start_errors(known, a.segments), sentence_start_errors(known, b.segments)
            zero, words = zero_length_share(b.segments)
            estimated = sum(1 for s in b.segments if getattr(s, "timing", "") == "estimated")
            breaks_a = cue_rule_breaks(build_cues(a), duration=a.duration)
            breaks_b = cue_rule_breaks(build_cues(b), duration=b.duration)
            # the engine's automatic length (an engine from before per-model defaults: always 30 s)
            auto = getattr(plain, "default_chunk_seconds", 30.0)
            chunk = f"{args.chunk:g} s chunks" if args.chunk else f"default chunks ({auto:g} s)"
            if args.grouping:
                chunk += f", {args.grouping}"
            print(f"| {minutes:g} min, 5 voices, {chunk} "
                  f"| {len(known.sentences)} (paired {len(ea)} / {len(eb)}) | {'yes' if a.text == b.text else 'NO'} "
                  f"| {_pct(ea, 50):.2f} / {_pct(ea, 90):.2f} | {_pct(eb, 50):.2f} / {_pct(eb, 90):.2f} "
                  f"| {zero}/{words} ({100 * zero / max(words, 1):.0f} %) | {estimated}/{len(b.segments)} segments "
                  f"| {sum(breaks_a.values())} {dict(breaks_a)} / {sum(breaks_b.values())} {dict(breaks_b)} |",
                  flush=True)
            print(f"#   {time.monotonic() - t0:.0f} s; notes: {b.notes}", flush=True)


if __name__ == "__main__":
    main()
