"""Sparkline buckets: fixed, sample-aligned peaks, fed incrementally from History."""

from __future__ import annotations

import random

from gputop.engine.history import History
from gputop.ui.spark import GpuSparks, PeakBuckets
from gputop.ui.text import sparkline
from tests.fakes import make_gpu, make_snapshot


def test_finished_buckets_stay_put_as_samples_arrive() -> None:
    buckets = PeakBuckets(width=3, per=2)
    for n, value in enumerate([10.0, 30.0, 20.0, 50.0, 40.0]):
        buckets.add(n, value)
    assert buckets.peaks() == [30.0, 50.0, 40.0]
    buckets.add(5, 5.0)  # joins the last bucket
    assert buckets.peaks() == [30.0, 50.0, 40.0]
    buckets.add(6, 1.0)  # opens a new bucket: everything moves one place
    assert buckets.peaks() == [50.0, 40.0, 1.0]


def test_unknown_values_and_missed_samples_leave_gaps() -> None:
    buckets = PeakBuckets(width=4, per=1)
    assert buckets.peaks() == [None] * 4
    buckets.add(0, None)
    buckets.add(1, 7.0)
    buckets.add(3, 9.0)  # sample 2 never came
    assert buckets.peaks() == [None, 7.0, None, 9.0]


def feed(history: History, utils: list[int]) -> None:
    for u in utils:
        gpu = make_gpu(0, utilization_gpu_percent=u, memory_used_bytes=u * 1000)
        history.append(make_snapshot(history.count + 1, gpus=(gpu,)))


def test_gpu_sparks_read_only_new_samples_and_match_a_fresh_computation() -> None:
    history = History(maxlen=600)
    feed(history, list(range(40)))
    live = GpuSparks(0, window=20)
    live.update(history, width=5)  # 4 samples a character
    for u in [90, 3, 3, 77, 5, 5, 5]:
        feed(history, [u])
        live.update(history, width=5)
        fresh = GpuSparks(0, window=20)
        fresh.update(history, width=5)
        assert live.util.peaks() == fresh.util.peaks()
        assert live.memory.peaks() == fresh.memory.peaks()
    assert live.util.peaks()[-2:] == [90, 5]  # samples 40-43 (90, 3, 3, 77), then 44-46 (open)


def test_gpu_sparks_rebucket_when_the_width_changes() -> None:
    history = History(maxlen=600)
    feed(history, [10] * 30 + [99] + [10] * 29)
    sparks = GpuSparks(0, window=60)
    sparks.update(history, width=6)
    assert sparks.util.per == 10 and max(v for v in sparks.util.peaks() if v is not None) == 99
    sparks.update(history, width=60)
    assert sparks.util.per == 1 and sparks.util.peaks().count(99) == 1


def test_buckets_grow_with_a_young_history_then_stay_fixed() -> None:
    history = History(maxlen=600)
    sparks = GpuSparks(0, window=40)
    feed(history, [50] * 8)
    sparks.update(history, width=4)
    assert sparks.util.per == 2 and None not in sparks.util.peaks()  # full from the start
    feed(history, [50] * 100)
    sparks.update(history, width=4)
    assert sparks.util.per == 10


def test_incremental_text_matches_drawing_the_peaks_afresh() -> None:
    rng = random.Random(7)
    buckets = PeakBuckets(width=12, per=3)
    number = 0
    for step in range(400):
        number += rng.choice([1, 1, 1, 2, 5, 40])  # missed samples, and long gaps
        value = rng.choice([None, 0.0, rng.uniform(0, 120)])
        buckets.add(number, value)
        top = 100.0 if step < 300 else 50.0  # the scale changes once
        assert buckets.text(top) == sparkline(buckets.peaks(), 12, top=top)
        assert buckets.text(None) == sparkline(buckets.peaks(), 12)
    assert len(buckets.text(100.0)) == 12


def test_text_before_any_sample_is_blank() -> None:
    assert PeakBuckets(width=5, per=1).text(100.0) == " " * 5
    assert PeakBuckets(width=0, per=1).text(100.0) == ""
