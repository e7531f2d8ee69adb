"""/metrics over HTTP in-process: labels per GPU, scrapes never reach the driver, hung driver,
routes (404, 405, HEAD, gzip) and name[] filtering."""

from __future__ import annotations

import gzip
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop.sim import load_scenario
from tests.conftest import SimFactory
from tests.export.conftest import Served, http_get, samples
from tests.fakes import FakeSource


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


def _request(url: str, method: str = "GET", **headers: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) of one request, error statuses included."""
    req = urllib.request.Request(url, method=method, headers=headers)
    if method == "POST":
        req.data = b"x" * 10_000
    try:
        with urllib.request.urlopen(req, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), exc.read()


def _families(body: bytes) -> set[str]:
    return {family.name for family in text_string_to_metric_families(body.decode())}


@pytest.mark.parametrize("path", ["/../../etc/passwd", "/metricsx", "/foo", "/metrics/"])
def test_other_paths_are_not_found(sim_source: SimFactory, serve: type[Served], path: str) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    status, _headers, body = _request(served.base + path)
    assert status == 404
    assert b"DCGM" not in body


def test_root_links_to_metrics(sim_source: SimFactory, serve: type[Served]) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    status, headers, body = _request(served.base + "/")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert b'href="/metrics"' in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_other_methods_are_not_allowed(
    sim_source: SimFactory, serve: type[Served], method: str
) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    status, headers, _body = _request(served.url, method)
    assert status == 405
    assert headers["Allow"] == "GET, HEAD"


def test_head_sends_headers_only(sim_source: SimFactory, serve: type[Served]) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    _status, _headers, full = _request(served.url)
    status, headers, body = _request(served.url, "HEAD")
    assert (status, body) == (200, b"")
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert abs(int(headers["Content-Length"]) - len(full)) < 100  # the sample age changes digits


def test_gzip_when_asked(sim_source: SimFactory, serve: type[Served]) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    status, headers, body = _request(served.url, **{"Accept-Encoding": "gzip"})
    assert (status, headers["Content-Encoding"]) == (200, "gzip")
    assert b"DCGM_FI_DEV_GPU_UTIL{" in gzip.decompress(body)


def test_openmetrics_when_asked(sim_source: SimFactory, serve: type[Served]) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    status, headers, body = _request(served.url, Accept="application/openmetrics-text")
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "name[]=DCGM_FI_DEV_GPU_UTIL&name[]=gputop_sample_age_seconds",
            {"DCGM_FI_DEV_GPU_UTIL", "gputop_sample_age_seconds"},
        ),
        ("name[]=gputop_sampler_errors_total", {"gputop_sampler_errors"}),  # a counter's sample
        ("name[]=gputop_sampler_errors", {"gputop_sampler_errors"}),  # ... or family name
        ("name[]=no_such_metric", set()),
    ],
)
def test_name_filter_returns_exactly_the_asked_families(
    sim_source: SimFactory, serve: type[Served], query: str, expected: set[str]
) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    status, _headers, body = _request(f"{served.url}?{query}")
    assert status == 200
    assert _families(body) == expected
    assert len(_families(_request(served.url)[2])) > len(expected) + 5  # unfiltered: all
