"""One bad call fails alone: every public call checks its arguments at the call, integer PCM
is scaled like soundfile reads it, and empty audio or a bytes path get a clear answer."""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import soundfile as sf

import engine
from engine.audio.samples import as_samples, pcm_to_float


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32", use_vad=False)


@pytest.fixture(scope="module")
def tone():
    t = np.arange(16000) / 16000.0
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


BAD_CALLS = [
    ("submit", dict(priority="high"), "priority"),
    ("submit", dict(priority=1.5), "priority"),
    ("submit", dict(language=3), "language"),
    ("submit", dict(language="klingon"), "language"),
    ("submit", dict(context=None), "context"),
    ("submit", dict(max_new_tokens=0), "max_new_tokens"),
    ("submit", dict(max_new_tokens="5"), "max_new_tokens"),
    ("submit_file", dict(priority="high"), "priority"),
    ("submit_file", dict(max_chunk_seconds=0), "max_chunk_seconds"),
    ("submit_file", dict(max_chunk_seconds=float("nan")), "max_chunk_seconds"),
    ("submit_file", dict(context=b"x"), "context"),
    ("submit_file", dict(word_timestamps="yes"), "word_timestamps"),
    ("transcribe", dict(max_chunk_seconds=-1), "max_chunk_seconds"),
    ("transcribe", dict(progress="bar"), "progress"),
    ("generate", dict(max_new_tokens=-3), "max_new_tokens"),
    ("generate", dict(language=["en"]), "language"),
    ("open_stream", dict(context=5), "context"),
    ("open_stream", dict(priority="high"), "priority"),
]


@pytest.mark.parametrize("method, kwargs, name", BAD_CALLS,
                         ids=[f"{m}-{n}-{i}" for i, (m, _, n) in enumerate(BAD_CALLS)])
def test_bad_argument_fails_at_the_call_naming_it(eng, tone, method, kwargs, name):
    call = getattr(eng, method)
    with pytest.raises(ValueError, match=name):
        call(**kwargs) if method == "open_stream" else call(tone, **kwargs)
    assert not eng.has_work()


def test_a_bad_submit_does_not_poison_later_steps(eng, tone):
    good = eng.submit(tone, max_new_tokens=4)
    with pytest.raises(ValueError, match="priority"):
        eng.submit(tone, priority="high")
    other = eng.submit(tone, max_new_tokens=4, priority=2)
    steps = 0
    while eng.has_work():
        eng.step()
        steps += 1
    assert good.error is None and other.error is None
    assert len(good.token_ids) >= 1 and len(other.token_ids) >= 1
    assert eng.generate([tone], max_new_tokens=3)   # the engine still serves new calls


def test_int16_audio_is_scaled_like_soundfile_reads_it(eng, tone, tmp_path):
    pcm = np.round(tone * 32767).astype(np.int16)
    path = tmp_path / "tone.wav"
    sf.write(str(path), pcm, 16000, subtype="PCM_16")
    from_file = sf.read(str(path), dtype="float32")[0]
    np.testing.assert_allclose(as_samples(pcm), from_file, atol=1e-7)
    assert eng.generate([pcm], max_new_tokens=4) == eng.generate([from_file], max_new_tokens=4)
    assert eng.transcribe(pcm).text == eng.transcribe(from_file).text


def test_other_integer_widths_and_unsigned_8_bit():
    np.testing.assert_allclose(pcm_to_float(np.array([0, 2**30, -2**31], np.int32)), [0, 0.5, -1])
    np.testing.assert_allclose(pcm_to_float(np.array([128, 255, 0], np.uint8)), [0, 127 / 128, -1])


def test_stream_feed_scales_int16(eng):
    stream = eng.open_stream()
    stream.feed(np.array([16384, -32768], np.int16))
    fed = stream._inbox[-1]
    np.testing.assert_allclose(fed, [0.5, -1.0])
    stream.cancel()
    while eng.has_work():
        eng.step()


def test_float_audio_far_outside_unit_range_warns():
    with pytest.warns(UserWarning, match="outside"):
        pcm_to_float(np.array([0.0, 3000.0, -200.0], np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pcm_to_float(np.array([0.0, 1.2, -1.0], np.float32))   # clipping overshoot is fine


def test_non_numeric_arrays_are_refused_clearly():
    with pytest.raises(ValueError, match="dtype"):
        pcm_to_float(np.array(["a", "b"]))
    with pytest.raises(ValueError, match="1-D"):
        pcm_to_float(np.zeros((2, 100), np.float32))


def test_generate_on_empty_audio_is_a_clear_error(eng):
    with pytest.raises(ValueError, match="empty"):
        eng.generate([np.zeros(0, np.float32)])
    with pytest.raises(ValueError, match="empty"):
        eng.generate(np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="audios"):
        eng.generate([])
    assert not eng.has_work()


def test_bytes_path_is_decoded_as_a_file_path(eng, tone, tmp_path):
    path = tmp_path / "tone.wav"
    sf.write(str(path), tone, 16000)
    by_str = eng.generate([str(path)], max_new_tokens=4)
    assert eng.generate([os.fsencode(path)], max_new_tokens=4) == by_str
    assert eng.generate(os.fsencode(path), max_new_tokens=4) == by_str
    assert eng.transcribe(os.fsencode(path)).text == eng.transcribe(str(path)).text


def test_a_file_truncated_while_read_finishes_with_a_note(eng, tmp_path, monkeypatch):
    import engine.audio.decode as decode

    path = tmp_path / "long.wav"
    t = np.arange(60 * 16000) / 16000
    sf.write(str(path), (0.2 * np.sin(2 * np.pi * 200 * t)).astype(np.float32), 16000, subtype="PCM_16")
    real = decode.stream_audio

    def cut_after_the_first_block(*args, **kwargs):   # the file's reader thread reads ahead of the steps
        for i, block in enumerate(real(*args, **kwargs)):
            yield block
            if i == 0:
                os.truncate(path, 44 + 2 * 16000 * 35)   # another program cuts the file to 35 s

    monkeypatch.setattr(decode, "stream_audio", cut_after_the_first_block)
    job = eng.submit_file(str(path))
    while not job.finished:
        eng.step()
    assert job.state == "done" and abs(job.duration - 35.0) < 0.1
    assert any("truncated" in note and "60.0 s" in note for note in job.transcript.notes)
