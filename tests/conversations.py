"""Synthetic conversations with known turns: espeak-ng voices taking turns, no overlap.

Each speaker keeps one espeak-ng voice (base and variant, pitch, speed); a turn is one or
more sentences from the test model's vocabulary (tools/train_test_model.py), 1-20 s long,
and turns are separated by 0.3-0.9 s of silence. Used by the speaker tests and by
tests/bench/bench_diarization.py; returns the samples, the reference turns and the text.
"""
from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SR = 16000
VOICES = [  # (espeak voice, pitch, speed): GE2E cosine between their mean voices 0.56-0.88
    ("en-us", 40, 165),       # (en-us vs en-gb+f2 measured 0.91, en-us vs en-gb-scotland 0.96:
    ("en-029+f4", 60, 150),   #  espeak's variants of one formant voice sound alike to it)
    ("en+klatt", 45, 170),
    ("en+m3", 30, 175),
]
SHORT = ["Yes, please.", "No, thank you.", "Of course.", "Not today.", "Come here.", "Good morning."]


@dataclass
class Conversation:
    samples: np.ndarray
    turns: list[tuple[str, float, float]]          # reference (speaker, start, end) per sentence
    lines: list[tuple[str, str]] = field(default_factory=list)   # (speaker, text) per turn

    @property
    def duration(self) -> float:
        return len(self.samples) / SR


def speak(text: str, voice: tuple[str, int, int]) -> np.ndarray:
    """espeak-ng speech at 16 kHz, float32, silence trimmed from both ends."""
    name, pitch, speed = voice
    wav = subprocess.run(["espeak-ng", "-v", name, "-p", str(pitch), "-s", str(speed), "--stdout", text],
                         capture_output=True, check=True).stdout
    raw = subprocess.run(["sox", "-R", "-t", "wav", "-", "-t", "raw", "-r", str(SR), "-c", "1", "-b", "16", "-e",
                          "signed", "-", "gain", "-n", "-3"], input=wav, capture_output=True, check=True).stdout
    x = np.frombuffer(raw, np.int16).astype(np.float32) / 32768.0
    loud = np.flatnonzero(np.abs(x) > 0.01)
    return x[loud[0]:loud[-1] + 1] if loud.size else x


def _sentences(rng: random.Random):
    sys.path.insert(0, str(ROOT / "tools"))
    from train_test_model import sentence

    while True:
        yield sentence(rng)


def make_conversation(num_speakers: int, minutes: float, seed: int = 0, *,
                      turn_range: tuple[float, float] = (1.0, 20.0)) -> Conversation:
    """A conversation of ``num_speakers`` voices lasting about ``minutes``."""
    rng = random.Random(seed)
    sentences = _sentences(rng)
    parts, turns, lines, t = [], [], [], 0.0
    last = None
    speaker = 0
    while t < minutes * 60:
        if len(lines) < num_speakers:          # everyone speaks once first, then at random
            speaker = len(lines)
        while num_speakers > 1 and speaker == last:
            speaker = rng.randrange(num_speakers)
        last = speaker
        voice = VOICES[speaker % len(VOICES)]
        target = rng.uniform(*turn_range)
        texts = [" ".join(rng.sample(SHORT, 2))] if target < 2.0 else []   # two short phrases: >= 1 s
        audio = [speak(texts[0], voice)] if texts else []
        while sum(len(a) for a in audio) / SR < target - 1.0 and not (texts and target < 2.0):
            texts.append(next(sentences))
            audio.append(np.zeros(int(SR * 0.25), np.float32))
            audio.append(speak(texts[-1], voice))
        if not audio[0].any():
            audio.pop(0)
        gap = np.zeros(int(SR * rng.uniform(0.3, 0.9)), np.float32)
        parts.append(gap)
        t += len(gap) / SR
        for a in audio:            # the reference holds each sentence's own speech
            if a.any():
                turns.append((f"spk{speaker + 1}", round(t, 3), round(t + len(a) / SR, 3)))
            parts.append(a)
            t += len(a) / SR
        lines.append((f"spk{speaker + 1}", " ".join(texts)))
    parts.append(np.zeros(int(SR * 0.5), np.float32))
    return Conversation(np.concatenate(parts), turns, lines)


def write_wav(path, samples: np.ndarray) -> None:
    import soundfile as sf

    sf.write(str(path), samples, SR, subtype="PCM_16")
