"""--web-config-file, served: real TLS clients (Python's ssl, a real Prometheus) against
MetricsServer with TLS, basic auth, mutual TLS, headers and a rate limit, and a TLS handshake
that never ends beside a burst of scrapes."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge

from gputop.engine.sampler import Sampler
from gputop.export.http import MetricsServer
from gputop.export.prom import SnapshotCollector, make_registry
from gputop.export.web_config import WebConfig, load_web_config
from tests.conftest import SimFactory
from tests.export.conftest import (
    check_running,
    prometheus_binary,
    prometheus_on,
)
from tests.export.test_web_config import HASH, PASSWORD, Certs, basic, certs, write_config

__all__ = ["certs"]  # the fixture, imported to be used here

Answer = tuple[int, dict[str, str], bytes]


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Gauge("gputop_test_value", "a value", registry=registry).set(42)
    return registry


@pytest.fixture
def served() -> Iterator[list[MetricsServer]]:
    opened: list[MetricsServer] = []
    yield opened
    for server in opened:
        server.close()


def _serve(opened: list[MetricsServer], web: WebConfig, timeout_s: float = 5.0) -> MetricsServer:
    server = MetricsServer(_registry(), "127.0.0.1", 0, timeout_s=timeout_s, web=web)
    opened.append(server)
    return server


def _client(certs: Certs, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.cert))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def _get(url: str, context: ssl.SSLContext | None = None, auth: str | None = None) -> Answer:
    request = urllib.request.Request(url)
    if auth is not None:
        request.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _tls_config(certs: Certs, extra: str = "") -> WebConfig:
    text = (
        f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n"
        f"basic_auth_users:\n  alice: '{HASH}'\n"
        "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n" + extra
    )
    return load_web_config(write_config(certs.folder, text, "served.yml"))


def test_a_scrape_over_tls_needs_the_password(certs: Certs, served: list[MetricsServer]) -> None:
    server = _serve(served, _tls_config(certs))
    assert server.scheme == "https"
    url = f"https://localhost:{server.port}/metrics"
    context = _client(certs)
    status, headers, body = _get(url, context)
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Basic ")
    assert headers["X-Content-Type-Options"] == "nosniff"  # on every answer, a 401 too
    assert b"gputop_test_value" not in body
    assert _get(url, context, basic("alice", "wrong"))[0] == 401
    assert _get(url, context, basic("mallory", PASSWORD))[0] == 401
    status, headers, body = _get(url, context, basic("alice", PASSWORD))
    assert status == 200
    assert b"gputop_test_value 42.0" in body
    assert headers["X-Content-Type-Options"] == "nosniff"
    # every path is behind the password, as with the toolkit
    assert _get(f"https://localhost:{server.port}/", context)[0] == 401


def test_a_client_that_does_not_trust_the_certificate_gets_nothing(
    certs: Certs, served: list[MetricsServer]
) -> None:
    server = _serve(served, _tls_config(certs))
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        _get(f"https://localhost:{server.port}/metrics", ssl.create_default_context())


def test_plain_http_on_the_tls_port_is_told_so(certs: Certs, served: list[MetricsServer]) -> None:
    server = _serve(served, _tls_config(certs))
    status, _headers, body = _get(f"http://127.0.0.1:{server.port}/metrics")
    assert status == 400
    assert body == b"Client sent an HTTP request to an HTTPS server.\n"


def test_basic_auth_without_tls(certs: Certs, served: list[MetricsServer]) -> None:
    text = f"basic_auth_users:\n  alice: '{HASH}'\n"
    server = _serve(served, load_web_config(write_config(certs.folder, text, "auth.yml")))
    assert server.scheme == "http"
    url = f"http://127.0.0.1:{server.port}/metrics"
    assert _get(url)[0] == 401
    assert _get(url, auth=basic("alice", PASSWORD))[0] == 200


def test_mutual_tls_lets_in_only_a_verified_certificate_with_an_allowed_san(
    certs: Certs, served: list[MetricsServer]
) -> None:
    extra = (
        "  client_auth_type: RequireAndVerifyClientCert\n"
        f"  client_ca_file: {certs.client_cas}\n  client_allowed_sans: [scraper.example]\n"
    )
    text = f"tls_server_config:\n  cert_file: {certs.cert}\n  key_file: {certs.key}\n{extra}"
    server = _serve(served, load_web_config(write_config(certs.folder, text, "mtls.yml")))
    url = f"https://localhost:{server.port}/metrics"
    status, _headers, body = _get(url, _client(certs, certs.client, certs.client_key))
    assert status == 200
    assert b"gputop_test_value" in body
    with pytest.raises(OSError):  # no client certificate: the handshake fails
        _get(url, _client(certs))
    with pytest.raises(OSError):  # trusted, but its SAN is not allowed: closed unanswered
        _get(url, _client(certs, certs.intruder, certs.intruder_key))


def test_past_the_rate_limit_the_answer_is_429(certs: Certs, served: list[MetricsServer]) -> None:
    text = "rate_limit:\n  interval: 1h\n  burst: 2\n"
    server = _serve(served, load_web_config(write_config(certs.folder, text, "limit.yml")))
    url = f"http://127.0.0.1:{server.port}/metrics"
    assert [_get(url)[0] for _ in range(3)] == [200, 200, 429]


def test_a_handshake_that_never_ends_blocks_no_scrape_and_is_dropped(
    certs: Certs, served: list[MetricsServer]
) -> None:
    # A long timeout: a scrape waiting behind the stalled clients would take 30 s.
    server = _serve(served, _tls_config(certs), timeout_s=30.0)
    stalled = []
    for i in range(60):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        if i % 3 == 1:
            sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01")  # a ClientHello's first bytes
        elif i % 3 == 2:  # a whole handshake started by a client that then never answers
            sock.sendall(_client_hello(server.port))
        stalled.append(sock)
    try:
        results: list[int] = []
        errors: list[BaseException] = []
        url = f"https://localhost:{server.port}/metrics"
        context = _client(certs)

        def scrape() -> None:
            try:
                results.append(_get(url, context, basic("alice", PASSWORD))[0])
            except OSError as exc:
                errors.append(exc)

        start = time.monotonic()
        threads = [threading.Thread(target=scrape, daemon=True) for _ in range(40)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(40)
        elapsed = time.monotonic() - start
        assert not errors, errors[:3]
        assert results == [200] * 40
        assert elapsed < 15, f"the scrapes took {elapsed:.1f} s beside stalled handshakes"
    finally:
        for sock in stalled:
            sock.close()
    # ... and with a short timeout, a stalled handshake is closed
    quick = _serve(served, _tls_config(certs), timeout_s=1.0)
    sock = socket.create_connection(("127.0.0.1", quick.port), timeout=10)
    with sock:
        sock.sendall(b"\x16\x03\x01")
        sock.settimeout(10)
        start = time.monotonic()
        assert _closed(sock)
        assert time.monotonic() - start < 5


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (EOF or reset) before its timeout."""
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def _client_hello(port: int) -> bytes:
    """The bytes a real client sends first (its ClientHello), taken from a memory BIO."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_prometheus_scrapes_over_tls_with_basic_auth(
    certs: Certs, sim_source: SimFactory, served: list[MetricsServer], tmp_path: Path
) -> None:
    binary = prometheus_binary("the TLS and basic auth tests with Python's client")
    sampler = Sampler(sim_source("demo")[0], interval_s=1.0, enrich=False)
    sampler.start()
    try:
        registry = make_registry(SnapshotCollector(sampler))
        server = MetricsServer(registry, "127.0.0.1", 0, web=_tls_config(certs))
        served.append(server)
        target = f"127.0.0.1:{server.port}"

        def job(name: str, password: str) -> str:
            return (
                f"  - job_name: {name}\n    scheme: https\n"
                f"    tls_config:\n      ca_file: {certs.cert}\n"
                f"    basic_auth:\n      username: alice\n      password: '{password}'\n"
                f"    static_configs:\n      - targets: ['{target}']\n"
            )

        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n"
            + job("right", PASSWORD)
            + job("wrong", "not the password")
        )
        with prometheus_on(binary, tmp_path, config) as (base, prometheus):
            deadline = time.monotonic() + 30
            while True:
                check_running(prometheus, tmp_path)
                up = {s["metric"]["job"]: s["value"][1] for s in _query(base, "up")}
                gpus = _query(base, 'DCGM_FI_DEV_GPU_UTIL{job="right"}')
                if up.get("right") == "1" and up.get("wrong") == "0" and gpus:
                    break
                assert time.monotonic() < deadline, f"up: {up}, GPU series: {len(gpus)}"
                time.sleep(0.5)
            targets = json.loads(_http(f"{base}/api/v1/targets"))["data"]["activeTargets"]
            errors = {t["labels"]["job"]: t["lastError"] for t in targets}
            assert "401" in errors["wrong"], errors
    finally:
        sampler.stop()


def _http(url: str) -> str:
    with urllib.request.urlopen(url, timeout=2) as response:
        text: str = response.read().decode()
    return text


def _query(base: str, promql: str) -> list[dict[str, object]]:
    try:
        reply = json.loads(_http(f"{base}/api/v1/query?query={urllib.parse.quote(promql)}"))
    except OSError:  # not up yet
        return []
    result: list[dict[str, object]] = reply["data"]["result"]
    return result


def test_a_request_head_longer_than_one_read_is_read_whole_over_tls(
    certs: Certs, served: list[MetricsServer]
) -> None:
    # One TLS record carries it all: the part past the first read waits decrypted in the SSL
    # object, with nothing left to read on the socket to wake the event loop.
    server = _serve(served, _tls_config(certs), timeout_s=30.0)
    request = urllib.request.Request(f"https://localhost:{server.port}/metrics")
    request.add_header("Authorization", basic("alice", PASSWORD))
    request.add_header("X-Padding", "p" * 9000)
    start = time.monotonic()
    with urllib.request.urlopen(request, context=_client(certs), timeout=20) as response:
        assert response.status == 200
    assert time.monotonic() - start < 10
