"""Real speech for the end-to-end tests: espeak-ng sentences, long recordings with pauses, words
with known times, and WER. Sentences and voices come from the training script's held-out sets,
so the trained test model never heard them."""
from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from train_test_model import HELDOUT_VOICES, heldout_sentences  # noqa: E402
from wer import error_counts, rate  # noqa: E402

ASR_DIR = ROOT / "tests" / "models" / "qwen3-asr-tiny"
ALIGNER_DIR = ROOT / "tests" / "models" / "forced-aligner-tiny"
SR = 16000

__all__ = ["ASR_DIR", "ALIGNER_DIR", "HELDOUT_VOICES", "heldout_sentences", "speak", "long_recording",
           "words_with_known_times", "wer"]


def wer(refs: list[str], hyps: list[str]) -> float:
    """Word error rate over all pairs (normalised as tests/bench/wer.py does)."""
    errors = total = 0
    for ref, hyp in zip(refs, hyps):
        e, n, _, _ = error_counts(ref, hyp)
        errors, total = errors + e, total + n
    return rate(errors, total)


def speak(text: str, voice: str = "en", speed: int = 165) -> np.ndarray:
    """``text`` spoken by espeak-ng, 16 kHz mono float32, leading/trailing silence trimmed.

    sox dithers when it writes 16-bit samples after an effect, with a new random seed each run;
    ``-R`` fixes the seed, so the same text gives the same samples in every run (with random
    dither the 10-minute recording's WER moved by up to 1.3 points from run to run).
    """
    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", text],
                         capture_output=True, check=True).stdout
    raw = subprocess.run(["sox", "-R", "-t", "wav", "-", "-t", "raw", "-r", str(SR), "-c", "1", "-b", "16", "-e",
                          "signed", "-", "gain", "-n", "-3"], input=wav, capture_output=True, check=True).stdout
    x = np.frombuffer(raw, np.int16).astype(np.float32) / 32768.0
    loud = np.flatnonzero(np.abs(x) > 0.01)
    return x[loud[0]:loud[-1] + 1] if len(loud) else x


@dataclass
class Recording:
    path: Path                       # a 16 kHz WAV file of the whole recording
    samples: np.ndarray
    sentences: list[str]             # what is said, in order
    clips: list[np.ndarray]          # each sentence alone
    spans: list[tuple[int, int]]     # where each sentence sits in ``samples``


def long_recording(folder: Path, minutes: float, seed: int = 0) -> Recording:
    """Held-out sentences by held-out voices, with pauses of 0.4-2.5 s, until ``minutes`` long."""
    rng = random.Random(seed)
    texts = heldout_sentences()
    parts, clips, spans, sentences, pos = [np.zeros(SR // 2, np.float32)], [], [], [], SR // 2
    i = 0
    while pos < minutes * 60 * SR:
        text = texts[i % len(texts)]
        clip = speak(text, HELDOUT_VOICES[i % len(HELDOUT_VOICES)], speed=rng.randint(150, 185))
        gap = np.zeros(int(SR * rng.uniform(0.4, 2.5)), np.float32)
        parts += [clip, gap]
        clips.append(clip)
        spans.append((pos, pos + len(clip)))
        sentences.append(text)
        pos += len(clip) + len(gap)
        i += 1
    samples = np.concatenate(parts)
    path = folder / "recording.wav"
    sf.write(path, samples, SR, subtype="PCM_16")
    samples = sf.read(path, dtype="float32")[0]    # what the file holds (16-bit)
    return Recording(path, samples, sentences, clips, spans)


def words_with_known_times(text: str, seed: int = 0, voice: tuple = ("en-us+f2", 165, 60)):
    """``text``'s words spoken one by one (one espeak-ng run with breaks, cut at the breaks, as the
    aligner's training data) by a held-out voice, joined with random gaps: samples and
    [(word, start, end)] in seconds."""
    from train_test_model import _word_group, words_of

    rng = random.Random(seed)
    clips = _word_group((words_of(text), *voice))
    lead = int(SR * rng.uniform(0.1, 0.6))
    parts, truth, pos = [np.zeros(lead, np.float32)], [], lead
    for _, word, clip in clips:
        truth.append((word, pos / SR, (pos + len(clip)) / SR))
        gap = int(SR * rng.choice([rng.uniform(0.02, 0.12), rng.uniform(0.1, 0.5)]))
        parts += [clip, np.zeros(gap, np.float32)]
        pos += len(clip) + gap
    return np.concatenate(parts), truth
