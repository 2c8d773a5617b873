"""Train the small Qwen3-ASR test model (and a tiny Qwen3-ForcedAligner) that really hears.

Speech is synthesised with espeak-ng (several voices, speeds, pitches; sox room filters
and added noise) from a generated corpus of English sentences, cached outside the repo
(default ~/.cache/qwen3-asr-train). Both models use transformers' own classes in the
real ``-hf`` layout, so our engine and transformers load them.

    python tools/train_test_model.py data                       # synthesise + features (~5 min)
    python tools/train_test_model.py asr --minutes 45 --out tests/models/qwen3-asr-tiny [--resume]
    python tools/train_test_model.py aligner --minutes 20 --init tests/models/qwen3-asr-tiny \
        --out tests/models/forced-aligner-tiny [--resume]
    python tools/train_test_model.py eval --model tests/models/qwen3-asr-tiny \
        [--aligner tests/models/forced-aligner-tiny]

Held-out voices and sentences are never trained on (see ``HELDOUT_VOICES`` and
``heldout_sentences``); ``eval`` reports WER/CER on them through ``engine.load``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CACHE = Path(os.environ.get("QWEN3_ASR_TRAIN_CACHE", Path.home() / ".cache" / "qwen3-asr-train"))
SR = 16000

# ----------------------------------------------------------------------------- corpus

NAMES = ["Anna", "Tom", "Maria", "David", "Sarah", "John", "Emma", "Peter", "Lucy", "Mark", "Alice", "Paul",
         "Kate", "Sam", "Laura", "Ben", "Julia", "Mike", "Nina", "Jack"]
PEOPLE = ["man", "woman", "boy", "girl", "teacher", "doctor", "driver", "friend", "sister", "brother", "mother",
          "father", "child", "neighbour", "farmer", "student", "baker", "child", "captain", "king"]
PEOPLE_PL = ["children", "students", "people", "friends", "workers", "girls", "boys", "parents", "farmers",
             "players"]
THINGS = ["book", "car", "house", "door", "window", "table", "chair", "phone", "letter", "box", "bag", "key",
          "cup", "bottle", "picture", "song", "story", "ball", "bike", "boat", "train", "shirt", "hat", "coat",
          "computer", "garden", "map", "clock", "lamp", "apple", "cake", "bread", "ticket", "ring", "dog", "cat",
          "horse", "bird", "fish", "flower", "tree", "river", "road", "bridge", "shop", "room", "kitchen",
          "school", "city", "town", "village", "window", "camera", "radio", "record", "system", "machine"]
PLURALS = ["books", "cars", "houses", "apples", "chairs", "letters", "boxes", "keys", "cups", "pictures",
           "songs", "stories", "birds", "dogs", "cats", "flowers", "trees", "tickets", "eggs", "shoes",
           "windows", "bottles", "cakes", "horses", "rooms", "questions", "answers", "friends", "days", "hours"]
ADJ = ["red", "blue", "green", "yellow", "black", "white", "big", "small", "old", "new", "young", "long",
       "short", "warm", "cold", "hot", "happy", "sad", "quiet", "loud", "clean", "dirty", "fast", "slow",
       "heavy", "light", "dark", "bright", "nice", "strange", "simple", "busy", "empty", "full", "beautiful",
       "quick", "brown", "lazy", "local", "good", "bad", "tall", "soft", "hard", "early", "late", "open"]
STATE_ADJ = ["happy", "tired", "busy", "ready", "late", "hungry", "angry", "right", "wrong", "sick", "cold",
             "warm", "quiet", "sure", "free", "afraid", "early", "lucky", "careful", "kind"]
VERBS = [("see", "saw", "sees"), ("find", "found", "finds"), ("buy", "bought", "buys"), ("make", "made", "makes"),
         ("open", "opened", "opens"), ("close", "closed", "closes"), ("bring", "brought", "brings"),
         ("take", "took", "takes"), ("carry", "carried", "carries"), ("lose", "lost", "loses"),
         ("sell", "sold", "sells"), ("paint", "painted", "paints"), ("clean", "cleaned", "cleans"),
         ("want", "wanted", "wants"), ("need", "needed", "needs"), ("like", "liked", "likes"),
         ("watch", "watched", "watches"), ("fix", "fixed", "fixes"), ("move", "moved", "moves"),
         ("send", "sent", "sends"), ("give", "gave", "gives"), ("keep", "kept", "keeps"),
         ("hold", "held", "holds"), ("draw", "drew", "draws"), ("wash", "washed", "washes"),
         ("push", "pushed", "pushes"), ("pull", "pulled", "pulls"), ("visit", "visited", "visits"),
         ("cook", "cooked", "cooks"), ("read", "read", "reads"), ("write", "wrote", "writes"),
         ("love", "loved", "loves"), ("hear", "heard", "hears"), ("call", "called", "calls"),
         ("help", "helped", "helps"), ("follow", "followed", "follows"), ("count", "counted", "counts"),
         ("test", "tested", "tests"), ("build", "built", "builds"), ("break", "broke", "breaks")]
INTRANS = [("sleep", "slept"), ("run", "ran"), ("walk", "walked"), ("sing", "sang"), ("wait", "waited"),
           ("laugh", "laughed"), ("work", "worked"), ("swim", "swam"), ("dance", "danced"), ("smile", "smiled"),
           ("arrive", "arrived"), ("leave", "left"), ("jump", "jumped"), ("talk", "talked"), ("play", "played"),
           ("stay", "stayed"), ("cry", "cried"), ("listen", "listened"), ("rest", "rested"), ("start", "started")]
PLACES = ["in the kitchen", "at the station", "near the river", "on the table", "in the garden", "at school",
          "in the city", "at home", "on the bridge", "by the window", "in the park", "at the shop",
          "under the tree", "on the road", "in the village", "at the market", "behind the house",
          "in the room", "at the office", "on the boat", "in the car", "near the door", "at the beach",
          "in the morning light", "over the hill", "across the street", "next to the school"]
TIMES = ["yesterday", "today", "tomorrow", "this morning", "last night", "every day", "on Monday",
         "on Friday", "in the evening", "after lunch", "before dinner", "last week", "next year", "at noon",
         "on Sunday", "in the summer", "in winter", "this afternoon", "later", "right now", "every morning"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
           "twenty", "thirty", "a hundred", "many", "a few", "some", "several"]
GREETINGS = ["Hello", "Hi", "Good morning", "Good evening", "Good night", "Goodbye", "Welcome back",
             "Thank you", "Excuse me", "Sorry", "See you soon", "Good luck"]
SHORT = ["Yes, please.", "No, thank you.", "Of course.", "Not today.", "Come here.", "Wait for me!",
         "Look at this.", "Listen to me.", "Let us go.", "Sit down, please.", "That is right.",
         "I do not know.", "Where are you?", "What time is it?", "How are you?", "Very good.",
         "Stop the car!", "Open the door.", "Hello world.", "This is a test.", "Speech to text.",
         "Turn on the radio.", "Call me later.", "I am here.", "It is cold.", "Be careful!", "Why not?",
         "Say it again.", "Close the window.", "Not bad at all."]
ADVERBS = ["quickly", "slowly", "quietly", "again", "together", "carefully", "often", "never", "always",
           "already", "finally", "really", "almost", "soon", "well"]


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _np(rng, plural_ok=True):
    r = rng.random()
    if r < 0.18:
        return rng.choice(NAMES)
    if r < 0.5:
        return f"the {rng.choice(ADJ)} {rng.choice(THINGS)}" if rng.random() < 0.5 else f"the {rng.choice(THINGS)}"
    if r < 0.72:
        a = rng.choice(ADJ)
        return f"{'an' if a[0] in 'aeiou' else 'a'} {a} {rng.choice(THINGS)}"
    if r < 0.86 and plural_ok:
        return f"{rng.choice(NUMBERS)} {rng.choice(PLURALS)}"
    return f"{rng.choice(['my', 'your', 'his', 'her', 'our', 'their'])} {rng.choice(THINGS)}"


def _subj(rng):
    r = rng.random()
    if r < 0.35:
        return rng.choice(NAMES)
    if r < 0.6:
        return f"{rng.choice(['the', 'my', 'your', 'our', 'a'])} {rng.choice(PEOPLE)}"
    if r < 0.7:
        return f"the {rng.choice(ADJ)} {rng.choice(PEOPLE)}"
    return rng.choice(["I", "you", "we", "they", "he", "she"])


def sentence(rng: random.Random) -> str:
    """One varied English sentence with capitals and punctuation."""
    t = rng.randrange(24)
    v = rng.choice(VERBS)
    iv = rng.choice(INTRANS)
    if t == 0:
        s = f"{_cap(_subj(rng))} {v[1]} {_np(rng)} {rng.choice(PLACES)}."
    elif t == 1:
        s = f"{_cap(rng.choice(TIMES))}, {_subj(rng)} {v[1]} {_np(rng)}."
    elif t == 2:
        s = f"Did {_subj(rng)} {v[0]} {_np(rng)}?"
    elif t == 3:
        s = f"Where is {_np(rng, False)}?"
    elif t == 4:
        s = f"{rng.choice(NAMES)}, please {v[0]} {_np(rng)}."
    elif t == 5:
        s = f"I think {_subj(rng)} {v[1]} {_np(rng)} {rng.choice(TIMES)}."
    elif t == 6:
        s = f"{_cap(_subj(rng))} {rng.choice(['is', 'was'])} very {rng.choice(STATE_ADJ)}."
    elif t == 7:
        s = f"We will {v[0]} {_np(rng)} {rng.choice(TIMES)}."
    elif t == 8:
        s = f"The {rng.choice(THINGS)} is {rng.choice(ADJ)} and {rng.choice(ADJ)}."
    elif t == 9:
        s = f"There are {rng.choice(NUMBERS)} {rng.choice(PLURALS)} {rng.choice(PLACES)}."
    elif t == 10:
        s = f"Can you {v[0]} {_np(rng)}, please?"
    elif t == 11:
        s = f"Thank you for the {rng.choice(ADJ)} {rng.choice(THINGS)}!"
    elif t == 12:
        s = f"{rng.choice(GREETINGS)}, {rng.choice(NAMES)}."
    elif t == 13:
        s = rng.choice(SHORT)
    elif t == 14:
        s = f"{_cap(_subj(rng))} {v[1]} {_np(rng)}, but {_subj(rng)} {rng.choice(VERBS)[1]} {_np(rng)}."
    elif t == 15:
        s = f"It was {rng.choice(ADJ)} {rng.choice(TIMES)}."
    elif t == 16:
        s = f"How many {rng.choice(PLURALS)} do you have?"
    elif t == 17:
        s = f"My {rng.choice(THINGS)} is {rng.choice(ADJ)}."
    elif t == 18:
        s = f"{_cap(_subj(rng))} {iv[1]} {rng.choice(ADVERBS)} {rng.choice(PLACES)}."
    elif t == 19:
        s = f"{rng.choice(GREETINGS)}! {_cap(_subj(rng))} {iv[1]} {rng.choice(TIMES)}."
    elif t == 20:
        s = f"Why did {_subj(rng)} {iv[0]} {rng.choice(PLACES)}?"
    elif t == 21:
        s = f"This is a test of the {rng.choice(ADJ)} {rng.choice(THINGS)}."
    elif t == 22:
        s = f"{_cap(_subj(rng))} {rng.choice(ADVERBS)} {v[1]} {_np(rng)}."
    else:
        s = f"Please do not {iv[0]} {rng.choice(PLACES)}."
    s = re.sub(r"\bi\b", "I", s)
    return s[0].upper() + s[1:]


# The conftest fixture sentence: its words are in the vocabulary, the sentence itself is never trained on.
FIXTURE_SENTENCE = "Hello world. This is a test of local speech recognition."


def heldout_sentences(n: int = 120) -> list[str]:
    rng = random.Random(987654)
    out, seen = [], set()
    while len(out) < n:
        s = sentence(rng)
        if s not in seen and s not in SHORT:
            seen.add(s)
            out.append(s)
    return out


def training_sentences(n: int, seed: int = 1) -> list[str]:
    banned = set(heldout_sentences()) | {FIXTURE_SENTENCE}
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        s = sentence(rng)
        if s not in banned:
            out.append(s)
    return out


# ----------------------------------------------------------------------------- voices and synthesis

TRAIN_BASES = ["en", "en-us", "en-gb-x-rp", "en-gb-x-gbclan", "en-029"]
TRAIN_VARIANTS = ["", "+m1", "+m2", "+m3", "+m4", "+m6", "+f1", "+f3", "+f4", "+klatt", "+klatt3"]
# Never trained on: a variant and a base unseen in training.
HELDOUT_VOICES = ["en-us+f2", "en+m5", "en-gb-scotland+m3"]
SOX_EFFECTS = [[], [], ["highpass", "120"], ["lowpass", "3800"], ["reverb", "30", "50", "40"],
               ["reverb", "50", "50", "80", "100", "0"], ["equalizer", "1200", "1q", "+6"],
               ["highpass", "300", "lowpass", "3400"], ["bass", "+6"], ["treble", "-8"]]


def voice_params(rng: random.Random, heldout: bool = False) -> dict:
    """Random voice, speed, pitch, room filter and noise; 15% the plain default espeak-ng voice."""
    if not heldout and rng.random() < 0.15:
        return dict(voice="en", speed=175, pitch=50, effects=[], snr=None, gain=-3.0)
    voice = rng.choice(HELDOUT_VOICES) if heldout else rng.choice(TRAIN_BASES) + rng.choice(TRAIN_VARIANTS)
    return dict(voice=voice, speed=rng.randint(130, 200), pitch=rng.randint(25, 80),
                effects=rng.choice(SOX_EFFECTS), snr=rng.uniform(12, 35) if rng.random() < 0.45 else None,
                gain=-rng.uniform(1, 12))


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    white = rng.standard_normal(n).astype(np.float32)
    if rng.random() < 0.5:  # brown-ish noise
        white = np.cumsum(white)
        white -= np.convolve(white, np.ones(400) / 400, mode="same")
    return white / (np.std(white) + 1e-8)


def synth(text: str, p: dict, seed: int = 0, *, effects: bool = True) -> np.ndarray:
    """espeak-ng speech through sox (16 kHz mono, filter, level) plus noise: float32 samples."""
    cmd_e = ["espeak-ng", "-v", p["voice"], "-s", str(p["speed"]), "-p", str(p["pitch"]), "--stdout", text]
    wav = subprocess.run(cmd_e, capture_output=True, check=True).stdout
    fx = (p["effects"] if effects else []) + ["gain", "-n", f"{p['gain']:.1f}"]
    cmd_s = ["sox", "-R", "-t", "wav", "-", "-t", "raw", "-r", str(SR), "-c", "1", "-b", "16", "-e", "signed", "-"] + fx
    raw = subprocess.run(cmd_s, input=wav, capture_output=True, check=True).stdout
    x = np.frombuffer(raw, np.int16).astype(np.float32) / 32768.0
    if effects and p.get("snr") is not None and len(x):
        rng = np.random.default_rng(seed)
        power = float(np.mean(x ** 2)) + 1e-10
        x = x + _noise(rng, len(x)) * math.sqrt(power / 10 ** (p["snr"] / 10))
    return np.clip(x, -1, 1).astype(np.float32)


def write_wav(path: Path, x: np.ndarray) -> None:
    import wave
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes((np.clip(x, -1, 1) * 32767).astype(np.int16).tobytes())


# ----------------------------------------------------------------------------- features (as the engine)

def _hz_to_mel(hz):
    hz = np.asarray(hz, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    return np.where(hz >= min_log_hz, min_log_hz / f_sp + np.log(np.maximum(hz, 1e-10) / min_log_hz) / logstep,
                    hz / f_sp)


def _mel_to_hz(mel):
    mel = np.asarray(mel, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    return np.where(mel >= min_log_hz / f_sp, min_log_hz * np.exp(logstep * (mel - min_log_hz / f_sp)), f_sp * mel)


_FILTERS = None


def log_mel(x: np.ndarray) -> torch.Tensor:
    """Whisper-style 128-bin log-mel of one clip, as engine.features.log_mel and transformers'
    Qwen3ASRFeatureExtractor on a single clip: [128, max(n, 8000) // 160]."""
    global _FILTERS
    if _FILTERS is None:
        fft = np.linspace(0, SR // 2, 201)
        hz = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(8000.0), 130))
        diff, slopes = np.diff(hz), hz[None, :] - fft[:, None]
        f = np.maximum(0.0, np.minimum(-slopes[:, :-2] / diff[:-1], slopes[:, 2:] / diff[1:]))
        _FILTERS = torch.from_numpy((f * (2.0 / (hz[2:130] - hz[:128]))[None, :]).astype(np.float32))
    w = torch.as_tensor(np.asarray(x, dtype=np.float32))
    if w.numel() < 8000:
        w = torch.nn.functional.pad(w, (0, 8000 - w.numel()))
    st = torch.stft(w, 400, 160, window=torch.hann_window(400), return_complex=True)
    mel = _FILTERS.T @ (st[..., :-1].abs() ** 2)
    ls = torch.clamp(mel, min=1e-10).log10()
    ls = torch.maximum(ls, ls.max() - 8.0)
    return (ls + 4.0) / 4.0


