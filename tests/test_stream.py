"""Live streams on the tiny random checkpoint: committed text equals offline passes, bounded cost, priority.

The model's text is gibberish but deterministic, so a committed segment can be
checked token for token against ``Engine.generate`` on the same utterance audio
with the same context. The audio is espeak-ng speech with silences spliced in.
"""
from __future__ import annotations

import wave

import numpy as np
import pytest
from conftest import espeak_wav, read_trimmed, with_pauses

import engine
from engine.pipelines.live_stream import Stream, stable_prefix

SR = 16000
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Speech recognition runs locally on this computer.",
    "Every sentence is followed by a short pause.",
    "The weather today is sunny and warm.",
]
BASE_CONTEXT = "Names: Qwen"


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def spoken(tmp_path_factory) -> list[np.ndarray]:
    folder = tmp_path_factory.mktemp("stream")
    return [read_trimmed(espeak_wav(folder / f"s{i}.wav", text)) for i, text in enumerate(SENTENCES)]


@pytest.fixture(scope="module")
def sentences(spoken):
    """0.5 s of silence, then each sentence followed by ~1 s of silence; and the speech spans."""
    return with_pauses(spoken)


class Recorder:
    """Drives a stream through an engine and checks the invariants after every step."""

    def __init__(self, eng, stream: Stream):
        self.eng, self.stream = eng, stream
        self.requests: list[tuple[str, object, tuple[int, int], int]] = []   # kind, request, span, step
        self.steps = 0
        self.max_buffered = 0.0
        self._committed: list[tuple] = []
        self._texts: dict[int, str] = {}        # update id -> decoded text, once finished
        self._shown = -1                         # id of the newest update the tentative ends with
        stream.on_request = lambda kind, req, span: self.requests.append((kind, req, span, self.steps))

    def updates(self):
        return [(req, span, step) for kind, req, span, step in self.requests if kind == "update"]

    def step(self):
        self.eng.step()
        self.steps += 1
        self._check()

    def feed(self, audio, rng, block_s=(0.1, 0.3), steps_per_block=2):
        """Feed ``audio`` in random blocks, stepping the engine between them (faster than real time)."""
        pos = 0
        while pos < len(audio):
            size = int(rng.uniform(*block_s) * SR)
            self.stream.feed(audio[pos:pos + size])
            pos += size
            for _ in range(steps_per_block):
                self.step()

    def finish(self, limit=5000):
        self.stream.close()
        while not self.stream.finished:
            assert self.steps < limit, "the stream did not finish"
            self.step()
        assert self.stream.state == "done", self.stream.error

    def _check(self):
        st = self.stream
        now = [(s.start, s.end, s.text) for s in st.committed]
        assert now[:len(self._committed)] == self._committed, "committed text changed"
        self._committed = now
        self.max_buffered = max(self.max_buffered, st.buffered_seconds)
        for req, _, _ in self.updates():
            if req.finished and req.finish_reason != "cancelled" and req.id not in self._texts:
                self._texts[req.id] = self.eng.decode(req)[1]
        if st.tentative:
            # The tentative text ends with an update's text, never an older one than before.
            shown = [i for i, t in self._texts.items() if t and st.tentative.endswith(t)]
            if shown:
                assert max(shown) >= self._shown, "an older update replaced a newer one"
                self._shown = max(shown)
            assert shown or any(f.preview and f.preview in st.tentative for f in st._pending)
            assert st.stable_prefix in st.tentative


def _assert_offline_equal(eng, stream: Stream, audio: np.ndarray):
    """Every committed segment is exactly what an offline pass over its utterance gives."""
    assert len(stream.finals) == len(stream.committed)
    for seg, final in zip(stream.committed, stream.finals):
        assert (final.start / SR, final.end / SR) == (seg.start, seg.end)
        offline = eng.generate([audio[final.start:final.end]], language=stream.language,
                               context=final.context, max_new_tokens=stream.max_new_tokens)[0]
        assert offline == final.request.token_ids
        assert eng.decode(final.request)[1] == seg.text


def _assert_timeline(stream: Stream, duration: float):
    ends = 0.0
    for seg in stream.committed:
        assert ends <= seg.start < seg.end <= duration + 1e-9
        ends = seg.end


