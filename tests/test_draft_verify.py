"""Verifying a draft (the tokens of an earlier pass) gives exactly greedy decoding, in fewer steps.

float32, tiny random checkpoint, espeak-ng speech. A request with a draft feeds the draft
after its last token, takes greedy's token after each position and keeps the prefix that
agrees; whatever the draft (right, wrong in the middle, empty, too long, with an end token),
the tokens must equal plain greedy decoding token for token.
"""
from __future__ import annotations

import wave

import numpy as np
import pytest
from conftest import espeak_wav

import engine

MAX_NEW = 24


def _read(path) -> np.ndarray:
    with wave.open(str(path)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("draft")
    texts = ["The quick brown fox jumps over the lazy dog.", "Every sentence is followed by a short pause."]
    return [_read(espeak_wav(folder / f"d{i}.wav", t)) for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def greedy(eng, clips):
    return eng.generate(clips, max_new_tokens=MAX_NEW)


def _run(eng, clip, draft, max_new_tokens=MAX_NEW, others=()):
    """Tokens and step count of one request with ``draft`` (beside ``others``, submitted with it)."""
    req = eng.make_request(clip, max_new_tokens=max_new_tokens)
    req.draft = list(draft)
    eng.add_request(req)
    extra = [eng.submit(c, max_new_tokens=max_new_tokens) for c in others]
    steps = 0
    while not (req.finished and all(r.finished for r in extra)):
        eng.step()
        steps += 1
    assert not req.error
    return req, steps, [r.token_ids for r in extra]


def _drafts(truth: list[int], eos: int) -> dict[str, list[int]]:
    wrong = list(truth)
    wrong[len(wrong) // 2] = (wrong[len(wrong) // 2] + 1) % 300   # the tiny vocabulary has 401 ids
    return {
        "right": list(truth),
        "wrong in the middle": wrong,
        "empty": [],
        "longer than the answer": list(truth) + [7, 8, 9, 10],
        "end token inside": truth[:5] + [eos] + truth[5:],
        "shifted by a token": truth[:3] + truth[4:],
        "unrelated": [5, 6, 7, 8, 9, 10, 11, 12],
    }


@pytest.mark.parametrize("name", list(_drafts([1] * 10, 0)))
def test_any_draft_gives_greedy_tokens(eng, clips, greedy, name):
    truth = greedy[0]
    draft = _drafts(truth, eng.config.eos_token_ids[0])[name]
    req, _, _ = _run(eng, clips[0], draft)
    assert req.token_ids == truth
    assert 0 <= req.draft_accepted <= req.draft_offered


def test_a_right_draft_takes_one_step(eng, clips, greedy):
    """The whole answer is verified in the prefill step (the prompt plus the draft)."""
    truth = greedy[0]
    req, steps, _ = _run(eng, clips[0], truth[:-1])
    assert req.token_ids == truth
    assert steps == 1
    assert req.draft_accepted == len(truth) - 1


def test_a_draft_ending_in_an_end_token_stops_there(eng, clips, greedy):
    """Cut the answer at an end token: greedy with a smaller cap is the reference."""
    truth = greedy[0]
    req, _, _ = _run(eng, clips[0], truth + [eng.config.eos_token_ids[0]], max_new_tokens=len(truth) - 3)
    assert req.token_ids == truth[:len(truth) - 3]


def test_verify_rows_share_steps_with_other_requests(eng, clips, greedy):
    """A verify row runs in the same mixed steps as plain prefill and decode rows of other clips."""
    truth = greedy[0]
    draft = list(truth)
    draft[6] = (draft[6] + 3) % 300           # rejected mid-way: decoding resumes, then verifies again
    kinds = []
    req = eng.make_request(clips[0], max_new_tokens=MAX_NEW)
    req.draft = draft
    other = eng.submit(clips[1], max_new_tokens=MAX_NEW)
    eng.add_request(req)
    while not (req.finished and other.finished):
        eng.step()
        kinds.append(eng.core.last_step_kinds)
    assert req.token_ids == truth
    assert other.token_ids == greedy[1]
    assert any("verify" in k and len(k) > 1 for k in kinds), kinds


def test_cache_is_free_after_verification(eng, clips, greedy):
    start = eng.cache.allocator.num_free
    _run(eng, clips[0], greedy[0] + [1, 2, 3])
    assert eng.cache.allocator.num_free == start
