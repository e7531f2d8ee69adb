"""The exporter's driver health: driver process restarts, sample age, GPUs that answer.

gputop_sampler_restarts_total (counter), gputop_sample_age_seconds (gauge, at scrape time) and
gputop_gpu_responding{gpu} (gauge, 1/0), rendered from snapshots that carry issue 16's fields.
"""

from __future__ import annotations

import math
from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gputop.engine.model import GpuSample, GpuState, Snapshot
from gputop.export.metrics import sample_age_s, snapshot_families
from gputop.export.prom import SnapshotCollector, make_registry
from tests.export.conftest import Served, http_get, samples
from tests.fakes import FakeSource, lost_gpu, make_gpu, make_snapshot

NOTE = "DRIVER CRASHED (SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage) — restarting"


def not_responding(index: int, stale_s: float | None = 4.0) -> GpuSample:
    """A GPU whose driver call hung: identity only, every reading None."""
    return GpuSample(
        index=index,
        state=GpuState.NOT_RESPONDING,
        error="nvmlDeviceGetPowerUsage hung",
        stale_s=stale_s,
        uuid=f"GPU-00000000-0000-0000-0000-00000000000{index}",
        name="NVIDIA A100-SXM4-80GB",
    )


class Holder:
    """What the collector reads: ``latest``, and the sampler's own counters."""

    def __init__(self, latest: Snapshot | None, restarts: int = 0) -> None:
        self.latest = latest
        self.errors = 0
        self.restarts = restarts


def scrape(collector: SnapshotCollector) -> str:
    return generate_latest(make_registry(collector)).decode()


