"""The /metrics server at its edges: past its connection caps every client gets an answer (the
metrics, or 503 with Retry-After), never a silent close; a request line that is not HTTP gets
a 400 (505 for another major version) with a real status line, and the server serves on."""

from __future__ import annotations

import selectors
import socket
import time
import urllib.request

import pytest

from gputop.export import http as export_http
from tests.conftest import SimFactory
from tests.export.conftest import Served

REQUEST = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
ROUNDS = 6


def _read_all(socks: list[socket.socket], limit_s: float) -> list[bytes]:
    """Everything each socket receives until the server closes it (all read at once)."""
    answers = [b""] * len(socks)
    with selectors.DefaultSelector() as selector:
        for i, sock in enumerate(socks):
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, i)
        deadline = time.monotonic() + limit_s
        while selector.get_map():
            left = deadline - time.monotonic()
            assert left > 0, f"{len(selector.get_map())} connections still open after {limit_s} s"
            for key, _ in selector.select(min(left, 1.0)):
                try:
                    chunk = socks[key.data].recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionResetError:
                    chunk = b""
                if chunk:
                    answers[key.data] += chunk
                else:
                    selector.unregister(key.fileobj)
    return answers


def _status(answer: bytes) -> bytes:
    return answer.split(b"\r\n", 1)[0]


def test_past_the_caps_every_connection_gets_the_metrics_or_a_503(
    sim_source: SimFactory, serve: type[Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle connections fill the waiting cap, then a burst of real scrapes arrives all at once:
    each of them, and each idle one pushed out, gets an answer; the server serves on after.
    Several rounds: the event loop died (now and then) of an event for a connection it had just
    evicted."""
    monkeypatch.setattr(export_http, "MAX_WAITING", 16)
    monkeypatch.setattr(export_http, "MAX_QUEUED", 16)
    served = serve(sim_source("demo")[0], 60.0, timeout_s=30.0)
    for _ in range(ROUNDS):
        _burst_past_the_caps(served.server.port)
    with urllib.request.urlopen(served.url, timeout=5) as response:
        assert b"DCGM_FI_DEV_GPU_UTIL{" in response.read()


def _burst_past_the_caps(port: int) -> None:
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(40)]
    burst = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(300)]
    try:
        for sock in burst:
            sock.sendall(REQUEST)
        answers = _read_all(burst, 30.0)
        statuses = [_status(a) for a in answers]
        ok = [a for a in answers if _status(a) == b"HTTP/1.0 200 OK"]
        refused = [a for a in answers if _status(a) == b"HTTP/1.0 503 Service Unavailable"]
        assert len(ok) + len(refused) == len(burst), sorted(set(statuses))
        assert ok, "no scrape got through"
        assert all(b"DCGM_FI_DEV_GPU_UTIL{" in a for a in ok)
        assert all(b"\r\nRetry-After: 1\r\n" in a for a in refused)
        # The idle ones were pushed out to make room: each told 503, none cut off silently
        # (the last few still waiting, within their 30 s, are closed by the test).
        for sock in idle:
            sock.settimeout(0.05)
        pushed: list[bytes | None] = []
        for sock in idle:
            try:
                pushed.append(sock.recv(4096))
            except TimeoutError:
                pushed.append(None)
        answered = [a for a in pushed if a is not None]
        assert len(answered) >= len(idle) - export_http.MAX_WAITING
        assert all(_status(a) == b"HTTP/1.0 503 Service Unavailable" for a in answered), answered
    finally:
        for sock in idle + burst:
            sock.close()


def test_a_refused_client_still_sending_is_not_reset(
    sim_source: SimFactory, serve: type[Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After its 503 the server half-closes and reads on for a while: a client still sending
    its request is not answered with a reset (which can destroy the 503 before it is read)."""
    monkeypatch.setattr(export_http, "MAX_WAITING", 1)
    served = serve(sim_source("demo")[0], 60.0, timeout_s=30.0)
    port = served.server.port
    with socket.create_connection(("127.0.0.1", port), timeout=10) as refused:
        refused.sendall(b"GET /metrics HTTP/1.1\r\n")  # half a head: it waits
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", port), timeout=10):  # pushes it out
            answer = b""
            while chunk := refused.recv(4096):  # the 503, then the server's FIN
                answer += chunk
            assert _status(answer) == b"HTTP/1.0 503 Service Unavailable"
            for _ in range(3):  # the rest of its request, late: read and dropped
                refused.sendall(b"X-Late: header\r\n")
                time.sleep(0.1)
            assert refused.recv(4096) == b""  # a clean end, no ConnectionResetError


@pytest.mark.parametrize(
    ("line", "status"),
    [
        (b"garbage\r\n", b"400 Bad Request"),
        (b"\x00\xff\x1b[2J<script>\r\n", b"400 Bad Request"),
        (b"GET /metrics\r\n", b"400 Bad Request"),  # HTTP/0.9: answered with no status line
        (b"GET /metrics HTTP/1.1 extra\r\n", b"400 Bad Request"),
        (b"GET  /metrics HTTP/1.1\r\n", b"400 Bad Request"),
        (b"GET /metrics HTTP/1.x\r\n", b"400 Bad Request"),
        (b"GET /metrics http/1.1\r\n", b"400 Bad Request"),
        (b"\r\n", b"400 Bad Request"),
        (b"GET /metrics HTTP/2.0\r\n", b"505 HTTP Version Not Supported"),
        (b"GET /metrics HTTP/0.9\r\n", b"505 HTTP Version Not Supported"),
    ],
)
def test_a_malformed_request_line_gets_a_status_line(
    sim_source: SimFactory, serve: type[Served], line: bytes, status: bytes
) -> None:
    served = serve(sim_source("demo")[0], 60.0)
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=10) as sock:
        sock.sendall(line + b"Host: x\r\n\r\n")
        (answer,) = _read_all([sock], 10.0)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert _status(answer) == b"HTTP/1.0 " + status, answer
    assert body == status.split(b" ", 1)[1] + b"\n"
    assert f"\r\nContent-Length: {len(body)}\r\n".encode() in head + b"\r\n"
    assert b"garbage" not in answer and b"<script>" not in answer and b"\x1b" not in answer


def test_the_server_serves_on_after_many_malformed_requests(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    """More bad requests than workers: none of them may end a worker."""
    served = serve(sim_source("demo")[0], 60.0)
    socks = [
        socket.create_connection(("127.0.0.1", served.server.port), timeout=10)
        for _ in range(3 * export_http.WORKERS)
    ]
    try:
        for sock in socks:
            sock.sendall(b"GET /\r\n\r\n")
        answers = _read_all(socks, 10.0)
    finally:
        for sock in socks:
            sock.close()
    assert {_status(a) for a in answers} == {b"HTTP/1.0 400 Bad Request"}
    with urllib.request.urlopen(served.url, timeout=5) as response:
        assert b"DCGM_FI_DEV_GPU_UTIL{" in response.read()


def test_an_empty_line_before_the_request_is_ignored(
    sim_source: SimFactory, serve: type[Served]
) -> None:
    """RFC 9112 2.2: a server should ignore at least one empty line before the request line."""
    served = serve(sim_source("demo")[0], 60.0)
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=10) as sock:
        sock.sendall(b"\r\n" + REQUEST)
        (answer,) = _read_all([sock], 10.0)
    assert _status(answer) == b"HTTP/1.0 200 OK"
