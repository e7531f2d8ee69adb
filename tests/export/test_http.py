"""/metrics over HTTP in-process: labels per GPU, scrapes never reach the driver, hung driver."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from gputop.export_prom import MetricsServer, SnapshotCollector, make_registry
from gputop.sampler import Sampler
from gputop.sim import load_scenario
from gputop.source import Source
from tests.conftest import SimFactory
from tests.export.conftest import http_get, samples
from tests.fakes import FakeSource


class Served:
    """A sampler on ``source`` and /metrics on a free loopback port; closed by the fixture."""

    def __init__(self, source: Source, interval_s: float) -> None:
        self.sampler = Sampler(source, interval_s=interval_s, enrich=False)
        collector = SnapshotCollector(self.sampler)
        self.server = MetricsServer(make_registry(collector), "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.port}/metrics"
        self.sampler.start()
        deadline = time.monotonic() + 10
        while self.sampler.latest is None:
            assert time.monotonic() < deadline, "no first sample"
            time.sleep(0.01)

    def close(self) -> None:
        self.sampler.stop()
        self.server.close()


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    opened: list[Served] = []

    class Tracked(Served):
        def __init__(self, source: Source, interval_s: float) -> None:
            super().__init__(source, interval_s)
            opened.append(self)

    yield Tracked
    for served in opened:
        served.close()


def test_every_simulated_gpu_has_util_with_dcgm_labels(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    source, _lib = sim_source("dgx")
    served = serve(source, 60.0)
    rows = samples(http_get(served.url), "DCGM_FI_DEV_GPU_UTIL")
    expected = {
        (str(i), g.uuid, g.pci_bus_id, f"nvidia{i}", g.name)
        for i, g in enumerate(load_scenario("dgx").gpus)
    }
    got = {
        (lab["gpu"], lab["UUID"], lab["pci_bus_id"], lab["device"], lab["modelName"])
        for lab, _ in rows
    }
    assert got == expected
    assert all(0 <= value <= 100 for _, value in rows)


def test_a_burst_of_scrapes_makes_no_driver_calls(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    source, lib = sim_source("demo")
    served = serve(source, 60.0)  # one read at start, the next one a minute later
    before = sum(lib.calls.values())
    assert before > 0  # the first sample did read the simulated driver
    bodies = [http_get(served.url) for _ in range(200)]
    assert sum(lib.calls.values()) == before
    assert all("DCGM_FI_DEV_GPU_UTIL{" in body for body in bodies)


def _age(url: str) -> float:
    return samples(http_get(url, timeout_s=2.0), "gputop_sample_age_seconds")[0][1]


def test_hung_driver_raises_sample_age_and_scrapes_still_answer(serve: type[Served]) -> None:
    source = FakeSource()
    served = serve(source, 0.05)
    try:
        assert _age(served.url) < 5.0
        source.hang.set()  # the next driver read blocks
        ages = [_age(served.url)]
        deadline = time.monotonic() + 10
        while ages[-1] < 1.0:
            assert time.monotonic() < deadline, f"sample age did not grow: {ages[-5:]}"
            time.sleep(0.1)
            ages.append(_age(served.url))
        assert ages == sorted(ages)  # it only grows while the driver hangs
        body = http_get(served.url)
        assert samples(body, "DCGM_FI_DEV_GPU_UTIL")  # the last good values are still served
    finally:
        source.release.set()