@pytest.mark.parametrize("steps_per_block", [1, 3])
def test_committed_segments_equal_offline_transcription(eng, sentences, steps_per_block):
    audio, spans = sentences
    stream = eng.open_stream(context=BASE_CONTEXT, update_interval=0.5)
    rec = Recorder(eng, stream)
    rec.feed(audio, np.random.default_rng(steps_per_block), steps_per_block=steps_per_block)
    rec.finish()
    assert len(stream.committed) == len(SENTENCES)
    _assert_timeline(stream, len(audio) / SR)
    for seg, (s0, s1) in zip(stream.committed, spans):
        assert seg.start <= s0 / SR + 0.15 and seg.end >= s1 / SR - 0.15
    _assert_offline_equal(eng, stream, audio)
    # Context: the base, then the tail of text committed before the final pass was submitted.
    texts = [s.text for s in stream.committed]
    assert stream.final_contexts[0] == BASE_CONTEXT
    for i, ctx in enumerate(stream.final_contexts):
        tail = ctx[len(BASE_CONTEXT) + 1:]
        assert ctx == BASE_CONTEXT or (ctx.startswith(BASE_CONTEXT + "\n") and len(tail) <= 200
                                       and any(" ".join(texts[:k]).endswith(tail) for k in range(1, i)))
    if steps_per_block > 1:   # at 1 step per block every final is submitted before the first one commits
        assert any(ctx != BASE_CONTEXT for ctx in stream.final_contexts)
    assert len(rec.updates()) >= 2 and stream.tentative == ""


@pytest.mark.parametrize("update_interval, steps_per_block", [(0.5, 8), (0.5, 3)])
def test_the_pass_over_a_pause_is_the_final_pass(eng, sentences, update_interval, steps_per_block):
    """Once a pause has lasted half of min_silence_s, an update runs over the utterance up to where
    the pause began (padded): if the pause goes on, that update is the final pass, finished (it
    commits at once) or still running (it is handed over), and no other pass is submitted."""
    audio, _ = sentences
    stream = eng.open_stream(context=BASE_CONTEXT, update_interval=update_interval, max_new_tokens=8)
    rec = Recorder(eng, stream)
    handed: list[tuple[bool, tuple[int, int]]] = []    # (finished when handed over, span) per final
    updates: dict[int, tuple[int, int]] = {}
    record = stream.on_request

    def on_request(kind, req, span):
        if kind == "update":
            updates[req.id] = span
        else:
            handed.append((req.finished, span) if req.id in updates else (None, span))
        record(kind, req, span)

    stream.on_request = on_request
    rec.feed(audio, np.random.default_rng(11), steps_per_block=steps_per_block)
    rec.finish()
    assert len(stream.committed) == len(SENTENCES)
    _assert_offline_equal(eng, stream, audio)         # each is exactly an offline pass over its own span
    assert all(was is not None for was, _ in handed), "a final pass was submitted besides the updates"
    # Many steps a block: the pass finished before the pause ended the utterance (it commits at
    # once); few: it was still running, and ran on as the final.
    assert all(was == (steps_per_block > 3) for was, _ in handed)
    for final, (_, span) in zip(stream.finals, handed):
        assert (final.start, final.end) == span


