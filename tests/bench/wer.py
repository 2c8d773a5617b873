"""Word and character error rates of our engine on a folder of audio with reference texts.

    python tests/bench/wer.py --model tests/models/qwen3-asr-tiny FOLDER [--aligner DIR]
        [--device cpu|cuda] [--dtype float32|bfloat16] [--quantize int8] [--language en] [--quiet]

References: ``name.txt`` beside each ``name.wav`` (any audio the engine reads: wav, flac, mp3, ...),
or LibriSpeech-style ``*.trans.txt`` files ("ID text" per line, audio ``ID.flac`` beside them).
Both sides are normalised the same way (``normalize``): lowercase, punctuation removed (apostrophes
inside words kept), whitespace collapsed. Prints per-file and total WER and CER (total = summed edits
over summed reference length).
"""
from __future__ import annotations

import argparse
import sys
import time
import unicodedata
from pathlib import Path

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".m4a", ".opus")


def normalize(text: str) -> str:
    """Lowercase, NFKC, drop punctuation and symbols (apostrophes inside words stay, curly ones
    made straight), collapse whitespace. ``"Hello, World!  It's"`` -> ``"hello world it's"``."""
    text = unicodedata.normalize("NFKC", text).lower().replace("\u2019", "'").replace("\u2018", "'")
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch == "'" or cat[0] in "LN" or cat[0] == "M":
            out.append(ch)
        else:
            out.append(" ")
    words = [w.strip("'") for w in "".join(out).split()]
    return " ".join(w for w in words if w)


def edit_distance(ref, hyp) -> int:
    """Levenshtein distance between two sequences (substitutions, insertions, deletions cost 1)."""
    ref, hyp = list(ref), list(hyp)
    if len(ref) < len(hyp):
        ref, hyp = hyp, ref
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


def error_counts(ref: str, hyp: str) -> tuple[int, int, int, int]:
    """(word edits, reference words, char edits, reference chars) after normalisation; characters
    are compared on the normalised text with its single spaces."""
    r, h = normalize(ref), normalize(hyp)
    return edit_distance(r.split(), h.split()), len(r.split()), edit_distance(r, h), len(r)


def rate(errors: int, total: int) -> float:
    """Errors per reference unit; an empty reference scores 0 if nothing was said, else 1."""
    if total == 0:
        return 0.0 if errors == 0 else 1.0
    return errors / total


def find_pairs(folder: Path) -> list[tuple[Path, str]]:
    """(audio file, reference text) pairs in ``folder`` (recursively), sorted by path."""
    pairs = {}
    for trans in folder.rglob("*.trans.txt"):
        for line in trans.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            utt, _, text = line.strip().partition(" ")
            audio = next((trans.parent / (utt + s) for s in AUDIO_SUFFIXES if (trans.parent / (utt + s)).is_file()),
                         None)
            if audio is not None:
                pairs[audio] = text
    for audio in folder.rglob("*"):
        if audio.suffix.lower() in AUDIO_SUFFIXES and audio not in pairs:
            txt = audio.with_suffix(".txt")
            if txt.is_file():
                pairs[audio] = txt.read_text(encoding="utf-8").strip()
    return sorted(pairs.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--model", required=True)
    ap.add_argument("--aligner", default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--quantize", default=None, help="passed to engine.load (e.g. int8) where it has the option")
    ap.add_argument("--language", default=None, help="force the language (e.g. en); default: detected")
    ap.add_argument("--quiet", action="store_true", help="totals only")
    args = ap.parse_args(argv)

    pairs = find_pairs(args.folder)
    if not pairs:
        print(f"no audio with reference texts in {args.folder}", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    import engine

    options = {} if args.quantize is None else {"quantize": args.quantize}
    try:
        eng = engine.load(args.model, device=args.device, dtype=args.dtype, aligner=args.aligner, **options)
    except TypeError as e:
        if "quantize" in str(e):
            print(f"this engine's load() takes no quantize option: {e}", file=sys.stderr)
            return 2
        raise
    totals = [0, 0, 0, 0]
    t0 = time.perf_counter()
    for audio, ref in pairs:
        hyp = eng.transcribe(str(audio), language=args.language).text
        counts = error_counts(ref, hyp)
        totals = [a + b for a, b in zip(totals, counts)]
        if not args.quiet:
            print(f"{audio.name}\tWER {100 * rate(counts[0], counts[1]):5.1f}%\tCER {100 * rate(counts[2], counts[3]):5.1f}%"
                  f"\tREF {normalize(ref)}\tHYP {normalize(hyp)}")
    print(f"TOTAL {len(pairs)} files, {totals[1]} words: WER {100 * rate(totals[0], totals[1]):.2f}%  "
          f"CER {100 * rate(totals[2], totals[3]):.2f}%  ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
