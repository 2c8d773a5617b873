"""Many live streams on a busy engine: the passes that commit text go ahead of the previews.

A user watching captions keeps the committed lines; the tentative text of an open utterance
is redone every interval anyway. With one prefill row a step (an engine that cannot keep up
with every stream's updates), a stream's final pass must not queue behind updates of this or
other streams that arrived before it.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import espeak_wav, read_trimmed, with_pauses

import engine

SR = 16000
SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Every sentence is followed by a short pause.",
             "The weather today is sunny and warm."]


@pytest.fixture(scope="module")
def busy_engine(tiny_model_dir):
    return engine.load(tiny_model_dir, device="cpu", dtype="float32", max_prefill_rows=1)


@pytest.fixture(scope="module")
def talk(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finals-first")
    spoken = [read_trimmed(espeak_wav(folder / f"s{i}.wav", text)) for i, text in enumerate(SENTENCES)]
    return with_pauses(spoken)[0]


def test_final_passes_never_wait_behind_updates(busy_engine, talk):
    eng = busy_engine
    passes: list[tuple[str, object, int]] = []   # kind, request, the engine step it was handed in at
    streams = []
    for i in range(10):
        stream = eng.open_stream(update_interval=0.25, max_new_tokens=6)
        stream.on_request = lambda kind, req, span: passes.append((kind, req, eng.scheduler.step_count))
        streams.append((stream, np.roll(talk, i * SR // 8)))    # the voices end at different times
    block = SR // 4
    for pos in range(0, len(talk), block):
        for stream, audio in streams:
            stream.feed(audio[pos:pos + block])
        eng.step()
    for stream, _ in streams:
        stream.close()
    for _ in range(3000):
        if all(stream.finished for stream, _ in streams):
            break
        eng.step()
    assert all(stream.state == "done" for stream, _ in streams)
    assert all(len(stream.committed) == len(SENTENCES) for stream, _ in streams)

    # A final is either submitted as one, or the update in flight over the same span handed over
    # (then it came as a final at the handover, and runs at a final's priority from there).
    finals = [(req, came) for kind, req, came in passes if kind == "final"]
    handed_over = {req.id for req, _ in finals}
    updates = [req for kind, req, _ in passes
               if kind == "update" and req.first_token_step is not None and req.id not in handed_over]
    assert finals and updates
    assert any(req.arrival_step < came for req, came in finals), "no update was handed over: the test shows less"
    assert len({req.priority for req, _ in finals}) == 1 and finals[0][0].priority > updates[0].priority
    waited = [u for u in updates if u.first_token_step - u.arrival_step > 2]
    assert waited, "the engine was never busy: the test shows nothing"
    for final, came in finals:
        # every update already queued when the final came, and still waiting, starts after it
        for update in updates:
            if update.arrival_step <= came < update.first_token_step:
                assert final.first_token_step <= update.first_token_step, (final.id, update.id)
