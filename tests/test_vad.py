"""Silero VAD wrapper: speech regions, chunk plans, streaming chunks, live utterances.

The audio is real espeak-ng speech with silences of known length spliced in
with numpy, so every cut can be checked against where the silences really are.
"""
from __future__ import annotations


import numpy as np
import pytest
from conftest import espeak_wav, read_trimmed, with_pauses

from engine.audio.vad import Chunk, SpeechDetector, chunk_audio, plan_chunks
from engine.audio.vad_stream import StreamingChunker, UtteranceTracker

SR = 16000
TOL = int(0.150 * SR)          # cuts must land within 150 ms of a silence
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Speech recognition runs locally on this computer.",
    "Every sentence is followed by a short pause.",
    "The weather today is sunny and warm.",
    "Please remember to save your work often.",
]


@pytest.fixture(scope="module")
def detector() -> SpeechDetector:
    return SpeechDetector.shared()


@pytest.fixture(scope="module")
def spoken(tmp_path_factory) -> list[np.ndarray]:
    """Each sentence as trimmed speech."""
    folder = tmp_path_factory.mktemp("vad")
    return [read_trimmed(espeak_wav(folder / f"s{i}.wav", text)) for i, text in enumerate(SENTENCES)]


@pytest.fixture(scope="module")
def sentences(spoken):
    """0.5 s of silence, then each sentence followed by 1.0-1.4 s of zeros; and the speech spans."""
    return with_pauses(spoken)


@pytest.fixture(scope="module")
def long_speech(spoken) -> np.ndarray:
    """About 20 s of speech with no pause long enough to end a region."""
    return np.concatenate(spoken * 2)


def _silences(spans, length):
    """The stretches between (and around) the speech spans."""
    edges = [0] + [x for span in spans for x in span] + [length]
    return [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]


def _in_silence(sample, spans, length) -> bool:
    """True when ``sample`` lies in a silence or within TOL of one."""
    return any(lo - TOL <= sample <= hi + TOL for lo, hi in _silences(spans, length))


def test_regions_follow_sentences(detector, sentences):
    audio, spans = sentences
    regions = detector.speech_regions(audio)
    assert len(regions) == len(spans)
    for (start, end), (s0, s1) in zip(regions, spans):
        assert s0 - TOL <= start <= s0 + TOL
        assert _in_silence(end, spans, len(audio)) and end >= s1 - TOL


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_regions_match_packaged_silero(detector, sentences):
    """The batched scoring path gives Silero's own probabilities and timestamps."""
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    audio, _ = sentences
    model = load_silero_vad()
    ref = [model(torch.from_numpy(audio[i:i + 512]), SR).item()
           for i in range(0, len(audio) - 511, 512)]
    assert np.abs(detector.probabilities(audio)[:len(ref)] - ref).max() < 1e-3
    stamps = get_speech_timestamps(torch.from_numpy(audio), model, min_silence_duration_ms=300,
                                   speech_pad_ms=100)
    assert detector.speech_regions(audio) == [(t["start"], t["end"]) for t in stamps]


@pytest.mark.parametrize("max_chunk_s", [4.0, 8.0])
def test_chunk_cuts_fall_in_silences(detector, sentences, max_chunk_s):
    audio, spans = sentences
    chunks = chunk_audio(audio, detector, max_chunk_s=max_chunk_s)
    assert len(chunks) >= 2
    for chunk in chunks:
        assert 0 < chunk.end - chunk.start <= max_chunk_s * SR
        assert _in_silence(chunk.start, spans, len(audio))
        assert _in_silence(chunk.end, spans, len(audio))
    for s0, s1 in spans:   # every sentence is inside one chunk
        assert any(c.start <= s0 and s1 - TOL <= c.end for c in chunks)


def test_silence_and_quiet_noise_give_no_chunks(detector):
    rng = np.random.default_rng(0)
    # Silero stayed below 0.1 even for white noise at std 0.3; 0.01 and 0.1 are checked here.
    for audio in (np.zeros(10 * SR, np.float32),
                  (0.01 * rng.standard_normal(10 * SR)).astype(np.float32),
                  (0.1 * rng.standard_normal(10 * SR)).astype(np.float32)):
        assert detector.speech_regions(audio) == []
        assert chunk_audio(audio, detector) == []
        streaming = StreamingChunker(detector)
        assert streaming.push(audio) == [] and streaming.finish() == []


def test_long_speech_is_cut_in_last_third(detector, long_speech):
    max_chunk_s = 8.0
    regions = detector.speech_regions(long_speech)
    assert len(regions) == 1 and regions[0][1] - regions[0][0] > max_chunk_s * SR
    chunks = chunk_audio(long_speech, detector, max_chunk_s=max_chunk_s)
    assert len(chunks) >= 2
    assert chunks[0].start == regions[0][0] and chunks[-1].end == regions[0][1]
    for a, b in zip(chunks, chunks[1:]):
        assert a.end == b.start
        assert 2 * max_chunk_s * SR // 3 <= a.end - a.start <= max_chunk_s * SR
    assert chunks[-1].end - chunks[-1].start <= max_chunk_s * SR


def test_plan_chunks_cuts_at_quietest_point():
    rng = np.random.default_rng(0)
    audio = (0.3 * rng.standard_normal(20 * SR)).astype(np.float32)
    audio[int(8.5 * SR):int(8.65 * SR)] *= 0.01          # a 150 ms dip inside the last third
    chunks = plan_chunks([(0, len(audio))], audio, max_chunk_s=10.0)
    assert abs(chunks[0].end - int(8.575 * SR)) <= int(0.05 * SR)
    assert plan_chunks([(0, 25 * SR)], None, max_chunk_s=10.0) == [
        Chunk(0, 10 * SR), Chunk(10 * SR, 20 * SR), Chunk(20 * SR, 25 * SR)]


