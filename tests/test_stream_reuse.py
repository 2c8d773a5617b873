"""A live stream's passes find the last pass's prompt prefix, encoder windows and tokens, exactly.

float32, tiny random checkpoint, espeak-ng speech: a pass that starts from the prefix cache gives
the logits of a full prefill; every update's tokens equal an offline pass over its audio; and the
cache blocks a stream's passes hold all come back when it closes or is cancelled. Reuse lives in
serving (the runner's encoder cache, the allocator's prefix cache): a pass is an ordinary request.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import espeak_wav
from conftest import read_trimmed as _read

import engine
from engine.network import platform
from engine.network.encoder import encode_audio
from engine.network.encoder_reuse import rows_round_alike
from engine.serving.scheduler import ScheduledRow

SR = 16000
CONTEXT = "Names: Qwen"


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def eng_alike(tiny_model_dir, eng):
    """An engine whose encoder cache is on: float32 where this CPU rounds encoder rows alike in
    any call, else bfloat16 where it is native (see test_encoder_cache)."""
    if rows_round_alike(eng.net) or not platform.current().native_bf16:
        return eng
    return engine.load(tiny_model_dir, device="cpu", dtype="bfloat16")


@pytest.fixture(scope="module")
def speech(tmp_path_factory) -> np.ndarray:
    """About 14 s of speech without a pause long enough to end an utterance."""
    folder = tmp_path_factory.mktemp("reuse")
    text = ("Speech recognition runs locally on this computer and every sentence is followed by a short "
            "pause while the weather today is sunny and warm")
    audio = _read(espeak_wav(folder / "long.wav", text))
    audio = np.concatenate([audio, audio])
    assert len(audio) > 10 * SR
    return audio


@pytest.fixture(scope="module")
def word(tmp_path_factory) -> np.ndarray:
    return _read(espeak_wav(tmp_path_factory.mktemp("word") / "yes.wav", "Yes, fine."))


def _last_logits(eng, request) -> torch.Tensor:
    """Prefill the rest of ``request``'s prompt in one row; the logits after its last prompt token."""
    assert eng.cache.allocator.grow(request.block_table, len(request.prompt_ids))
    row = ScheduledRow(request, request.num_cached, len(request.prompt_ids) - request.num_cached, True)
    eng.runner.encode_pending([row])
    hidden = eng.runner.hidden_states(eng.runner.step_inputs([row]))
    logits = eng.net.head(hidden[-1:])
    eng.cache.allocator.release(request.block_table)
    return logits


def _finished_pass(eng, audio: np.ndarray, context: str, max_new_tokens: int):
    """A pass over ``audio`` run to the end: its prompt's blocks stay in the prefix cache."""
    first = eng.make_request(audio, context=context, max_new_tokens=max_new_tokens)
    eng.add_request(first)
    eng.run_until_done([first])
    return first


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while a[n] == b[n]:
        n += 1
    return n


def test_a_pass_that_finds_its_prefix_cached_gives_full_prefill_logits(eng_alike, speech):
    eng = eng_alike
    free = eng.cache.allocator.num_free
    _finished_pass(eng, speech[:int(9.0 * SR)], CONTEXT, 4)

    audio = speech[:int(9.75 * SR)]
    shared = eng.make_request(audio, context=CONTEXT)
    eng.scheduler.start_from_cache(shared)
    # encoded on arrival from the encoder cache (its first window was there), so the system turn,
    # the context and the first 8 s window of audio come from the prefix cache
    assert shared.audio_embeds is not None
    assert shared.num_cached >= shared.audio_start + eng.config.encoder.window_tokens
    eng.runner.encoder_cache.clear()
    fresh = eng.make_request(audio, context=CONTEXT)
    features = fresh.features
    assert torch.equal(_last_logits(eng, shared), _last_logits(eng, fresh))
    assert torch.equal(shared.audio_embeds, encode_audio(eng.net, [features])[0])
    assert eng.cache.allocator.num_free == free


