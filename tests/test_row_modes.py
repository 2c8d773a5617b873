"""Row modes: what a step reads out of a row is chosen by the request's data, not by its kind.

A scored request (``score_token_id`` set, the forced aligner's) runs its whole prompt, in as many
chunks as the step budget needs, every row in the SCORE mode; its classes accumulate in prompt
order and it finishes when its last token is in. Generating requests beside it feed, sample and
verify as before. The serving classes carry no ``kind ==`` branches.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from engine.pipelines.aligner import Aligner
from engine.serving.kv_cache import BlockAllocator
from engine.serving.request import Request
from engine.serving.scheduler import RowMode, Scheduler, SchedulerConfig

TS = 9   # the fake timestamp token


def request(prompt: list[int], *, scored: bool = False, draft: list[int] = ()) -> Request:
    return Request(prompt_ids=prompt, audio_start=0, features=None, num_audio_tokens=0,
                   max_new_tokens=1 if scored else 4, eos_token_ids=(0,), draft=list(draft),
                   score_token_id=TS if scored else None)


def fake_outputs(rows) -> dict:
    """What a runner returns: a class per marked position of a score row (its position), a token for
    a sample row, one per position for a verify row."""
    out = {}
    for row in rows:
        req, mode = row.request, row.mode
        if mode is RowMode.SCORE:
            span = range(row.start, row.start + row.length)
            out[req.id] = [p for p in span if req.all_ids[p] == TS]
        elif mode is RowMode.SAMPLE:
            out[req.id] = 5
        elif mode is RowMode.VERIFY:
            out[req.id] = [5] * (1 + len(row.draft))
    return out


def test_a_scored_prompt_runs_in_chunks_every_row_scored_beside_generating_rows():
    sched = Scheduler(SchedulerConfig(max_step_tokens=8, max_prefill_rows=4), BlockAllocator(64, 4))
    prompt = [1, 2, TS, TS, 3, TS, TS, 4, 4, 4, 4, TS, TS, 2, TS, TS, 1, TS, TS]
    plain = request([1, 2, 3])            # made first: the older request gets its row first
    scored = request(prompt, scored=True)
    sched.add(plain)
    sched.add(scored)
    modes = []
    while not scored.finished:
        rows = sched.schedule()
        modes.append({r.request.id: r.mode for r in rows})
        sched.postprocess(rows, fake_outputs(rows))
    assert all(m[scored.id] is RowMode.SCORE for m in modes if scored.id in m)
    assert sum(scored.id in m for m in modes) >= 3, "the scored prompt should need several steps"
    assert scored.result == [i for i, t in enumerate(prompt) if t == TS]   # every mark once, in order
    assert scored.finish_reason == "stop" and not scored.token_ids
    assert modes[0][plain.id] is RowMode.SAMPLE and plain.token_ids == [5] * len(plain.token_ids)
    assert RowMode.SAMPLE in {m.get(plain.id) for m in modes[1:]}   # it decodes on beside the scored chunks


def test_verify_and_feed_rows_of_generating_requests():
    sched = Scheduler(SchedulerConfig(max_step_tokens=4), BlockAllocator(64, 4))
    drafted = request([1, 2, 3, 4, 5, 6], draft=[5, 5, 7])
    sched.add(drafted)
    first = sched.schedule()
    assert [r.mode for r in first] == [RowMode.FEED]      # 6 prompt tokens, 4 a step: a chunk
    sched.postprocess(first, fake_outputs(first))
    second = sched.schedule()
    assert [r.mode for r in second] == [RowMode.VERIFY] and second[0].draft
    sched.postprocess(second, fake_outputs(second))
    assert drafted.token_ids[:2] == [5, 5]


def test_aligner_scores_the_same_in_small_chunks(tiny_aligner_dir):
    """The real aligner, its prompt split over many steps: the classes of one whole-prompt step."""
    rng = np.random.default_rng(3)
    audio = (0.1 * rng.standard_normal(16000 * 3)).astype(np.float32)
    words = "hello world it is a test".split()
    whole = Aligner(tiny_aligner_dir, device="cpu", dtype="float32")
    chunked = Aligner(tiny_aligner_dir, device="cpu", dtype="float32", max_step_tokens=16)
    a, b = whole.submit(audio, words), chunked.submit(audio, words)
    steps = 0
    for aligner, req in ((whole, a), (chunked, b)):
        while not req.finished:
            aligner.step()
            steps += aligner is chunked
    assert steps >= req.num_tokens // 16
    assert a.error is None and b.error is None
    assert len(a.result) == 2 * len(words) and b.result == a.result


def test_serving_has_no_kind_branches():
    serving = Path(__file__).resolve().parents[1] / "engine" / "serving"
    hits = [f"{p.name}:{i}" for p in serving.glob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"\bkind\s*[!=]=", line)]
    assert not hits, hits
