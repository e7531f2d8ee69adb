"""The /metrics server under load and abuse: a burst of scrapes beside idle and half-sent
connections, idle and trickling clients dropped after the timeout, a prompt close."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from gputop.export import http as export_http
from gputop.export.http import MetricsServer
from gputop.export.prom import SnapshotCollector, make_registry
from tests.conftest import SimFactory
from tests.export.conftest import Served

SCRAPES = 200
IDLE = 100
IDLE_TIMEOUT_S = 30.0


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


def _closed_within(sock: socket.socket, limit_s: float) -> float:
    """Seconds until the server closed ``sock`` (recv gives b""); fails past ``limit_s``."""
    start = time.monotonic()
    sock.settimeout(limit_s)
    try:
        assert sock.recv(1024) == b""
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for {limit_s} s")
    except ConnectionResetError:
        pass
    return time.monotonic() - start


def test_a_burst_of_scrapes_succeeds_beside_idle_and_half_sent_connections(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    # A long server timeout, so that a scrape stuck behind the idle connections would wait
    # for them to be dropped (30 s): the bound below tells that apart from a busy CI box.
    served = serve(sim_source("demo")[0], 60.0, timeout_s=IDLE_TIMEOUT_S)
    idle = [_connect(served.server.port) for _ in range(IDLE)]
    try:
        for sock in idle[::2]:
            sock.sendall(b"GET /metr")  # half a request line, never finished
        results: list[tuple[int, bool, float]] = []
        errors: list[BaseException] = []
        start = threading.Barrier(SCRAPES)

        def scrape() -> None:
            start.wait(10)
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(served.url, timeout=IDLE_TIMEOUT_S) as response:
                    body = response.read()
                    ok = b"DCGM_FI_DEV_GPU_UTIL{" in body
                    results.append((response.status, ok, time.monotonic() - t0))
            except OSError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=scrape, daemon=True) for _ in range(SCRAPES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(IDLE_TIMEOUT_S + 10)
        assert not errors, errors[:3]
        assert len(results) == SCRAPES
        assert all(status == 200 and ok for status, ok, _ in results)
        slowest = max(elapsed for _, _, elapsed in results)
        assert slowest < IDLE_TIMEOUT_S / 2, f"a scrape waited {slowest:.2f} s behind idle ones"
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.parametrize("sends", [b"", b"GET /metrics HTTP/1.1\r\nHost: x\r\n"])
def test_idle_and_half_sent_connections_are_closed_after_the_timeout(
    sim_source: SimFactory, serve: type[Served], sends: bytes
) -> None:
    served = serve(sim_source("demo")[0], 60.0, timeout_s=1.0)
    with _connect(served.server.port) as sock:
        sock.sendall(sends)
        elapsed = _closed_within(sock, 1.0 + 2.0)
    assert elapsed > 0.5  # dropped by the timeout, not at once


def test_a_trickling_client_is_closed_after_the_timeout(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    """The limit is for the whole request head, not per read: a byte now and then does not help."""
    served = serve(sim_source("demo")[0], 60.0, timeout_s=1.0)
    with _connect(served.server.port) as sock:
        start = time.monotonic()
        sock.settimeout(0.2)
        for byte in b"GET /metrics HTTP/1.1\r\nHost: x\r\n":
            try:
                if sock.recv(1024) == b"":
                    break
            except TimeoutError:
                pass
            try:
                sock.send(bytes([byte]))
            except OSError:
                break
        else:
            pytest.fail("the server kept reading a trickle for the whole head")
        assert time.monotonic() - start < 1.0 + 2.0


def test_the_server_still_scrapes_after_dropping_idle_connections(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    served = serve(sim_source("demo")[0], 60.0, timeout_s=0.5)
    idle = [_connect(served.server.port) for _ in range(20)]
    try:
        for sock in idle:
            _closed_within(sock, 3.0)
    finally:
        for sock in idle:
            sock.close()
    with urllib.request.urlopen(served.url, timeout=5) as response:
        assert b"DCGM_FI_DEV_GPU_UTIL{" in response.read()


def _refused_within(sock: socket.socket, limit_s: float) -> float:
    """Seconds until the server answered ``sock`` 503 with Retry-After and closed it."""
    start = time.monotonic()
    sock.settimeout(limit_s)
    answer = b""
    try:
        while chunk := sock.recv(1024):
            answer += chunk
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for {limit_s} s: {answer!r}")
    assert answer.startswith(b"HTTP/1.0 503 Service Unavailable\r\n"), answer
    assert b"\r\nRetry-After: 1\r\n" in answer, answer
    return time.monotonic() - start


def test_past_the_waiting_limit_the_oldest_connection_is_refused_with_503(
    sim_source: SimFactory, serve: type[Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_http, "MAX_WAITING", 5)
    served = serve(sim_source("demo")[0], 60.0)  # the default timeout: 5 s
    idle = [_connect(served.server.port) for _ in range(6)]
    try:
        assert _refused_within(idle[0], 2.0) < 2.0
        with urllib.request.urlopen(served.url, timeout=5) as response:  # evicts idle[1]
            assert b"DCGM_FI_DEV_GPU_UTIL{" in response.read()
        _refused_within(idle[1], 2.0)
        idle[2].settimeout(0.2)
        with pytest.raises(TimeoutError):
            idle[2].recv(1)  # still open, still waiting
    finally:
        for sock in idle:
            sock.close()


def test_close_is_prompt_with_idle_connections_and_frees_the_port() -> None:
    before = set(threading.enumerate())
    server = MetricsServer(make_registry(SnapshotCollector()), "127.0.0.1", 0)
    port = server.port
    idle = [_connect(port) for _ in range(50)]
    try:
        for sock in idle[::2]:
            sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        time.sleep(0.2)  # let the server accept them all
        start = time.monotonic()
        server.close()
        assert time.monotonic() - start < 1.0
        for sock in idle:
            _closed_within(sock, 2.0)
        ours = set(threading.enumerate()) - before
        assert not [t for t in ours if t.name.startswith("gputop-http")]
    finally:
        for sock in idle:
            sock.close()
    again = MetricsServer(make_registry(SnapshotCollector()), "127.0.0.1", port)
    try:
        assert again.port == port
    finally:
        again.close()