def test_a_changed_context_is_found_up_to_where_it_changes(eng, speech):
    first = _finished_pass(eng, speech[:3 * SR], CONTEXT, 2)
    other = eng.make_request(speech[:4 * SR], context="Something else entirely")
    eng.scheduler.start_from_cache(other)
    common = _common_prefix(first.prompt_ids, other.prompt_ids)
    assert other.num_cached == common < other.audio_start
    eng.cache.allocator.release(other.block_table)


def test_the_next_utterance_finds_the_context_but_never_writes_into_a_block_in_use(eng, speech):
    """A block another request holds is shared only when full; a prompt that parts from it inside
    (or ends inside it) starts on a block of its own there."""
    bs = eng.cache.allocator.block_size
    context = "Names: " + "Qwen Alice Bob " * 12          # a context longer than a block
    first = _finished_pass(eng, speech[:2 * SR], context, 2)
    final = eng.make_request(speech[:2 * SR + SR // 4], context=context, max_new_tokens=2)
    eng.scheduler.start_from_cache(final)         # the utterance's final: all of the prompt before the audio
    assert final.num_cached == first.audio_start and first.audio_start % bs
    same = eng.make_request(speech[3 * SR:5 * SR], context=context, max_new_tokens=2)
    eng.scheduler.start_from_cache(same)          # the next utterance, while the final holds the blocks
    assert same.num_cached == first.audio_start - first.audio_start % bs >= bs
    assert all(eng.cache.allocator.holders(b) == 2 for b in same.block_table)
    eng.cache.allocator.release(same.block_table)
    # A context that parts inside a full block the final holds: round down to the blocks before it.
    changed = context[:len(context) // 2] + "Zed"
    other = eng.make_request(speech[3 * SR:5 * SR], context=changed, max_new_tokens=2)
    common = _common_prefix(first.prompt_ids, other.prompt_ids)
    assert common % bs                            # the prompts part inside a block
    eng.scheduler.start_from_cache(other)
    assert other.num_cached == common - common % bs
    eng.cache.allocator.release(other.block_table)
    eng.cache.allocator.release(final.block_table)


def test_passes_equal_offline_while_finals_overlap_the_next_utterance(eng, word):
    """Finals of ended utterances still running when the next one's updates borrow the held
    context (and then rounded down to whole blocks), and committed text changing the context."""
    free = eng.cache.allocator.num_free
    gap = np.zeros(int(0.45 * SR), np.float32)     # short pauses, long finals: they overlap the next updates
    audio = np.concatenate([gap] + [x for _ in range(8) for x in (word, gap)])
    stream = eng.open_stream(context="Names: " + "Qwen Alice Bob " * 12, update_interval=0.25, min_silence_s=0.3,
                             recent_context_chars=40, max_new_tokens=5)
    passes = []

    def on_request(kind, req, span):
        final_running = any(k == "final" and not r.finished for k, r, *_ in passes)
        passes.append((kind, req, span, stream.pass_context, final_running))

    stream.on_request = on_request
    block = SR // 3     # a third of a second a step: the next utterance starts while the last final runs
    for pos in range(0, len(audio), block):
        stream.feed(audio[pos:pos + block])
        eng.step()
    stream.close()
    while not stream.finished:
        eng.step()
    assert stream.state == "done"
    done = [p for p in passes if p[1].finish_reason in ("stop", "length")]
    assert sum(kind == "final" for kind, *_ in done) >= 6
    for kind, req, (start, end), context, *_ in done:
        offline = eng.generate([audio[start:end]], context=context, max_new_tokens=5)[0]
        assert req.token_ids == offline, (kind, start / SR)
    # The first pass that ran of each next utterance (a short one's first update may be cancelled
    # unstarted, for the pass over the pause that ends it: Stream._maybe_update).
    finals = [i for i, p in enumerate(done) if p[0] == "final"]
    firsts = [done[i + 1] for i in finals[:-1] if i + 1 < len(done) and done[i + 1][0] == "update"]
    assert len(firsts) >= 6
    assert sum(p[1].prefix_cached > 0 for p in firsts) >= 3   # new utterances started from the cached context
    # ...also while the last utterance's final still ran (a block it holds is shared only whole, never
    # written into: test_prefix_cache.test_two_requests_share_a_prefix_and_each_holds_a_reference)
    assert [p for p in firsts if p[-1] and p[1].prefix_cached]
    assert eng.cache.allocator.num_free == free


def test_every_update_equals_an_offline_pass(eng, speech):
    """Updates of one long utterance (encoder windows, prefix and draft reused) and its final."""
    audio = np.concatenate([np.zeros(SR // 2, np.float32), speech, np.zeros(SR, np.float32)])
    encoder = eng.runner.encoder_cache
    chunks_reused, windows_reused, chunks_computed = encoder.chunks_reused, encoder.windows_reused, encoder.chunks_computed
    stream = eng.open_stream(context=CONTEXT, update_interval=0.75, recent_context_chars=0, max_new_tokens=12)
    requests = []
    stream.on_request = lambda kind, req, span: requests.append((kind, req, span))
    for pos in range(0, len(audio), SR // 4):
        stream.feed(audio[pos:pos + SR // 4])
        eng.step()
        eng.step()
    stream.close()
    while not stream.finished:
        eng.step()
    assert stream.state == "done"
    done = [(k, r, s) for k, r, s in requests if r.finish_reason in ("stop", "length")]
    assert sum(k == "update" for k, _, _ in done) >= 8
    for kind, req, (start, end) in done:
        offline = eng.generate([audio[start:end]], context=CONTEXT, max_new_tokens=12)[0]
        assert req.token_ids == offline, (kind, start / SR, end / SR)
    assert sum(r.prefix_cached for _, r, _ in done) > 0
    if rows_round_alike(eng.net):
        assert encoder.windows_reused > windows_reused and encoder.chunks_reused > chunks_reused
    else:   # this CPU rounds rows by their call (see encoder_reuse): every pass encoded fresh, still exact
        assert encoder.windows_reused == encoder.chunks_reused == 0 and encoder.chunks_computed > chunks_computed
    assert sum(r.draft_accepted for _, r, _ in done) > 0


def test_no_blocks_leak_over_a_hundred_utterances(eng, word):
    allocator = eng.cache.allocator
    free = allocator.num_free
    gap = np.zeros(int(0.8 * SR), np.float32)
    audio = np.concatenate([gap] + [x for _ in range(100) for x in (word, gap)])
    stream = eng.open_stream(context=CONTEXT, update_interval=0.25, max_new_tokens=4)
    finals = []
    stream.on_request = lambda kind, req, span: finals.append(req) if kind == "final" else None
    for pos in range(0, len(audio), SR // 4):
        stream.feed(audio[pos:pos + SR // 4])
        eng.step()
    stream.close()
    while not stream.finished:
        eng.step()
    assert len(finals) >= 90
    assert allocator.num_free == free

    cancelled = eng.open_stream(context=CONTEXT, update_interval=0.25, max_new_tokens=4)
    for pos in range(0, 6 * SR, SR // 4):
        cancelled.feed(audio[pos:pos + SR // 4])
        eng.step()
        if pos >= 2 * SR and allocator.num_free < free:
            break                                  # a pass holds blocks: cancel now
    assert allocator.num_free < free
    cancelled.cancel()
    eng.step()
    eng.step()
    assert cancelled.state == "cancelled"
    assert allocator.num_free == free


def test_lag_is_reported_and_updates_spaced_out_when_behind(eng, speech):
    """Audio arriving faster than updates finish: lag_seconds says so and the cadence widens."""
    audio = np.concatenate([np.zeros(SR // 2, np.float32), speech])
    stream = eng.open_stream(context=CONTEXT, update_interval=0.5, max_new_tokens=12)
    spans = []
    stream.on_request = lambda kind, req, span: spans.append(span) if kind == "update" else None
    lags = []
    for pos in range(0, len(audio), SR):      # a second of audio per step: the engine cannot keep up
        stream.feed(audio[pos:pos + SR])
        eng.step()
        lags.append(stream.lag_seconds)
    assert max(lags) > 2.0
    assert stream.update_seconds > 0.5
    gaps = [b[1] - a[1] for a, b in zip(spans, spans[1:]) if a[0] == b[0]]
    assert max(gaps) > SR
    stream.cancel()
    eng.step()
