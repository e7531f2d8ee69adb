"""Only current readings become series: GPUs that did not answer, and whole re-sent snapshots, keep
their health series (responding 0) and lose their DCGM_FI_*, counter and memory series; the
exporter's feed says whether the driver gives readings at all (gputop_driver_up)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputop.engine.model import GpuCounters, GpuSample, GpuState, Snapshot
from gputop.engine.sampler import Sampler
from gputop.errors import DriverError
from gputop.export.feed import NO_READING_YET, SampleFeed, driver_answered
from gputop.export.metrics import answered, snapshot_families
from gputop.export.prom import SnapshotCollector, make_registry
from tests.export.conftest import samples
from tests.fakes import FakeSource, lost_gpu, make_gpu, make_snapshot


def hung(index: int) -> GpuSample:
    """What the driver process hands out for a GPU whose call hangs: identity, no readings."""
    return GpuSample(
        index=index,
        state=GpuState.NOT_RESPONDING,
        error="nvmlDeviceGetPowerUsage did not return",
        stale_s=3.0,
        uuid=f"GPU-00000000-0000-0000-0000-00000000000{index}",
        name="NVIDIA A100-SXM4-80GB",
    )


def errored(index: int) -> GpuSample:
    """A GPU whose handle could not be read (GpuState.ERROR), its process list still answered."""
    return replace(make_gpu(index), state=GpuState.ERROR, error="Unknown Error")


def with_extras(snap: Snapshot) -> Snapshot:
    """``snap`` with each GPU's counters and unattributed memory, as the exporter's source reads."""
    return replace(
        snap,
        counters=tuple(GpuCounters(index=g.index, energy_mj=5000, xid_count=0) for g in snap.gpus),
        unattributed_memory_bytes=tuple((g.index, 1 << 30) for g in snap.gpus),
    )


def render(snap: Snapshot, **kwargs: object) -> str:
    class Holder:
        latest = snap
        errors = 0
        restarts = 0

    return generate_latest(make_registry(SnapshotCollector(Holder(), **kwargs))).decode()  # type: ignore[arg-type]


def gpus_of(text: str, name: str) -> list[str]:
    return sorted(labels["gpu"] for labels, _ in samples(text, name))


def dcgm_gpus(text: str) -> set[str]:
    """The gpu labels of every DCGM_FI_* series."""
    return {
        s.labels["gpu"]
        for f in text_string_to_metric_families(text)
        if f.name.startswith("DCGM_FI_")
        for s in f.samples
    }


@pytest.mark.parametrize(
    ("other", "keeps_processes"),
    [(hung(1), False), (lost_gpu(1), False), (errored(1), True)],
    ids=["not-responding", "lost", "error"],
)
def test_a_gpu_that_did_not_answer_has_health_but_no_readings(
    other: GpuSample, keeps_processes: bool
) -> None:
    text = render(with_extras(make_snapshot(gpus=(make_gpu(0), other))))
    assert samples(text, "gputop_gpu_responding") == [({"gpu": "0"}, 1.0), ({"gpu": "1"}, 0.0)]
    assert dcgm_gpus(text) == {"0"}  # readings, counters (energy) and framebuffer alike
    assert gpus_of(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == ["0"]
    assert gpus_of(text, "gputop_unattributed_memory_bytes") == ["0"]
    # an ERROR GPU's process list is the driver's own answer; a hung GPU has none to give
    expected = ["0", "1"] if keeps_processes else ["0"]
    assert gpus_of(text, "gputop_process_gpu_memory_bytes") == expected
    lost = {labels["gpu"]: v for labels, v in samples(text, "gputop_gpu_lost")}
    assert lost == {"0": 0.0, "1": float(other.state is GpuState.LOST)}


def test_a_snapshot_served_stale_has_no_current_gpu_series() -> None:
    # The sampler's last reading again while the driver fails or restarts: every value is old.
    fresh = with_extras(make_snapshot(gpus=(make_gpu(0), make_gpu(1), lost_gpu(2))))
    text = render(replace(fresh, stale_s=40.0))
    assert dcgm_gpus(text) == set()
    assert samples(text, "gputop_gpu_responding") == [
        ({"gpu": "0"}, 0.0),
        ({"gpu": "1"}, 0.0),
        ({"gpu": "2"}, 0.0),
    ]
    assert samples(text, "gputop_process_gpu_memory_bytes") == []
    assert samples(text, "gputop_unattributed_memory_bytes") == []
    assert gpus_of(text, "gputop_gpu_lost") == ["0", "1", "2"]  # the last known health stays
    ((_, age),) = samples(text, "gputop_sample_age_seconds")
    assert age >= 40.0
    # the same reading, fresh, has them all
    text = render(fresh)
    assert dcgm_gpus(text) == {"0", "1"}
    assert gpus_of(text, "gputop_process_gpu_memory_bytes") == ["0", "1"]


def test_answered_is_the_one_rule() -> None:
    snap = make_snapshot(gpus=(make_gpu(0), hung(1), lost_gpu(2), errored(3)))
    assert [g.index for g in answered(snap)] == [0]
    assert answered(replace(snap, stale_s=1.0)) == ()


def test_driver_up_is_a_gauge_only_when_known() -> None:
    text = render(make_snapshot(), driver_up=lambda: False)
    assert samples(text, "gputop_driver_up") == [({}, 0.0)]
    family = next(f for f in text_string_to_metric_families(text) if f.name == "gputop_driver_up")
    assert family.type == "gauge" and "hangs on one GPU leaves it 1" in family.documentation
    assert samples(render(make_snapshot(), driver_up=lambda: True), "gputop_driver_up") == [
        ({}, 1.0)
    ]
    assert samples(render(make_snapshot()), "gputop_driver_up") == []
    fams = snapshot_families(None, age_s=0.0, sampler_errors=0, version="x", driver_up=False)
    assert [f.samples[0].value for f in fams if f.name == "gputop_driver_up"] == [0.0]


def test_driver_answered() -> None:
    assert driver_answered(make_snapshot())
    assert driver_answered(make_snapshot(gpus=(make_gpu(0), hung(1))))  # one GPU hangs
    assert driver_answered(make_snapshot(gpus=()))  # a box without GPUs
    assert driver_answered(make_snapshot(gpus=(lost_gpu(0),)))  # GPU_IS_LOST is an answer
    assert not driver_answered(make_snapshot(gpus=(hung(0), hung(1))))
    assert not driver_answered(replace(make_snapshot(), stale_s=2.0))
    # GPU 0's reading kept from before a driver crash, GPU 1 the one the crash took: no answer.
    assert not driver_answered(make_snapshot(gpus=(replace(make_gpu(0), stale_s=0.5), hung(1))))


# -- the feed, on a real Sampler ------------------------------------------------------------------


def wait_for(check: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_the_feed_follows_the_driver_down_and_up_again() -> None:
    source = FakeSource([make_snapshot()])
    sampler = Sampler(source, interval_s=0.05, enrich=False)
    feed = SampleFeed(sampler, hostname="box-a")
    assert not feed.driver_up() and feed.driver_problem() == NO_READING_YET
    sampler.start()
    try:
        assert feed.first.wait(10)
        wait_for(feed.driver_up)
        latest = feed.latest
        assert latest is not None and latest.system.hostname == "box-a"
        assert feed.driver_problem() is None
        # every read fails: the driver went away
        source.snapshots = []
        failing = DriverError("the NVIDIA kernel driver is not loaded\x1b[2J")

        def fail() -> Snapshot:
            raise failing

        source.snapshot = fail  # type: ignore[method-assign]
        wait_for(lambda: not feed.driver_up())
        assert feed.driver_problem() == "the NVIDIA kernel driver is not loaded\\x1b[2J"
        stale = feed.latest
        assert stale is not None and stale.stale_s is not None
        collector = SnapshotCollector(feed, driver_up=feed.driver_up)
        text = generate_latest(make_registry(collector)).decode()
        assert samples(text, "gputop_driver_up") == [({}, 0.0)]
        assert dcgm_gpus(text) == set()
        # it answers again
        del source.snapshot
        source.snapshots = [make_snapshot()]
        wait_for(feed.driver_up)
        text = generate_latest(make_registry(collector)).decode()
        assert samples(text, "gputop_driver_up") == [({}, 1.0)] and dcgm_gpus(text) == {"0", "1"}
    finally:
        sampler.stop()


def test_the_feed_counts_a_reading_with_every_gpu_silent_as_stale() -> None:
    silent = make_snapshot(gpus=(hung(0), hung(1)))
    source = FakeSource([make_snapshot(), silent])
    sampler = Sampler(source, interval_s=0.05, enrich=False)
    feed = SampleFeed(sampler)
    sampler.start()
    try:
        wait_for(lambda: source.calls >= 3)
        wait_for(lambda: not feed.driver_up())
        latest = feed.latest
        assert latest is not None and latest.stale_s is not None and latest.stale_s >= 0.0
        assert feed.driver_problem() == "nvmlDeviceGetPowerUsage did not return"
    finally:
        sampler.stop()
