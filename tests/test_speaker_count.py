"""The automatic speaker count on synthetic conversations: four voices are four (the old
silhouette rule found two), and one voice is one."""
from __future__ import annotations

import pytest

from conversations import make_conversation
from der import der
from speaker_weights import ge2e_weights


@pytest.fixture(scope="module")
def embedder():
    from engine.pipelines.diarize import GE2EEmbedder

    return GE2EEmbedder(str(ge2e_weights()))


@pytest.mark.parametrize("voices, minutes, seed", [(4, 1.0, 401), (1, 0.5, 7)])
def test_auto_finds_the_number_of_voices(embedder, voices, minutes, seed):
    from engine.pipelines.diarize import Diarizer

    conv = make_conversation(voices, minutes, seed=seed)
    d = Diarizer(embedder)
    d.add(conv.samples)
    turns = d.finish(None)
    hyp = [(t.speaker, t.start, t.end) for t in turns]
    assert len({h[0] for h in hyp}) == voices
    assert der(conv.turns, hyp).der <= 0.10


def test_the_count_does_not_hang_on_the_last_bit_of_noise(embedder):
    """One-LSB dither (what sox adds when it writes 16-bit audio) never changes who is found."""
    import numpy as np

    from engine.pipelines.diarize import Diarizer

    conv = make_conversation(4, 1.0, seed=104)
    rng = np.random.default_rng(0)
    for _ in range(3):
        x = conv.samples + (rng.integers(-1, 2, conv.samples.shape) / 32768.0).astype(np.float32)
        d = Diarizer(embedder)
        d.add(x)
        assert len({t.speaker for t in d.finish(None)}) == 4
