"""The queue's "time left" (app/eta.py) on made-up progress: quiet, then close and steady."""
from __future__ import annotations

import math

from app.queue.eta import EtaEstimator


def feed(points, estimator=None):
    """(time, progress) pairs in, the estimate after each out (-1: none shown)."""
    eta = estimator or EtaEstimator()
    return [eta.update(t, p) for t, p in points]


def steady(start_up: float, seconds: float, step: float = 0.5):
    """A job with ``start_up`` seconds before any progress, then ``seconds`` of even work."""
    points = [(0.0, 0.0)]
    t = start_up
    while t < start_up + seconds - 1e-9:
        t += step
        points.append((t, min(1.0, (t - start_up) / seconds)))
    return points


def test_nothing_is_shown_before_three_seconds_or_ten_percent():
    early = feed([(0.0, 0.0), (0.5, 0.01), (1.0, 0.02), (2.0, 0.04), (2.9, 0.058)])
    assert early == [-1.0] * 5
    # 10 % reached in under three seconds: enough to go on.
    quick = feed([(0.0, 0.0), (0.5, 0.04), (1.0, 0.08), (1.2, 0.11)])
    assert quick[:3] == [-1.0] * 3 and quick[3] > 0
    # Three seconds in, even at 5 %: the rate has been measured long enough.
    slow = feed([(0.0, 0.0), (1.0, 0.02), (2.0, 0.035), (3.1, 0.05)])
    assert slow[:3] == [-1.0] * 3 and slow[3] > 0


def test_start_up_time_is_not_charged_to_the_rest_of_the_file():
    # 10 s of decoding and warm-up, then 60 s of work: the old estimate said minutes too many.
    points = steady(start_up=10.0, seconds=60.0)
    estimates = feed(points)
    for (t, p), eta in zip(points, estimates):
        if eta < 0:
            continue
        truth = 10.0 + 60.0 - t
        old = t * (1.0 - p) / p
        assert abs(eta - truth) <= max(1.0, 0.05 * truth), (t, eta, truth)
        if p < 0.3:
            assert old > truth * 1.3   # what the user used to see
    assert sum(e >= 0 for e in estimates) > 0.9 * len(estimates)


def test_estimate_counts_down_steadily_when_work_is_even():
    estimates = [e for e in feed(steady(start_up=2.0, seconds=40.0)) if e >= 0]
    assert all(b <= a for a, b in zip(estimates, estimates[1:]))


def test_lumpy_progress_never_makes_the_estimate_jump_up():
    # Chunks finish unevenly: alternately 1 s and 3 s for the same amount of work.
    points, t, p = [(0.0, 0.0)], 0.0, 0.0
    for i in range(40):
        t += 1.0 if i % 2 else 3.0
        p = min(1.0, p + 0.025)
        points.append((t, p))
    estimates = feed(points)
    shown = [(t, e) for (t, _), e in zip(points, estimates) if e >= 0]
    assert shown
    for (t0, a), (t1, b) in zip(shown, shown[1:]):
        assert b <= a + 0.5 * (t1 - t0) + 1e-9, (t0, a, t1, b)
    # ...and it stays near the truth on average: 80 s of work in all.
    t_mid, e_mid = shown[len(shown) // 2]
    assert abs(e_mid - (80.0 - t_mid)) < 0.25 * (80.0 - t_mid)


def test_a_slowdown_raises_the_estimate_gradually_then_catches_up():
    # 15 s at 2 %/s, then another file joins the batch and this one runs at half speed.
    points, t, p = [(0.0, 0.0)], 0.0, 0.0
    while p < 0.999:
        t += 0.5
        p = min(1.0, p + (0.02 if t <= 15.0 else 0.01) * 0.5)
        points.append((t, p))
    estimates = feed(points)
    shown = [(t, e) for (t, _), e in zip(points, estimates) if e >= 0]
    for (t0, a), (t1, b) in zip(shown, shown[1:]):
        assert b <= a + 0.5 * (t1 - t0) + 1e-9
    finish = points[-1][0]
    assert abs(finish - 85.0) < 1.0
    at_slowdown = next(e for t, e in shown if t >= 15.0)
    assert max(e for t, e in shown) < at_slowdown + 0.5 * 30   # never a sudden doubling
    late = [(t, e) for t, e in shown if 45.0 <= t <= finish - 10.0]
    assert late and all(abs(e - (finish - t)) < 0.2 * (finish - t) for t, e in late)


def test_progress_going_back_starts_the_estimate_over():
    eta = EtaEstimator()
    assert feed(steady(start_up=0.0, seconds=20.0)[:20], eta)[-1] > 0
    # A new model took the job: it starts again from 0 %.
    assert eta.update(100.0, 0.0) == -1.0
    assert eta.update(100.5, 0.01) == -1.0
    assert not math.isnan(eta.update(104.0, 0.2))


def test_repeated_or_stalled_updates_keep_the_estimate_finite():
    points = [(0.0, 0.0), (1.0, 0.1), (2.0, 0.2), (2.0, 0.2), (3.0, 0.2), (4.0, 0.3)]
    estimates = feed(points)
    assert all(e == -1.0 or math.isfinite(e) for e in estimates)
    assert estimates[-1] > 0