def check_features() -> None:
    """Our features must equal what inference computes (transformers' extractor, single clip)."""
    from transformers import Qwen3ASRFeatureExtractor
    x = synth("Check the features.", dict(voice="en", speed=175, pitch=50, effects=[], snr=None, gain=-3))
    ours = log_mel(x)
    ref = Qwen3ASRFeatureExtractor()(x, sampling_rate=SR, return_tensors="pt")["input_features"][0]
    diff = (ref[:, :ours.shape[1]] - ours).abs().max().item()
    try:
        from engine.features import log_mel as engine_log_mel
        diff = max(diff, (engine_log_mel(x) - ours).abs().max().item())
    except ImportError:
        pass
    assert diff < 1e-4, f"features differ from the reference by {diff}"


# ----------------------------------------------------------------------------- tokenizer

PROMPT_BEFORE = "<|im_start|>system\n<|im_end|>\n<|im_start|>user\n<|audio_start|>"
PROMPT_AFTER = "<|audio_end|><|im_end|>\n<|im_start|>assistant\n"
ANSWER_PREFIX = "language English<asr_text>"


def build_tokenizer(vocab_size: int = 768, *, aligner: bool = False):
    """Byte-level BPE over the corpus, saved as a Qwen2 fast tokenizer like tests/checkpoints.py."""
    from checkpoints import bpe_tokenizer

    words = sorted({w for lst in (NAMES, PEOPLE, PEOPLE_PL, THINGS, PLURALS, ADJ, STATE_ADJ, ADVERBS, NUMBERS)
                    for w in lst} | {w for v in VERBS for w in v} | {w for v in INTRANS for w in v})
    text = training_sentences(20000, seed=12345) + [FIXTURE_SENTENCE] * 20 + words * 3 + [" ".join(words)]
    text += [" " + w for w in words] * 3 + ["language English<asr_text>", "language None<asr_text>", "system user assistant"] * 2000
    return bpe_tokenizer(text, vocab_size, aligner=aligner)


