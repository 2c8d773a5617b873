"""Repetition guard (issue 16): a model that loops stops early with one copy kept and a note;
ordinary requests, benchmarks (ignore_eos) and raw scheduler requests are untouched."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine.serving.repetition import cut_repetition, repeated_tail, repeats_needed
from engine.serving.runner import ModelRunner

LOOP = [101, 102, 103]   # the unit a looping model repeats


def test_loops_are_found_and_cut_to_one_copy():
    tokens = [5, 6, 7] + LOOP * 12
    assert cut_repetition(tokens) == (3, 12)
    assert tokens == [5, 6, 7] + LOOP
    single = [1, 2] + [9] * repeats_needed(1)
    assert cut_repetition(single) == (1, repeats_needed(1)) and single == [1, 2, 9]


def test_where_the_loop_is_noticed_does_not_change_what_is_kept():
    """Steps may add several tokens at once (draft verification): the kept copy is the same."""
    base = [5, 6] + LOOP * 20
    kept = set()
    for extra in range(len(LOOP)):
        tokens = base[:len(base) - extra]
        cut_repetition(tokens)
        kept.add(tuple(tokens))
    assert kept == {tuple([5, 6] + LOOP)}


@pytest.mark.parametrize("tokens", [
    list(range(200)),                               # no repeats
    [1, 2, 3] * (repeats_needed(3) - 1),            # a phrase said a few times
    [7] * (repeats_needed(1) - 1),                  # one word many times, under the bar
    ([4, 5] * 3 + [6, 7, 8, 9]) * 6,                # a refrain with verses between
])
def test_ordinary_text_is_not_a_loop(tokens):
    assert repeated_tail(tokens) is None


@pytest.fixture
def looping(monkeypatch):
    """Every sampled ASR token comes from LOOP in turn, as a model stuck in a loop would."""
    real = ModelRunner.run

    def run(self, rows):
        out = real(self, rows)
        for row in rows:
            if row.request.score_token_id is None and row.request.id in out:
                n = len(row.request.token_ids)
                value = out[row.request.id]
                count = len(value) if isinstance(value, list) else 1
                fake = [LOOP[(n + i) % len(LOOP)] for i in range(count)]
                out[row.request.id] = fake if isinstance(value, list) else fake[0]
        return out
    monkeypatch.setattr(ModelRunner, "run", run)


def test_looping_request_stops_early_with_one_copy(tiny_model_dir, looping):
    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    audio = np.random.default_rng(0).standard_normal(16000 * 4).astype(np.float32) * 0.1
    req = eng.submit(audio)
    eng.run_until_done([req])
    assert req.finish_reason == "repetition"
    assert req.token_ids == LOOP
    bench = eng.submit(audio, max_new_tokens=60, ignore_eos=True)   # benchmarks need exact lengths
    eng.run_until_done([bench])
    assert bench.finish_reason == "length" and len(bench.token_ids) == 60
    plain = eng.submit(audio, max_new_tokens=20, repetition_guard=False)   # exact greedy parity, loops and all
    eng.run_until_done([plain])
    assert plain.finish_reason == "length" and len(plain.token_ids) == 20
    assert len(eng.generate([audio], max_new_tokens=20, repetition_guard=False)[0]) == 20
    with pytest.raises(ValueError, match="repetition_guard"):
        eng.submit(audio, repetition_guard="no")


def test_transcript_and_cli_say_the_model_repeated_itself(tiny_model_dir, speech_wav, tmp_path, looping, capsys):
    from cli.main import main

    eng = engine.load(tiny_model_dir, device="cpu", dtype="float32")
    t = eng.transcribe(speech_wav, language="en")
    assert any("repeating itself" in n for n in t.notes), t.notes
    wav = tmp_path / "loop.wav"
    wav.write_bytes(speech_wav.read_bytes())
    assert main(["transcribe", str(wav), "--model", str(tiny_model_dir), "--device", "cpu", "--format", "json",
                 "--quiet"]) == 0
    assert "repeating itself" in capsys.readouterr().err
    assert "repeating itself" in (tmp_path / "loop.json").read_text()