def families_by_name(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


# -- gputop_sampler_restarts_total ---------------------------------------------------------------


def test_restarts_are_a_counter_from_the_snapshot_with_help() -> None:
    snap = replace(make_snapshot(), sampler_restarts=3, driver_note=NOTE)
    text = scrape(SnapshotCollector(Holder(snap)))
    assert samples(text, "gputop_sampler_restarts_total") == [({}, 3.0)]
    family = text_string_to_metric_families(text)
    restarts = next(f for f in family if f.name == "gputop_sampler_restarts")
    assert restarts.type == "counter"
    assert "restarted" in restarts.documentation and "SIGSEGV" in restarts.documentation
    assert "\ngputop_sampler_restarts_total 3.0\n" in text


def test_restarts_default_to_zero_and_come_from_the_snapshot_in_plain_families() -> None:
    fams = {
        f.name: f
        for f in snapshot_families(make_snapshot(), age_s=0, sampler_errors=0, version="x")
    }
    assert fams["gputop_sampler_restarts"].samples[0].value == 0.0
    snap = replace(make_snapshot(), sampler_restarts=7)
    fams = {f.name: f for f in snapshot_families(snap, age_s=0, sampler_errors=0, version="x")}
    assert fams["gputop_sampler_restarts"].samples[0].value == 7.0
    assert fams["gputop_sampler_restarts"].kind == "counter"


def test_restarts_prefer_the_holders_newer_count_and_never_go_down() -> None:
    # The sampler's latest is the last *fresh* reading: a driver process that keeps crashing
    # sends none, so the holder's own count is ahead of the snapshot's.
    holder = Holder(replace(make_snapshot(), sampler_restarts=2), restarts=5)
    collector = SnapshotCollector(holder)
    assert samples(scrape(collector), "gputop_sampler_restarts_total") == [({}, 5.0)]
    holder.latest = replace(make_snapshot(seq=2), sampler_restarts=1)
    holder.restarts = 0  # e.g. a holder that lost count: the counter must not reset
    assert samples(scrape(collector), "gputop_sampler_restarts_total") == [({}, 5.0)]
    holder.latest = replace(make_snapshot(seq=3), sampler_restarts=6)
    assert samples(scrape(collector), "gputop_sampler_restarts_total") == [({}, 6.0)]


def test_restarts_are_exposed_before_the_first_sample() -> None:
    text = scrape(SnapshotCollector(Holder(None, restarts=2)))
    assert samples(text, "gputop_sampler_restarts_total") == [({}, 2.0)]
    assert samples(scrape(SnapshotCollector()), "gputop_sampler_restarts_total") == [({}, 0.0)]


# -- gputop_sample_age_seconds -------------------------------------------------------------------


def test_sample_age_counts_from_the_fresh_reading_at_scrape_time() -> None:
    now = [1011.0]
    snap = make_snapshot()  # taken_at_mono = 1001.0
    holder = Holder(snap)
    collector = SnapshotCollector(holder, clock=lambda: now[0])
    assert samples(scrape(collector), "gputop_sample_age_seconds") == [({}, 10.0)]
    now[0] = 1031.0  # the driver hangs: no new reading, the age grows scrape by scrape
    assert samples(scrape(collector), "gputop_sample_age_seconds") == [({}, 30.0)]
    # a stale re-send of the same reading is as old as the reading itself
    holder.latest = replace(snap, stale_s=25.0, driver_note=NOTE)
    assert samples(scrape(collector), "gputop_sample_age_seconds") == [({}, 30.0)]
    holder.latest = make_snapshot(seq=30)  # a fresh reading, 1030.0
    assert samples(scrape(collector), "gputop_sample_age_seconds") == [({}, 1.0)]


def test_sample_age_is_consistent_with_the_dashboards_stale_rule() -> None:
    snap = make_snapshot()  # taken_at_mono = 1001.0
    assert sample_age_s(snap, 1005.0, 0.0) == 4.0
    # a re-send that says it is older than its start suggests (another clock): the larger wins,
    # as the dashboard's STALE marker does
    assert sample_age_s(replace(snap, stale_s=40.0), 1005.0, 0.0) == 40.0
    assert sample_age_s(snap, 990.0, 0.0) == 0.0  # never negative
    assert sample_age_s(None, 1005.0, 1000.0) == 5.0  # before the first reading: since start


def test_sample_age_help_says_what_it_measures() -> None:
    text = scrape(SnapshotCollector(Holder(make_snapshot())))
    family = next(
        f for f in text_string_to_metric_families(text) if f.name == "gputop_sample_age_seconds"
    )
    assert family.type == "gauge"
    assert "fresh driver reading" in family.documentation and "hangs" in family.documentation


# -- gputop_gpu_responding -----------------------------------------------------------------------


def test_responding_is_one_per_gpu_and_zero_for_a_gpu_that_did_not_answer() -> None:
    gpus = (make_gpu(0), not_responding(1), lost_gpu(2), not_responding(3, stale_s=None))
    snap = replace(
        make_snapshot(gpus=gpus),
        driver_note="nvmlDeviceGetPowerUsage (GPU 1) not answering for 4 s",
    )
    text = scrape(SnapshotCollector(Holder(snap)))
    responding = {labels["gpu"]: v for labels, v in samples(text, "gputop_gpu_responding")}
    assert responding == {"0": 1.0, "1": 0.0, "2": 0.0, "3": 0.0}
    lost = {labels["gpu"]: v for labels, v in samples(text, "gputop_gpu_lost")}
    assert lost == {"0": 0.0, "1": 0.0, "2": 1.0, "3": 0.0}  # not responding is not lost
    # a GPU without readings has no DCGM series (never a stale or NaN value)
    assert [labels["gpu"] for labels, _ in samples(text, "DCGM_FI_DEV_GPU_UTIL")] == ["0"]
    assert [labels["gpu"] for labels, _ in samples(text, "DCGM_FI_DEV_POWER_USAGE")] == ["0"]
    values = [s.value for f in text_string_to_metric_families(text) for s in f.samples]
    assert not any(math.isnan(v) for v in values)


def test_responding_keeps_its_series_when_a_gpu_stops_answering() -> None:
    # Only the gpu label: a UUID the hung GPU could not report would start a new series.
    healthy = scrape(SnapshotCollector(Holder(make_snapshot())))
    hung = scrape(SnapshotCollector(Holder(make_snapshot(gpus=(make_gpu(0), not_responding(1))))))
    assert samples(healthy, "gputop_gpu_responding") == [({"gpu": "0"}, 1.0), ({"gpu": "1"}, 1.0)]
    assert samples(hung, "gputop_gpu_responding") == [({"gpu": "0"}, 1.0), ({"gpu": "1"}, 0.0)]
    family = next(
        f for f in text_string_to_metric_families(hung) if f.name == "gputop_gpu_responding"
    )
    assert family.type == "gauge" and "hung" in family.documentation


def test_no_gpu_family_before_the_first_sample() -> None:
    names = families_by_name(scrape(SnapshotCollector(Holder(None))))
    assert "gputop_gpu_responding" not in names
    assert "gputop_sample_age_seconds" in names and "gputop_sampler_restarts" in names


def test_a_snapshot_with_no_gpus_yet_carries_only_health() -> None:
    # The sampler's stand-in before the driver process's first reading: no GPUs, a note.
    empty = replace(make_snapshot(gpus=()), seq=0, stale_s=3.0, driver_note=NOTE)  # at 1001.0
    text = scrape(SnapshotCollector(Holder(empty, restarts=1), clock=lambda: 1005.0))
    assert samples(text, "gputop_gpu_responding") == []
    assert samples(text, "gputop_sampler_restarts_total") == [({}, 1.0)]
    assert samples(text, "gputop_sample_age_seconds") == [({}, 4.0)]


# -- over HTTP, with the real sampler --------------------------------------------------------------


def test_served_metrics_carry_the_driver_health(serve: type[Served]) -> None:
    snap = replace(
        make_snapshot(gpus=(make_gpu(0), not_responding(1))),
        sampler_restarts=2,
        driver_note="nvmlDeviceGetPowerUsage (GPU 1) not answering for 4 s",
    )
    served = serve(FakeSource([snap]), 0.05)
    text = http_get(served.url)
    assert samples(text, "gputop_sampler_restarts_total") == [({}, 2.0)]
    assert samples(text, "gputop_gpu_responding") == [({"gpu": "0"}, 1.0), ({"gpu": "1"}, 0.0)]
    ((_, age),) = samples(text, "gputop_sample_age_seconds")
    assert 0.0 <= age < 60.0
    filtered = http_get(f"{served.url}?name[]=gputop_sampler_restarts_total")
    assert set(families_by_name(filtered)) == {"gputop_sampler_restarts"}
