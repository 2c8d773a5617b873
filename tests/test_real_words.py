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
MAX_HELDOUT_WER = 0.35      # shipped: 24.5% on held-out voices (tests/models/README.md)
MAX_ALIGN_MEDIAN_MS = 80
ALIGNER_HELDOUT_VOICES = [("en-us+f2", 165, 60), ("en+m5", 175, 45)]   # tools/train_test_model.py
# The test model (2.7 M parameters) still guesses more content words wrong when one chunk holds several
# sentences: the 10-minute recording gives 20.2% WER sentence by sentence, 20.6% through the CLI with 4 s
# chunks (earlier, with random sox dither: 21.3% with 5 s and 34.5% with 12 s; the real models take 30 s).
# So the CLI test cuts chunks of about one sentence: ~190 chunk joins in 10 minutes, forced cuts inside
# the longer sentences included, which is what it is about. The recording is the same in every run
# (real_speech.speak). Seeds 1-3 of it cost the test model 1.7-2.3 points through the CLI, mostly in
# chunks that hold a sentence and the first words of the next (seen on seed 2), where it guesses
# worse. Live utterances end at pauses, so the stream keeps a 12 s cap.
CHUNK_S = 4
LIVE_MAX_UTTERANCE_S = 12


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


def test_live_stream_commits_the_offline_text_once(asr, recording, per_sentence_wer):
    stream = asr.open_stream(language="English", max_utterance_s=LIVE_MAX_UTTERANCE_S)
    audio = recording.samples[: SR * 180]          # 3 minutes keep the test short
    updates = set()                                # the requests themselves: ids of freed ones recur
    stream.on_request = lambda kind, req, span: updates.add(req) if kind == "update" else None
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
    # Fed block by block with the engine keeping up, the last update often already covers an
    # utterance's end: it is the final pass (nothing computed again), still the offline pass over its audio.
    reused = [f for f in stream.finals if f.request in updates]
    assert len(reused) >= 5, len(reused)
    for final in reused:
        offline = asr.generate([audio[final.start:final.end]], language="English", context=final.context)[0]
        assert final.request.token_ids == offline


def test_aligner_puts_word_times_on_the_right_words():
    if not (ALIGNER_DIR / "model.safetensors").is_file():
        pytest.fail(f"the trained test aligner is missing: {ALIGNER_DIR}")
    from real_speech import words_with_known_times

    aligner = engine.load_aligner(ALIGNER_DIR, device="cpu", dtype="float32")
    errors = []
    for i, text in enumerate(heldout_sentences()[:40]):
        # The aligner's two held-out voices in turn, as its shipped figure (54 ms) was measured; alone,
        # en-us+f2 gives 95 ms (its starts come late) and en+m5 59 ms on 12 sentences (tests/models/
        # README.md). 40 sentences (268 words, 61 ms here) keep the median steady across machines.
        samples, truth = words_with_known_times(text, seed=i, voice=ALIGNER_HELDOUT_VOICES[i % 2])
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


def test_a_new_utterance_starts_from_the_last_language_prefix(asr):
    """Detected language: the first update of each later utterance is offered the last
    utterance's ``language English<asr_text>`` as its draft, accepts it, and still says
    exactly what an offline pass over its audio says."""
    gap = np.zeros(SR, np.float32)
    sentences = [speak(s, "en-us", 160) for s in heldout_sentences()[:3]]
    audio = np.concatenate([gap] + [x for s in sentences for x in (s, gap)])
    stream = asr.open_stream(update_interval=0.5, recent_context_chars=0)
    passes = []
    stream.on_request = lambda kind, req, span: passes.append((kind, req, span))
    for i in range(0, len(audio), SR // 4):
        stream.feed(audio[i:i + SR // 4])
        while asr.has_work():
            asr.step()
    stream.close()
    while not stream.finished:
        asr.step()
    marker = asr.tokenizer.convert_tokens_to_ids("<asr_text>")
    finals = [i for i, (kind, _, _) in enumerate(passes) if kind == "final"]
    assert len(finals) == 3, [k for k, _, _ in passes]
    firsts = [passes[i + 1] for i in finals[:-1] if passes[i + 1][0] == "update"]
    assert len(firsts) == 2
    for _, req, _ in firsts:
        assert req.draft and req.draft[-1] == marker and req.draft_accepted == len(req.draft)
    for kind, req, (start, end) in passes:
        if req.finish_reason in ("stop", "length"):
            assert req.token_ids == asr.generate([audio[start:end]])[0], (kind, start / SR)
    assert all(s.text for s in stream.committed)