def test_plan_chunks_merges_neighbours_and_splits_long_gaps():
    regions = [(0, SR), (2 * SR, 3 * SR), (10 * SR, 11 * SR)]
    assert plan_chunks(regions, max_chunk_s=30.0) == [Chunk(0, 3 * SR), Chunk(10 * SR, 11 * SR)]
    assert plan_chunks(regions, max_chunk_s=30.0, max_gap_s=10.0) == [Chunk(0, 11 * SR)]
    assert plan_chunks(regions, max_chunk_s=2.5) == [Chunk(0, SR), Chunk(2 * SR, 3 * SR),
                                                    Chunk(10 * SR, 11 * SR)]


def test_config_errors(detector):
    with pytest.raises(ValueError):
        plan_chunks([(0, SR)], max_chunk_s=0.5)
    with pytest.raises(ValueError):
        detector.speech_regions(np.zeros(SR, np.float32), threshold=1.5)
    with pytest.raises(ValueError):
        detector.speech_regions(np.zeros((2, SR), np.float32))
    with pytest.raises(ValueError):
        SpeechDetector(sample_rate=8000)
    assert SpeechDetector.shared() is SpeechDetector.shared()
    with pytest.raises(ValueError):
        UtteranceTracker(detector, max_utterance_s=0.0)


@pytest.mark.parametrize("max_chunk_s", [8.0, 30.0])
def test_streaming_matches_chunk_audio(detector, sentences, long_speech, max_chunk_s):
    audio = np.concatenate([sentences[0], long_speech, sentences[0], long_speech[:SR * 3]])
    expected = chunk_audio(audio, detector, max_chunk_s=max_chunk_s)
    rng = np.random.default_rng(int(max_chunk_s))
    chunker, got, pos, most = StreamingChunker(detector, max_chunk_s=max_chunk_s), [], 0, 0
    while pos < len(audio):
        size = int(rng.integers(1, 20000))
        got += chunker.push(audio[pos:pos + size])
        pos += size
        most = max(most, chunker.buffered_samples)
    got += chunker.finish()
    assert [chunk for chunk, _ in got] == expected
    for chunk, samples in got:
        np.testing.assert_array_equal(samples, audio[chunk.start:chunk.end])
    assert most <= (min(max_chunk_s, len(audio) / SR) + 4) * SR


def _feed(tracker, audio, seed=0):
    """Feed ``audio`` in random 0.1-0.5 s blocks; return all events."""
    rng, events, pos = np.random.default_rng(seed), [], 0
    while pos < len(audio):
        size = int(rng.integers(SR // 10, SR // 2))
        events += tracker.feed(audio[pos:pos + size])
        if events and events[-1][0] == "start":
            assert tracker.open_start == events[-1][1]
        pos += size
    return events


def test_utterance_tracker_one_start_and_end_per_sentence(detector, sentences):
    audio, spans = sentences
    tracker = UtteranceTracker(detector)
    events = _feed(tracker, audio)
    assert [e[0] for e in events] == ["start", "end"] * len(spans)
    for (start_ev, end_ev), (s0, s1) in zip(zip(events[::2], events[1::2]), spans):
        assert abs(start_ev[1] - s0) <= TOL and end_ev[1] == start_ev[1]
        # Silero reports the end ~70 ms late and the 100 ms pad is added on top.
        assert s1 - TOL <= end_ev[2] <= s1 + int(0.1 * SR) + TOL
    assert tracker.open_start is None


def test_a_pause_names_the_end_its_utterance_gets(detector, sentences):
    """While a pause goes on, ``pause`` gives the end the utterance's end event will give, and how
    long the pause has lasted; it is None while speech goes on and between utterances."""
    audio, spans = sentences
    tracker = UtteranceTracker(detector)
    promised, seen = [], []
    for i in range(0, len(audio), 800):                     # 50 ms blocks
        before = tracker.pause
        for event in tracker.feed(audio[i:i + 800]):
            if event[0] == "end":
                assert before is not None and before[0] == event[2]   # the end it named a block ago
                promised.append(before)
        seen.append(tracker.pause)
        if tracker.open_start is None:
            assert tracker.pause is None
    assert len(promised) == len(spans)
    assert any(p is not None and p[1] >= tracker.min_silence // 2 for p in seen)


def test_utterance_tracker_cuts_long_utterances(detector, long_speech):
    tracker = UtteranceTracker(detector, max_utterance_s=6.0)
    events = _feed(tracker, long_speech, seed=1)
    assert tracker.open_start is not None
    events += tracker.finish()          # the speech runs to the end of the stream
    assert events[-1][2] == len(long_speech) and tracker.open_start is None
    kinds = [e[0] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("cut") >= 2
    open_start = events[0][1]
    for event in events[1:]:
        assert event[1] == open_start
        if event[0] == "cut":
            assert 4 * SR <= event[2] - open_start <= 6 * SR
            open_start = event[2]
    tracker.reset()
    assert tracker.open_start is None and tracker.position == 0


def test_a_finished_chunker_frees_its_audio_without_waiting_for_the_garbage_collector(detector, long_speech):
    """A chunker and its planner once formed a reference cycle: each finished file's buffer
    waited for Python's rare full collection, and peak memory grew ~1 MB per queued 35 s file."""
    import gc
    import weakref

    chunker = StreamingChunker(detector, max_chunk_s=8.0)
    chunks = chunker.push(long_speech) + chunker.finish()
    assert chunks and chunker.buffered_samples == 0
    gone = weakref.ref(chunker)
    gc.disable()
    try:
        del chunker
        assert gone() is None, "the chunker outlived its last reference (a reference cycle)"
    finally:
        gc.enable()
