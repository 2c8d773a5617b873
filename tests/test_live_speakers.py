"""Live-caption speakers: each committed utterance of a stream gets a label that stays with its
voice across the session; an early wrong label is corrected and the correction is reported."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conversations import make_conversation
from speaker_weights import ge2e_weights

from engine.pipelines.live_speakers import LiveSpeakers, SpeakerChange
from engine.text.types import Segment

MODELS = Path(__file__).parent / "models"
SR = 16000


@pytest.fixture(scope="module")
def live_run():
    import engine

    conv = make_conversation(2, 0.45, seed=11, turn_range=(1.0, 6.0))
    eng = engine.load(MODELS / "qwen3-asr-tiny", device="cpu", dtype="float32")
    eng.speaker_model = str(ge2e_weights())
    stream = eng.open_stream(speakers=True, min_silence_s=0.3, word_timestamps=False)
    for pos in range(0, len(conv.samples), SR // 2):      # half a second at a time, as a microphone
        stream.feed(conv.samples[pos:pos + SR // 2])
        eng.step()
    stream.close()
    for _ in range(5000):
        if stream.finished:
            break
        eng.step()
    assert stream.state == "done", stream.error
    return conv, stream


def _reference_speaker(turns, seg):
    overlap = {}
    for spk, a, b in turns:
        overlap[spk] = overlap.get(spk, 0.0) + max(0.0, min(b, seg.end) - max(a, seg.start))
    return max(overlap, key=overlap.get)


def test_live_labels_follow_the_voice_across_a_session(live_run):
    conv, stream = live_run
    segs = stream.committed
    assert len(segs) >= 6 and all(s.speaker for s in segs)
    assert sorted({s.speaker for s in segs}) == ["S1", "S2"]
    pairs = [(_reference_speaker(conv.turns, s), s.speaker) for s in segs]
    agree = max(sum((r == "spk1") == (h == first) for r, h in pairs) for first in ("S1", "S2"))
    assert agree >= 0.8 * len(pairs), pairs   # an utterance holding a turn change has one label


class _Fixed:
    """An embedder returning a given vector per utterance (the first sample says which)."""

    def __init__(self, vectors):
        self.vectors = vectors

    def embed(self, samples, windows):
        return np.stack([self.vectors[int(samples[0])]] * len(windows))


def _unit(v):
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v)


def test_an_early_wrong_label_is_corrected_and_reported():
    a, b = _unit([1, 0, 0]), _unit([0, 1, 0])
    odd = _unit([1, 0.9, 0])                  # speaker a, but heard before a's clearer utterances
    live = LiveSpeakers(_Fixed({0: odd, 1: a, 2: b}), threshold=0.6)
    seen = []
    live.on_change = seen.append
    segments = []
    for which in (2, 0, 1, 1, 1, 2, 2):
        seg = Segment(len(segments), len(segments) + 1, "words")
        segments.append(seg)
        live.commit(len(segments) - 1, seg, live.embed(np.full(SR, which, np.float32)), 1.0)
    labels = [s.speaker for s in segments]
    assert labels == ["S1", "S2", "S2", "S2", "S2", "S1", "S1"]   # the odd one moved to a's speaker
    assert seen == live.changes == [SpeakerChange(1, "S1", "S2")]


def test_a_bad_threshold_is_refused():
    with pytest.raises(ValueError):
        LiveSpeakers(_Fixed({}), threshold=1.5)