def test_update_cost_is_bounded_in_a_long_session(eng, spoken):
    # ~65 s of speech whose pauses (0.15 s) never end an utterance: the tracker must cut it.
    gap = np.zeros(int(0.15 * SR), np.float32)
    one = np.concatenate([x for s in spoken for x in (s, gap)])
    audio = np.concatenate([np.zeros(SR // 2, np.float32)] + [one] * int(np.ceil(65 * SR / len(one))))
    stream = eng.open_stream(max_new_tokens=6, max_utterance_s=20.0)
    rec = Recorder(eng, stream)
    rec.feed(audio, np.random.default_rng(5), block_s=(0.2, 0.3), steps_per_block=2)
    rec.finish()
    updates = rec.updates()
    longest = max(span[1] - span[0] for _, span, _ in updates) / SR
    assert len(updates) >= 30
    assert longest <= 20.0 + 0.6          # the cut bound plus the VAD's silence window
    late = [span[1] - span[0] for _, span, _ in updates if span[0] > 40 * SR]
    assert late and max(late) / SR <= 20.6
    assert len(stream.committed) >= 3      # cut at least twice
    assert all(seg.end - seg.start <= 20.6 for seg in stream.committed)
    assert rec.max_buffered <= 20.0 + 1.0  # never the whole session in memory
    _assert_timeline(stream, len(audio) / SR)


def test_updates_keep_their_interval_beside_a_file_queue(eng, spoken, sentences, tmp_path):
    audio, _ = sentences
    long_clip = np.concatenate(spoken * 3)
    # ignore_eos: exactly 400 tokens each, so the queue outlasts the stream. Without it the
    # repetition guard stops the random model's looping output after a few tokens.
    queue = [eng.submit(long_clip, max_new_tokens=400, ignore_eos=True),
             eng.submit(long_clip[::-1].copy(), max_new_tokens=400, ignore_eos=True)]
    wav = tmp_path / "queued.wav"
    with wave.open(str(wav), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(SR)
        w.writeframes((np.clip(audio, -1, 1) * 32767).astype(np.int16).tobytes())
    job = eng.submit_file(wav)
    stream = eng.open_stream(update_interval=0.75, max_new_tokens=6)
    rec = Recorder(eng, stream)
    # 0.25 s blocks, 3 steps each: an update is due every 9 steps and needs ~7 when it goes first.
    rec.feed(audio, np.random.default_rng(2), block_s=(0.25, 0.25), steps_per_block=3)
    rec.finish()
    assert not all(r.finished for r in queue), "the queue should still be running beside the stream"
    for kind, req, _, _ in rec.requests:
        assert req.first_token_step is not None and req.first_token_step - req.arrival_step <= 3, kind
    updates = rec.updates()
    assert len(updates) >= 8
    for (_, a, _), (_, b, _) in zip(updates, updates[1:]):
        if a[0] == b[0]:                   # same utterance: no update was skipped
            assert b[1] - a[1] <= 0.75 * SR + 0.25 * SR
    _assert_offline_equal(eng, stream, audio)
    eng.run_until_done(queue)
    while not job.finished:
        eng.step()
    assert all(not r.error for r in queue) and job.state == "done" and job.transcript.segments


def test_close_commits_the_open_utterance(eng, spoken):
    audio = np.concatenate([np.zeros(SR // 2, np.float32), spoken[0]])   # speech runs to the very end
    stream = eng.open_stream(max_new_tokens=12)
    rec = Recorder(eng, stream)
    rec.feed(audio, np.random.default_rng(3))
    assert not stream.committed and stream._open is not None
    rec.finish()
    assert len(stream.committed) == 1
    assert stream.committed[0].end == pytest.approx(len(audio) / SR, abs=0.15)
    _assert_offline_equal(eng, stream, audio)


def test_silence_commits_nothing(eng):
    rng = np.random.default_rng(4)
    audio = np.concatenate([np.zeros(3 * SR, np.float32), (0.01 * rng.standard_normal(3 * SR)).astype(np.float32)])
    stream = eng.open_stream()
    rec = Recorder(eng, stream)
    rec.feed(audio, rng, block_s=(0.3, 0.5), steps_per_block=1)
    rec.finish()
    assert stream.committed == [] and rec.requests == [] and stream.tentative == ""
    assert stream.buffered_seconds <= Stream.PRE_ROLL_S + 0.5


def test_word_times_with_an_aligner(tiny_model_dir, tiny_aligner_dir, sentences):
    audio, spans = sentences
    audio = audio[:spans[1][1] + SR]
    eng = engine.load(tiny_model_dir, device="cpu", aligner=tiny_aligner_dir)
    stream = eng.open_stream(language="en", max_new_tokens=10)
    rec = Recorder(eng, stream)
    rec.feed(audio, np.random.default_rng(6), block_s=(0.3, 0.3))
    rec.finish()
    assert stream.committed
    for seg in stream.committed:
        assert seg.words and all(seg.start <= w.start <= w.end <= seg.end for w in seg.words)


def test_cancel_stops_everything(eng, spoken):
    stream = eng.open_stream()
    rec = Recorder(eng, stream)
    rec.feed(np.concatenate([np.zeros(SR // 2, np.float32), spoken[1]]), np.random.default_rng(7))
    stream.cancel()
    eng.step()
    assert stream.state == "cancelled" and stream.finished and stream not in eng.jobs
    eng.step()
    assert all(req.finished for _, req, _, _ in rec.requests)


def test_bad_options_and_audio(eng):
    for options in (dict(update_interval=0), dict(update_interval=float("nan")), dict(max_utterance_s=0.5),
                    dict(recent_context_chars=-1), dict(language="klingon"), dict(max_new_tokens=0)):
        with pytest.raises(ValueError):
            eng.open_stream(**options)
    stream = eng.open_stream()
    with pytest.raises(ValueError):
        stream.feed(np.zeros((2, 100), np.float32))
    with pytest.raises(ValueError):
        stream.feed(np.array([0.0, np.nan], np.float32))
    stream.close()
    with pytest.raises(RuntimeError):
        stream.feed(np.zeros(100, np.float32))
    eng.step()
    assert stream.state == "done" and stream not in eng.jobs


def test_stable_prefix_keeps_whole_words():
    assert stable_prefix("", "hello world") == ""
    assert stable_prefix("hello world", "hello worlds") == "hello"
    assert stable_prefix("hello world x", "hello world y") == "hello world"
    assert stable_prefix("你好世界", "你好世") == "你好世"
    assert stable_prefix("same text", "same text") == "same text"