def audio_tokens(frames: int) -> int:
    """Encoder output length for ``frames`` mel frames (n_window 50: 13 tokens per 100 frames)."""
    full, tail = divmod(frames, 100)
    if tail == 0:
        return full * 13
    t = tail
    for _ in range(3):
        t = (t - 1) // 2 + 1
    return full * 13 + t


# ----------------------------------------------------------------------------- data preparation

def _worker_init():
    torch.set_num_threads(1)


def _pool(workers: int):
    """Worker processes started fresh (a forked torch process can deadlock in its thread pool)."""
    import multiprocessing
    return multiprocessing.get_context("spawn").Pool(workers, initializer=_worker_init)


def _split_on_silence(x: np.ndarray, n: int, min_gap: float = 1.0) -> list[np.ndarray] | None:
    """Cut a long recording at its ``n - 1`` longest silences (>= ``min_gap`` s); None if it has fewer."""
    f = 160
    m = len(x) // f
    e = np.sqrt(np.mean(x[:m * f].reshape(m, f) ** 2, axis=1) + 1e-12)
    quiet = e < e.max() * 0.003
    runs, start = [], None
    for i, q in enumerate(np.append(quiet, False)):
        if q and start is None:
            start = i
        elif not q and start is not None:
            if i - start >= min_gap * 100 and start > 0 and i < m:
                runs.append((start, i))
            start = None
    if len(runs) != n - 1:
        return None
    cuts = [0] + [(a + b) // 2 * f for a, b in runs] + [len(x)]
    return [x[cuts[k]:cuts[k + 1]] for k in range(n)]


def _pad_trim(x: np.ndarray, rng: random.Random) -> np.ndarray:
    """Speech with 50-300 ms of its own silence (or tail) kept at each end."""
    f = 160
    m = len(x) // f
    if m == 0:
        return x
    e = np.sqrt(np.mean(x[:m * f].reshape(m, f) ** 2, axis=1) + 1e-12)
    on = np.nonzero(e > e.max() * 0.003)[0]
    if not len(on):
        return x
    a = max(0, on[0] * f - int(SR * rng.uniform(0.05, 0.3)))
    b = min(len(x), (on[-1] + 1) * f + int(SR * rng.uniform(0.05, 0.3)))
    return x[a:b]


def synth_group(texts: list[str], p: dict, seed: int) -> list[np.ndarray]:
    """Many sentences in one espeak-ng + sox run (2 s SSML breaks between them), cut apart at the
    breaks: one process pair per group instead of per clip. Falls back to one run per sentence."""
    rng = random.Random(seed)
    ssml = "<speak>" + ' <break time="2000ms"/> '.join(texts) + "</speak>"
    clips = None
    if len(texts) > 1:
        cmd_e = ["espeak-ng", "-m", "-v", p["voice"], "-s", str(p["speed"]), "-p", str(p["pitch"]), "--stdout", ssml]
        wav = subprocess.run(cmd_e, capture_output=True, check=True).stdout
        cmd_s = (["sox", "-R", "-t", "wav", "-", "-t", "raw", "-r", str(SR), "-c", "1", "-b", "16", "-e", "signed", "-"]
                 + p["effects"] + ["gain", "-n", f"{p['gain']:.1f}"])
        raw = subprocess.run(cmd_s, input=wav, capture_output=True, check=True).stdout
        clips = _split_on_silence(np.frombuffer(raw, np.int16).astype(np.float32) / 32768.0, len(texts))
    if clips is None:
        clips = [synth(t, dict(p, snr=None)) for t in texts]
    out = []
    for k, x in enumerate(clips):
        x = _pad_trim(x, rng)
        if p.get("snr") is not None and len(x):
            nrng = np.random.default_rng(seed * 1000 + k)
            power = float(np.mean(x ** 2)) + 1e-10
            snr = p["snr"] + rng.uniform(-5, 5)
            x = x + _noise(nrng, len(x)) * math.sqrt(power / 10 ** (snr / 10))
        out.append(np.clip(x, -1, 1).astype(np.float32))
    return out


def _make_group(args):
    g, texts, p = args
    if p.get("silence"):
        rng = np.random.default_rng(g)
        xs = [(_noise(rng, int(SR * rng.uniform(0.5, 3))) * 10 ** (-rng.uniform(25, 50) / 20)).astype(np.float32)
              for _ in texts]
    else:
        xs = synth_group(texts, p, seed=g)
    return [dict(text=t, voice=p["voice"], feats=log_mel(x).to(torch.float16)) for t, x in zip(texts, xs)]


def prepare_asr(n_train: int, workers: int = 2, group: int = 20) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    check_features()
    out = CACHE / "asr_train.pt"
    if not out.exists():
        rng = random.Random(7)
        texts = training_sentences(n_train, seed=1)
        jobs = [(g, texts[k:k + group], voice_params(rng)) for g, k in enumerate(range(0, len(texts), group))]
        jobs += [(len(jobs) + k, [""] * group, dict(voice="silence", silence=True))
                 for k in range(max(1, n_train // group // 50))]
        t0, items = time.time(), []
        with _pool(workers) as pool:
            for k, res in enumerate(pool.imap_unordered(_make_group, jobs)):
                items.extend(res)
                if k % 20 == 0:
                    print(f"  {len(items)} clips, {time.time() - t0:.0f} s", flush=True)
        items.sort(key=lambda it: it["text"])
        torch.save(items, out)
        print(f"asr train: {len(items)} clips, {sum(it['feats'].shape[1] for it in items) / 100 / 3600:.2f} h, "
              f"{time.time() - t0:.0f} s", flush=True)
    # Held out: (a) held-out sentences with training voices, (b) held-out sentences with held-out voices.
    for name, heldout_voice in (("heldout_sentences", False), ("heldout_voices", True)):
        d = CACHE / name
        if d.exists():
            continue
        d.mkdir()
        rng = random.Random(99 if heldout_voice else 98)
        texts = heldout_sentences()[:60] if not heldout_voice else heldout_sentences()[60:]
        for g in range(0, len(texts), 10):
            p = voice_params(rng, heldout=heldout_voice)
            for k, x in enumerate(synth_group(texts[g:g + 10], p, seed=10_000 + g)):
                i = g + k
                write_wav(d / f"{i:03d}.wav", x)
                (d / f"{i:03d}.txt").write_text(texts[i] + "\n")
                (d / f"{i:03d}.json").write_text(json.dumps(p))


# ----------------------------------------------------------------------------- model

ASR_DIMS = dict(
    encoder=dict(d_model=192, encoder_layers=3, encoder_attention_heads=4, encoder_ffn_dim=768,
                 downsample_hidden_size=32, n_window=50, n_window_infer=800),
    text=dict(hidden_size=192, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              head_dim=48, intermediate_size=576, rope_theta=1_000_000.0),
)


def make_config(tokenizer, *, aligner: bool = False, num_labels: int = 0):
    from transformers import Qwen3ASRConfig
    ids = tokenizer.convert_tokens_to_ids
    text = dict(ASR_DIMS["text"])
    rope_theta = text.pop("rope_theta")
    text_config = dict(model_type="qwen3", vocab_size=len(tokenizer), max_position_embeddings=65536,
                       rms_norm_eps=1e-6, tie_word_embeddings=False,
                       rope_parameters={"rope_type": "default", "rope_theta": rope_theta}, **text)
    audio_config = dict(model_type="qwen3_asr_encoder", num_mel_bins=128, output_dim=text["hidden_size"],
                        **ASR_DIMS["encoder"])
    config = Qwen3ASRConfig(audio_config=audio_config, text_config=text_config,
                            audio_token_id=ids("<|audio_pad|>"), timestamp_token_id=ids("<timestamp>"),
                            pad_token_id=ids("<|endoftext|>"),
                            eos_token_id=[ids("<|endoftext|>"), ids("<|im_end|>")], tie_word_embeddings=False)
    if aligner:
        config.num_labels = num_labels
    return config


# Trained on clips of 1-5 short sentences, the model hears chunks up to about 12 s well and longer ones
# badly (it drops words and repeats sentences), so it declares 12 s as its automatic chunk length.
TINY_CHUNK_SECONDS = 12
TINY_CHUNK_WHY = ("Trained on clips of 1-5 short sentences: past about 12 s a chunk loses words and repeats "
                  "sentences (tests/bench/RESULTS.md, issue 32). Read by engine.pipelines.model_defaults.")


def save_hf(model, tokenizer, out_dir: Path, *, aligner: bool = False) -> None:
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRProcessor
    out_dir.mkdir(parents=True, exist_ok=True)
    if not aligner:
        model.generation_config.eos_token_id = model.config.eos_token_id
        model.generation_config.pad_token_id = model.config.pad_token_id
        model.generation_config.do_sample = False
        model.generation_config.max_new_tokens = 256
    model.save_pretrained(out_dir)
    if aligner:  # the timestamp unit the engine and transformers' processor assume (80 ms per class)
        cfg = json.loads((out_dir / "config.json").read_text())
        cfg["timestamp_segment_time"] = 80
        (out_dir / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    processor = Qwen3ASRProcessor(feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tokenizer,
                                  chat_template=tokenizer.chat_template)
    processor.save_pretrained(out_dir)
    if not aligner:  # the engine's automatic chunk length for this model (engine.pipelines.model_defaults)
        from engine.pipelines.model_defaults import write_transcription_defaults

        write_transcription_defaults(out_dir, max_chunk_seconds=TINY_CHUNK_SECONDS, comment=TINY_CHUNK_WHY)


def encode_batch(model, feats: list[torch.Tensor], ids: list[list[int]], pad_id: int, audio_id: int,
                 spec_aug: float = 0.0, gen: random.Random | None = None):
    """Hidden states of the decoder for a right-padded batch, plus the projected audio embeddings."""
    frames = [f.shape[1] for f in feats]
    T = int(math.ceil(max(frames) / 100) * 100)
    x = torch.zeros(len(feats), 128, T)
    mask = torch.zeros(len(feats), T, dtype=torch.long)
    for b, f in enumerate(feats):
        f = f.float()
        if spec_aug and gen is not None and gen.random() < spec_aug:
            f = f.clone()
            for _ in range(2):
                w = gen.randint(0, 14)
                s = gen.randint(0, 128 - w)
                f[s:s + w, :] = f.mean()
            for _ in range(2):
                w = gen.randint(0, min(15, f.shape[1] // 8))
                s = gen.randint(0, max(0, f.shape[1] - w))
                f[:, s:s + w] = f.mean()
        x[b, :, :f.shape[1]] = f
        mask[b, :f.shape[1]] = 1
    L = max(len(i) for i in ids)
    input_ids = torch.full((len(ids), L), pad_id, dtype=torch.long)
    attn = torch.zeros(len(ids), L, dtype=torch.long)
    for b, i in enumerate(ids):
        input_ids[b, :len(i)] = torch.tensor(i)
        attn[b, :len(i)] = 1
    inner = model.model
    audio = inner.get_audio_features(x, mask, return_dict=True).pooler_output
    emb = inner.get_input_embeddings()(input_ids)
    place = (input_ids == audio_id).unsqueeze(-1).expand_as(emb)
    emb = emb.masked_scatter(place, audio.to(emb.dtype))
    hidden = inner.language_model(inputs_embeds=emb, attention_mask=attn).last_hidden_state
    return hidden, audio, [audio_tokens(n) for n in frames]


def length_batches(lengths: list[int], idx: list[int], budget: int, max_bs: int, rng: random.Random):
    """Batches of similar-length items, about ``budget`` frames each (padded), shuffled."""
    idx = sorted(idx, key=lambda i: lengths[i] + rng.random() * 30)
    batches, cur = [], []
    for i in idx:
        if cur and (len(cur) + 1) * max(lengths[i], lengths[cur[0]]) > budget or len(cur) >= max_bs:
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def lr_at(progress: float, step: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.03 + 0.97 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


# ----------------------------------------------------------------------------- ASR training

def greedy(model, tokenizer, feats: torch.Tensor, max_new: int = 60) -> str:
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    audio_id = tokenizer.convert_tokens_to_ids("<|audio_pad|>")
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompt = (tokenizer.encode(PROMPT_BEFORE, add_special_tokens=False) + [audio_id] * audio_tokens(feats.shape[1])
              + tokenizer.encode(PROMPT_AFTER, add_special_tokens=False))
    out = []
    with torch.no_grad():
        for _ in range(max_new):
            hidden, _, _ = encode_batch(model, [feats], [prompt + out], pad_id, audio_id)
            nxt = int(model.lm_head(hidden[0, -1]).argmax())
            if nxt in (end, pad_id):
                break
            out.append(nxt)
    return tokenizer.decode(out)


def train_asr(args) -> None:
    from multi_sentence_clips import multi_sentence_clips, random_context
    from transformers import Qwen3ASRForConditionalGeneration
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    work = CACHE / "asr_run"
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(work / "tokenizer")
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    audio_id = tokenizer.convert_tokens_to_ids("<|audio_pad|>")
    end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    before = tokenizer.encode(PROMPT_BEFORE, add_special_tokens=False)
    after = tokenizer.encode(PROMPT_AFTER, add_special_tokens=False)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": [{"type": "audio"}]}, {"role": "assistant", "content": [{"type": "text", "text": ""}]}],
        tokenize=False, continue_final_message=True)
    assert rendered == PROMPT_BEFORE + "<|audio_pad|>" + PROMPT_AFTER, rendered

    data = torch.load(CACHE / "asr_train.pt")

    corpus = [d["text"] for d in data if d["text"]]
    ctx_rng = random.Random(4242)

    def make_item(d):
        text_ids = tokenizer.encode(d["text"], add_special_tokens=False) if d["text"] else []
        answer = tokenizer.encode("language None<asr_text>" if not d["text"] else ANSWER_PREFIX,
                                  add_special_tokens=False) + text_ids + [end_id]
        n_audio = audio_tokens(d["feats"].shape[1])
        head = before
        if args.context and ctx_rng.random() < args.context:
            # The system turn holds context (live captions send recent committed text): the model
            # must transcribe what it hears, not continue what it reads.
            head = tokenizer.encode(PROMPT_BEFORE.replace("system\n", "system\n" + random_context(corpus, ctx_rng), 1),
                                    add_special_tokens=False)
        return dict(feats=d["feats"], ids=head + [audio_id] * n_audio + after + answer,
                    n_answer=len(answer), ctc=text_ids, text=d["text"])

    singles = [make_item(d) for d in data]
    items = list(singles)
    print(f"{len(items)} training clips; vocab {len(tokenizer)}; mean answer tokens "
          f"{np.mean([it['n_answer'] for it in items]):.1f}", flush=True)
    lengths = [it["feats"].shape[1] for it in items]
    heldout = sorted((CACHE / "heldout_sentences").glob("*.wav"))[:4]
    probe = []
    for w in heldout:
        import wave
        with wave.open(str(w)) as f:
            x = np.frombuffer(f.readframes(f.getnframes()), np.int16).astype(np.float32) / 32768
        probe.append((log_mel(x), w.with_suffix(".txt").read_text().strip()))

    config = make_config(tokenizer)
    model = Qwen3ASRForConditionalGeneration(config)
    ctc_head = torch.nn.Linear(config.text_config.hidden_size, len(tokenizer) + 1)
    params = list(model.parameters()) + list(ctc_head.parameters())
    print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M", flush=True)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    step, elapsed, epoch = 0, 0.0, 0
    ckpt = work / "state.pt"
    if args.init_state:
        # Fine-tuning: the weights of an earlier run, a fresh optimizer and schedule.
        st = torch.load(args.init_state, weights_only=False)
        model.load_state_dict(st["model"])
        ctc_head.load_state_dict(st["ctc"])
        print(f"weights from {args.init_state} (step {st['step']})", flush=True)
    if args.resume and ckpt.exists():
        st = torch.load(ckpt, weights_only=False)
        model.load_state_dict(st["model"])
        ctc_head.load_state_dict(st["ctc"])
        opt.load_state_dict(st["opt"])
        step, elapsed, epoch = st["step"], st["elapsed"], st["epoch"]
        print(f"resumed at step {step}, {elapsed / 60:.1f} min", flush=True)
    budget = args.minutes * 60
    rng = random.Random(1000 + step)
    ctc_loss = torch.nn.CTCLoss(blank=len(tokenizer), zero_infinity=True)
    model.train()
    t_last, last_save, last_probe = time.time(), elapsed, elapsed
    hist = []
    while elapsed < budget:
        progress = elapsed / budget
        # Curriculum: short clips first, every clip from 30% of the budget on.
        if args.multi:
            # Fresh multi-sentence clips every epoch (joined cached features: see multi_sentence_clips).
            joined = multi_sentence_clips(data, int(args.multi * len(singles)), random.Random(epoch + step))
            items = singles + [make_item(d) for d in joined]
            lengths = [it["feats"].shape[1] for it in items]
        max_len = 250 + (max(lengths) - 250) * min(1.0, progress / 0.3)
        if args.init_state:
            max_len = max(lengths)
        pool = [i for i in range(len(items)) if lengths[i] <= max_len]
        batches = length_batches(lengths, pool, args.batch_frames, 64, rng)
        epoch += 1
        for batch in batches:
            if elapsed >= budget:
                break
            lr = lr_at(elapsed / budget, step, args.lr, args.warmup)
            for g in opt.param_groups:
                g["lr"] = lr
            its = [items[i] for i in batch]
            hidden, audio, n_audio = encode_batch(model, [it["feats"] for it in its], [it["ids"] for it in its],
                                                  pad_id, audio_id, spec_aug=0.5 if progress > 0.15 else 0.0, gen=rng)
            # Loss on the answer tokens only: the hidden state before each answer token predicts it.
            sel_h, sel_y = [], []
            for b, it in enumerate(its):
                n = len(it["ids"])
                sel_h.append(hidden[b, n - it["n_answer"] - 1:n - 1])
                sel_y.append(torch.tensor(it["ids"][n - it["n_answer"]:]))
            logits = model.lm_head(torch.cat(sel_h))
            ce = torch.nn.functional.cross_entropy(logits, torch.cat(sel_y), label_smoothing=0.05)
            # Auxiliary CTC on the projected audio (training only; the head is not saved).
            lp = ctc_head(audio).log_softmax(-1)
            seqs = torch.split(lp, n_audio)
            lp_pad = torch.nn.utils.rnn.pad_sequence(list(seqs))  # [T, B, V]
            tgt = [torch.tensor(it["ctc"], dtype=torch.long) for it in its]
            ctc = ctc_loss(lp_pad, torch.cat(tgt) if sum(len(t) for t in tgt) else torch.zeros(0, dtype=torch.long),
                           torch.tensor(n_audio), torch.tensor([len(t) for t in tgt]))
            loss = ce + args.ctc_weight * ctc
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            now = time.time()
            elapsed += now - t_last
            t_last = now
            hist.append((ce.item(), ctc.item(), len(batch)))
            if step % args.log_every == 0:
                h = hist[-args.log_every:]
                print(f"step {step} ep {epoch} {elapsed / 60:5.1f} min lr {lr:.2e} ce {np.mean([a for a, _, _ in h]):.3f} "
                      f"ctc {np.mean([c for _, c, _ in h]):.3f} bs {np.mean([n for _, _, n in h]):.1f} "
                      f"maxlen {max_len:.0f}", flush=True)
            if elapsed - last_save > 180 or elapsed >= budget:
                torch.save(dict(model=model.state_dict(), ctc=ctc_head.state_dict(), opt=opt.state_dict(),
                                step=step, elapsed=elapsed, epoch=epoch), ckpt)
                last_save = elapsed
            if elapsed - last_probe > args.probe_every * 60:
                model.eval()
                for f, ref in probe[:3]:
                    print(f"  REF {ref}\n  HYP {greedy(model, tokenizer, f)}", flush=True)
                model.train()
                last_probe = elapsed
                t_last = time.time()  # probing time is not training time
    model.eval()
    for f, ref in probe:
        print(f"  REF {ref}\n  HYP {greedy(model, tokenizer, f)}", flush=True)
    save_hf(model, tokenizer, Path(args.out))
    print(f"saved {args.out} after {step} steps, {elapsed / 60:.1f} min", flush=True)


# ----------------------------------------------------------------------------- aligner data and training

ALIGN_VOICES = [("en", 175, 50), ("en-us", 160, 45), ("en-us+f3", 170, 65), ("en+m3", 150, 40),
                ("en-gb-x-rp+f1", 185, 55), ("en-029+m1", 165, 50), ("en-gb-x-gbclan+f4", 140, 70),
                ("en+klatt", 190, 50)]
ALIGN_HELDOUT_VOICES = [("en-us+f2", 165, 60), ("en+m5", 175, 45)]


def words_of(text: str) -> list[str]:
    """The aligner's words: letters, digits and apostrophes, split at everything else (as split_words)."""
    return re.findall(r"[A-Za-z0-9']+", text)


def _trim(x: np.ndarray) -> np.ndarray:
    """Cut leading and trailing silence (5 ms frames below -40 dB of the peak)."""
    if not len(x):
        return x
    f = 80
    n = len(x) // f
    e = np.sqrt(np.mean(x[:n * f].reshape(n, f) ** 2, axis=1) + 1e-12)
    on = np.nonzero(e > e.max() * 0.01)[0]
    if not len(on):
        return x[:0]
    return x[on[0] * f:(on[-1] + 1) * f]


def _word_group(args):
    """Words spoken one by one by one voice: one espeak-ng run with breaks between the words,
    cut at the breaks and trimmed; per-word runs where the cut does not give one clip a word."""
    words, voice, speed, pitch = args
    p = dict(voice=voice, speed=speed, pitch=pitch, effects=[], snr=None, gain=-3.0)
    ssml = "<speak>" + ' <break time="700ms"/> '.join(words) + "</speak>"
    cmd_e = ["espeak-ng", "-m", "-v", voice, "-s", str(speed), "-p", str(pitch), "--stdout", ssml]
    wav = subprocess.run(cmd_e, capture_output=True, check=True).stdout
    cmd_s = ["sox", "-R", "-t", "wav", "-", "-t", "raw", "-r", str(SR), "-c", "1", "-b", "16", "-e", "signed", "-",
             "gain", "-n", "-3"]
    raw = subprocess.run(cmd_s, input=wav, capture_output=True, check=True).stdout
    clips = _split_on_silence(np.frombuffer(raw, np.int16).astype(np.float32) / 32768.0, len(words), min_gap=0.5)
    if clips is None:
        clips = [synth(w, p, effects=False) for w in words]
    return [(voice, w, _trim(c)) for w, c in zip(words, clips)]


def word_bank(voices) -> dict:
    """Every corpus word spoken alone by each voice, silence trimmed."""
    words = sorted({w for s in training_sentences(3000, seed=5) + heldout_sentences() + [FIXTURE_SENTENCE]
                    for w in words_of(s)})
    jobs = [(words[k:k + 40], v, s, p) for (v, s, p) in voices for k in range(0, len(words), 40)]
    with _pool(2) as pool:
        groups = pool.map(_word_group, jobs)
    return {(v, w): c for g in groups for v, w, c in g}


def joined_utterance(text: str, voice: str, bank: dict, rng: random.Random, noise: bool = True):
    """Words spoken one by one and joined with random gaps: samples and exact (start, end) ms per word."""
    parts, spans, pos = [], [], 0
    lead = int(SR * rng.uniform(0.1, 0.6))
    parts.append(np.zeros(lead, np.float32))
    pos += lead
    for w in words_of(text):
        clip = bank[(voice, w)]
        spans.append((pos * 1000 / SR, (pos + len(clip)) * 1000 / SR))
        parts.append(clip)
        pos += len(clip)
        gap = int(SR * rng.choice([rng.uniform(0.02, 0.12), rng.uniform(0.1, 0.5)]))
        parts.append(np.zeros(gap, np.float32))
        pos += gap
    x = np.concatenate(parts)
    if noise and rng.random() < 0.6:
        nrng = np.random.default_rng(rng.randrange(1 << 30))
        power = float(np.mean(x ** 2)) + 1e-10
        x = x + _noise(nrng, len(x)) * math.sqrt(power / 10 ** (rng.uniform(15, 40) / 10))
    return x.astype(np.float32), spans


def prepare_aligner() -> None:
    out = CACHE / "align_train.pt"
    if out.exists():
        return
    t0 = time.time()
    bank = word_bank(ALIGN_VOICES + ALIGN_HELDOUT_VOICES)
    rng = random.Random(3)
    items = []
    for text in training_sentences(3000, seed=5):
        voice = rng.choice(ALIGN_VOICES)[0]
        x, spans = joined_utterance(text, voice, bank, rng)
        items.append(dict(text=text, voice=voice, feats=log_mel(x).to(torch.float16), spans=spans))
    torch.save(items, out)
    for name, voices in (("align_heldout", ALIGN_VOICES), ("align_heldout_voices", ALIGN_HELDOUT_VOICES)):
        d = CACHE / name
        d.mkdir(exist_ok=True)
        rng = random.Random(4 if voices is ALIGN_VOICES else 5)
        for i, text in enumerate(heldout_sentences()[:40]):
            voice = rng.choice(voices)[0]
            x, spans = joined_utterance(text, voice, bank, rng)
            write_wav(d / f"{i:03d}.wav", x)
            (d / f"{i:03d}.txt").write_text(text + "\n")
            (d / f"{i:03d}.json").write_text(json.dumps(dict(voice=voice, words=words_of(text), spans_ms=spans)))
    print(f"aligner data: {len(items)} clips, {time.time() - t0:.0f} s", flush=True)


ALIGN_LABELS = 375  # 30 s of 80 ms classes


def train_aligner(args) -> None:
    from transformers import Qwen3ASRForTokenClassification
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    prepare_aligner()
    work = CACHE / "align_run"
    work.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(aligner=True)
    pad_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    audio_id = tokenizer.convert_tokens_to_ids("<|audio_pad|>")
    ts_id = tokenizer.convert_tokens_to_ids("<timestamp>")
    config = make_config(tokenizer, aligner=True, num_labels=ALIGN_LABELS)
    model = Qwen3ASRForTokenClassification(config)
    if args.init:
        from transformers import Qwen3ASRForConditionalGeneration
        src = Qwen3ASRForConditionalGeneration.from_pretrained(args.init)
        missing = model.model.load_state_dict(src.model.state_dict(), strict=False)
        print(f"initialised from {args.init}: {missing}", flush=True)
        del src
    data = torch.load(CACHE / "align_train.pt")

    def prompt(words, n_audio):
        content = [{"type": "audio"}] + [{"type": "text", "text": w} for w in words]
        text = tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False)
        before, after = text.split("<|audio_pad|>")
        return (tokenizer.encode(before, add_special_tokens=False) + [audio_id] * n_audio
                + tokenizer.encode(after, add_special_tokens=False))

    items = []
    for d in data:
        ids = prompt(words_of(d["text"]), audio_tokens(d["feats"].shape[1]))
        labels = [min(ALIGN_LABELS - 1, round(t / 80)) for span in d["spans"] for t in span]
        assert ids.count(ts_id) == len(labels), (d["text"], ids.count(ts_id), len(labels))
        items.append(dict(feats=d["feats"], ids=ids, labels=labels))
    lengths = [it["feats"].shape[1] for it in items]
    head_params = list(model.score.parameters())
    body = [p for n, p in model.named_parameters() if not n.startswith("score.")]
    opt = torch.optim.AdamW([{"params": body, "lr_scale": 0.5 if args.init else 1.0},
                             {"params": head_params, "lr_scale": 1.0}], lr=args.lr, betas=(0.9, 0.98),
                            weight_decay=0.01)
    step, elapsed = 0, 0.0
    ckpt = work / "state.pt"
    if args.resume and ckpt.exists():
        st = torch.load(ckpt, weights_only=False)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, elapsed = st["step"], st["elapsed"]
        print(f"resumed at step {step}, {elapsed / 60:.1f} min", flush=True)
    budget = args.minutes * 60
    rng = random.Random(2000 + step)
    model.train()
    t_last, last_save, hist = time.time(), elapsed, []
    while elapsed < budget:
        for batch in length_batches(lengths, list(range(len(items))), args.batch_frames, 64, rng):
            if elapsed >= budget:
                break
            lr = lr_at(elapsed / budget, step, args.lr, args.warmup)
            for g in opt.param_groups:
                g["lr"] = lr * g["lr_scale"]
            its = [items[i] for i in batch]
            hidden, _, _ = encode_batch(model, [it["feats"] for it in its], [it["ids"] for it in its],
                                        pad_id, audio_id, spec_aug=0.3, gen=rng)
            L = hidden.shape[1]
            ids = torch.tensor([it["ids"] + [pad_id] * (L - len(it["ids"])) for it in its])
            logits = model.score(hidden[ids == ts_id])
            y = torch.tensor([lab for it in its for lab in it["labels"]])
            # Cross-entropy plus a soft neighbour target: near misses cost less than far ones.
            logp = logits.log_softmax(-1)
            soft = torch.exp(-0.5 * ((torch.arange(ALIGN_LABELS)[None, :] - y[:, None]) / 1.0) ** 2)
            soft = soft / soft.sum(-1, keepdim=True)
            loss = -(soft * logp).sum(-1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            now = time.time()
            elapsed += now - t_last
            t_last = now
            err = (logits.argmax(-1) - y).abs().float().mul(80)
            hist.append((loss.item(), err.median().item()))
            if step % 25 == 0:
                h = hist[-25:]
                print(f"step {step} {elapsed / 60:5.1f} min lr {lr:.2e} loss {np.mean([a for a, _ in h]):.3f} "
                      f"median err {np.mean([b for _, b in h]):.0f} ms", flush=True)
            if elapsed - last_save > 180 or elapsed >= budget:
                torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), step=step, elapsed=elapsed), ckpt)
                last_save = elapsed
    model.eval()
    save_hf(model, tokenizer, Path(args.out), aligner=True)
    print(f"saved {args.out} after {step} steps, {elapsed / 60:.1f} min", flush=True)


# ----------------------------------------------------------------------------- evaluation

def evaluate(args) -> None:
    import engine
    sys.path.insert(0, str(ROOT / "tests" / "bench"))
    from wer import edit_distance, normalize
    torch.set_num_threads(args.threads)
    if args.model:
        eng = engine.load(args.model, device="cpu", dtype="float32")
        for name in ("heldout_sentences", "heldout_voices"):
            errs = words = cerrs = chars = 0
            for w in sorted((CACHE / name).glob("*.wav")):
                ref = normalize(w.with_suffix(".txt").read_text())
                hyp = normalize(eng.transcribe(str(w)).text)
                errs += edit_distance(ref.split(), hyp.split())
                words += len(ref.split())
                cerrs += edit_distance(list(ref), list(hyp))
                chars += len(ref)
                if args.verbose:
                    print(f"{w.name}: REF {ref} | HYP {hyp}")
            print(f"{name}: WER {100 * errs / words:.1f}%  CER {100 * cerrs / chars:.1f}%  ({words} words)", flush=True)
    if args.aligner:
        al = engine.load_aligner(args.aligner, device="cpu", dtype="float32")
        for name in ("align_heldout", "align_heldout_voices"):
            start_err, end_err = [], []
            for w in sorted((CACHE / name).glob("*.wav")):
                meta = json.loads(w.with_suffix(".json").read_text())
                got = al.align(str(w), w.with_suffix(".txt").read_text().strip(), language="English")
                assert [g.text for g in got] == meta["words"], ([g.text for g in got], meta["words"])
                for g, (s, e) in zip(got, meta["spans_ms"]):
                    start_err.append(abs(g.start * 1000 - s))
                    end_err.append(abs(g.end * 1000 - e))
            print(f"{name}: median |start error| {np.median(start_err):.0f} ms, median |end error| "
                  f"{np.median(end_err):.0f} ms, mean |start error| {np.mean(start_err):.0f} ms "
                  f"({len(start_err)} words)", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("--n-train", type=int, default=12000)
    d.add_argument("--aligner", action="store_true", help="also build the aligner data")
    for name, minutes, lr, frames, out in (("asr", 45, 2e-3, 6000, "tests/models/qwen3-asr-tiny"),
                                           ("aligner", 20, 1e-3, 6000, "tests/models/forced-aligner-tiny")):
        p = sub.add_parser(name)
        p.add_argument("--minutes", type=float, default=minutes)
        p.add_argument("--lr", type=float, default=lr)
        p.add_argument("--warmup", type=int, default=150)
        p.add_argument("--batch-frames", type=int, default=frames, help="padded mel frames per batch")
        p.add_argument("--out", default=out)
        p.add_argument("--resume", action="store_true")
        p.add_argument("--threads", type=int, default=2)
        if name == "asr":
            p.add_argument("--ctc-weight", type=float, default=0.3)
            p.add_argument("--log-every", type=int, default=25)
            p.add_argument("--probe-every", type=float, default=5.0, help="minutes between greedy samples")
            p.add_argument("--multi", type=float, default=0.0,
                           help="add this many multi-sentence clips per single clip, fresh every epoch")
            p.add_argument("--context", type=float, default=0.0,
                           help="share of clips whose system turn holds unrelated context text")
            p.add_argument("--init-state", default=None,
                           help="fine-tune: start from this run's state.pt weights with a fresh optimizer")
        else:
            p.add_argument("--init", default=None, help="start from this trained ASR checkpoint")
    e = sub.add_parser("eval")
    e.add_argument("--model")
    e.add_argument("--aligner")
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)
    if args.cmd == "data":
        prepare_asr(args.n_train)
        if args.aligner:
            prepare_aligner()
    elif args.cmd == "asr":
        train_asr(args)
    elif args.cmd == "aligner":
        train_aligner(args)
    else:
        evaluate(args)


if __name__ == "__main__":
    main()
