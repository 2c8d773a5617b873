"""Times a user can trust, on the trained test models and espeak-ng files whose sentence times are known.

Word timestamps never change the words (the same chunks are recognised with or without the aligner);
without the aligner, sentences sit on the speech the VAD heard and say their times are estimates; with
it, implausible alignments fall back to estimates with a note; subtitle cues keep their rules. All of
it with the defaults a user gets (no chunk option): the tiny model's folder declares its own chunk
length (transcription_defaults.json, 12 s), since it hears longer chunks badly.
"""
from __future__ import annotations

import json
import statistics
from types import SimpleNamespace

import pytest
from cue_rules import cue_rule_breaks
from known_times import known_times_recording, sentence_start_errors, zero_length_share
from real_speech import ALIGNER_DIR, ASR_DIR

import engine
from cli.main import main
from engine.text.cues import build_cues


@pytest.fixture(scope="module")
def known(tmp_path_factory):
    """About 36 s of one-sentence utterances by 5 voices with 0.5-2.5 s pauses: more than one
    30 s chunk, so chunking with and without the aligner would differ if it depended on it."""
    return known_times_recording(tmp_path_factory.mktemp("known"), 36.0, seed=3)


@pytest.fixture(scope="module")
def plain():
    return engine.load(ASR_DIR, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def timed():
    return engine.load(ASR_DIR, device="cpu", dtype="float32", aligner=ALIGNER_DIR)


# What the tiny model's folder declares (tests/models/qwen3-asr-tiny/transcription_defaults.json).
MODEL_CHUNK_S = 12.0


@pytest.fixture(scope="module")
def untimed_result(plain, known):
    return plain.transcribe(str(known.path))      # the defaults: no chunk length given


@pytest.fixture(scope="module")
def aligned_result(timed, known):
    return timed.transcribe(str(known.path), word_timestamps=True)


def test_the_defaults_are_the_models_chunk_length(plain, timed, known):
    assert plain.default_chunk_seconds == timed.default_chunk_seconds == MODEL_CHUNK_S
    assert known.times[-1][1] > 2 * MODEL_CHUNK_S       # several chunks, so the chunk length matters


def test_cli_text_is_the_same_with_and_without_the_aligner(known, tmp_path, capsys):
    outs = {}
    for name, extra in (("plain", []), ("aligned", ["--aligner", str(ALIGNER_DIR)])):
        out = tmp_path / name
        out.mkdir()
        capsys.readouterr()
        assert main(["transcribe", str(known.path), "--model", str(ASR_DIR), "--format", "txt,json",
                     "-o", str(out), *extra]) == 0
        first = next(line for line in capsys.readouterr().err.splitlines() if line.startswith("model "))
        assert first.endswith(f"; chunks up to {MODEL_CHUNK_S:g} s"), first
        outs[name] = (out / f"{known.path.stem}.txt").read_text(), json.loads(
            (out / f"{known.path.stem}.json").read_text())
    print("without --aligner:", outs["plain"][0])
    print("with --aligner:   ", outs["aligned"][0])
    assert outs["plain"][0] == outs["aligned"][0] and outs["plain"][0].strip()
    assert {s["timing"] for s in outs["plain"][1]["segments"]} == {"estimated"}
    assert all(s["timing"] in ("aligned", "estimated") for s in outs["aligned"][1]["segments"])
    # the CLI's estimated times meet the goal too
    segments = [SimpleNamespace(**s) for s in outs["plain"][1]["segments"]]
    errors = sentence_start_errors(known, segments)
    assert len(errors) >= len(known.sentences) // 2, (len(errors), len(known.sentences))
    assert statistics.median(errors) <= 0.3, sorted(errors)


def test_engine_text_is_the_same_with_and_without_the_aligner(untimed_result, aligned_result):
    assert untimed_result.text == aligned_result.text
    assert [s.text for s in untimed_result.segments] == [s.text for s in aligned_result.segments]


def test_estimated_sentence_times_follow_the_speech(untimed_result, known):
    segments = untimed_result.segments
    assert segments and all(s.timing == "estimated" and not s.words for s in segments)
    errors = sentence_start_errors(known, segments)
    assert len(errors) >= len(known.sentences) // 2, (len(errors), len(known.sentences))
    assert statistics.median(errors) <= 0.3, sorted(errors)
    # no sentence starts or ends in the middle of a known pause
    pauses = [(a[1] + 0.3, b[0] - 0.3) for a, b in zip(known.times, known.times[1:])]   # VAD pads 0.1 s
    for s in segments:
        for lo, hi in pauses:
            assert not lo < s.start < hi and not lo < s.end < hi, (s, lo, hi)


def test_aligned_times_are_checked_and_close(aligned_result, known):
    segments = aligned_result.segments
    zero, words = zero_length_share(segments)
    assert words and zero <= 0.05 * words, (zero, words)
    errors = sentence_start_errors(known, segments)
    assert statistics.median(errors) <= 0.2, sorted(errors)
    # every sentence left with estimated times is named by a note
    estimated = [s for s in segments if s.timing == "estimated"]
    notes = [n for n in aligned_result.notes if "could not be aligned" in n]
    assert bool(estimated) == bool(notes), (estimated, notes)
    assert all(s.words and s.start == s.words[0].start for s in segments if s.timing == "aligned")


@pytest.mark.parametrize("which", ["untimed_result", "aligned_result"])
def test_cues_of_real_transcripts_keep_the_rules(which, request):
    transcript = request.getfixturevalue(which)
    cues = build_cues(transcript)
    assert cues
    breaks = cue_rule_breaks(cues, duration=transcript.duration)
    assert not {k: v for k, v in breaks.items() if k != "short_no_room"}, breaks
    assert " ".join(c.text.replace("\n", " ") for c in cues) == transcript.text
