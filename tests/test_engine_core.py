"""The closed core pushes each output to its request's owner; Engine holds a core and a job layer;
one EngineConfig carries every knob, and the old keyword arguments still build it."""
from __future__ import annotations

import numpy as np
import pytest

import engine
from engine import EngineConfig, StreamDefaults
from engine.pipelines.port import PORT_MEMBERS, EnginePort
from engine.serving.core import EngineCore


def clip(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(seconds * 16000))).astype(np.float32)


@pytest.fixture(scope="module")
def eng(tiny_model_dir):
    return engine.load(tiny_model_dir, config=EngineConfig(device="cpu", dtype="float32", max_prefill_rows=2,
                                                           stream=StreamDefaults(priority=7)))


def test_outputs_go_to_their_owner_and_the_core_forgets_finished_requests(eng):
    seen: dict[int, list] = {}
    requests = [eng.make_request(clip(s, i), max_new_tokens=6) for i, s in enumerate([0.5, 1.5, 2.5])]
    for req in requests:
        eng.add_request(req, lambda out, i=req.id: seen.setdefault(i, []).append(out))
    while eng.has_work():
        eng.step()
    for req in requests:
        outs = seen[req.id]
        assert [o.finished for o in outs] == [False] * (len(outs) - 1) + [True]     # the last one says finished
        assert sum((o.new_token_ids for o in outs), []) == req.token_ids            # every token, once, in order
    assert eng.core.open_requests == 0


def test_an_aborted_request_tells_its_owner_once(eng):
    seen = []
    req = eng.add_request(eng.make_request(clip(2.0, 9), max_new_tokens=20), seen.append)
    eng.step()
    eng.abort_request(req)
    eng.step()
    assert req.finish_reason == "cancelled" and seen[-1].finished and sum(o.finished for o in seen) == 1
    assert eng.cache.allocator.num_free == eng.cache.allocator.num_blocks


def test_engine_holds_a_core_and_is_the_jobs_port(eng):
    assert not isinstance(eng, EngineCore) and isinstance(eng.core, EngineCore)
    assert isinstance(eng, EnginePort) and all(hasattr(eng, name) for name in PORT_MEMBERS)
    assert eng.device == "cpu" and eng.dtype == "float32" and eng.settings.max_prefill_rows == 2
    assert eng.admission.max_decoding == 4 and eng.aligner is None
    stream = eng.open_stream()
    assert stream.priority == 7 and stream in eng.jobs     # the engine's stream defaults
    stream.cancel()
    eng.step()
    assert stream not in eng.jobs


def test_old_keyword_arguments_build_the_same_config(tiny_model_dir):
    old = engine.load(tiny_model_dir, "cpu", "float32", max_batch_size=4, use_vad=False, kv_cache_bytes=64 << 20)
    assert old.settings == EngineConfig(device="cpu", dtype="float32", max_batch_size=4, use_vad=False,
                                        kv_cache_bytes=64 << 20)
    assert old.scheduler.config.max_batch_size == 4 and old.use_vad is False


@pytest.mark.parametrize("bad, match", [
    (dict(max_batch_size=0), "max_batch_size"), (dict(kv_cache_bytes=-1), "kv_cache_bytes must be"),
    (dict(use_vad="yes"), "use_vad"), (dict(cuda_graphs="off"), "cuda_graphs"),
    (dict(background_window_s=-1.0), "background_window_s"),
    (dict(max_waiting_tokens=0), "max_waiting_tokens"), (dict(stream=StreamDefaults()), None)])
def test_bad_knobs_raise_value_error_before_anything_loads(bad, match):
    if match is None:
        assert EngineConfig(**bad).stream == StreamDefaults()
        return
    with pytest.raises(ValueError, match=match):
        EngineConfig(**bad)
    with pytest.raises(ValueError, match="update_interval"):
        StreamDefaults(update_interval=0)
    with pytest.raises(TypeError, match="no_such_knob"):
        EngineConfig.from_options(no_such_knob=1)
