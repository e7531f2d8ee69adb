"""A fake Prometheus on loopback that answers as a hostile one would: label values full of markup
and terminal escapes, numbers no GPU can have, error texts that retitle the terminal, JSON nested
100,000 deep, bodies without end, and answers dripped a byte a second.

A real HTTP server in a thread (the client under test speaks real HTTP to it); what it answers is
one ``respond(request)`` function, made by the helpers below.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gputop.fleet.model import FREE_MARK, HISTORY_QUERIES, QUERIES, USED_BY_UUID

# Query text -> the model's name for it (the fake answers by name).
QUERY_NAMES = {promql: name for name, promql in QUERIES.items()} | {USED_BY_UUID: "used_by_uuid"}
HISTORY_NAMES = {promql: f"history_{name}" for name, promql in HISTORY_QUERIES.items()}
PROCESSES = "processes"  # any query for gputop_process_gpu_memory_bytes

# A series as the fake serves it: its labels (any JSON: hostile ones are not always strings)
# and its value as Prometheus writes it (a string; any JSON when hostile).
FakeSeries = tuple[Mapping[str, Any], Any]
FakeRange = tuple[Mapping[str, Any], list[tuple[Any, Any]]]  # labels, [(time, value text)]


@dataclass
class Request:
    """One GET the fake received: the API asked (``query``, ``query_range``), the PromQL, and
    the handler to answer on."""

    api: str
    promql: str
    name: str  # the model's name for the query ("" when unknown)
    handler: http.server.BaseHTTPRequestHandler
    server: HostilePrometheus

    def write(self, data: bytes) -> None:
        self.handler.wfile.write(data)
        self.handler.wfile.flush()
        self.server.sent_bytes += len(data)


@dataclass
class HostilePrometheus:
    """The running fake: its URL, what it was asked, and how many body bytes it got out."""

    url: str = ""
    asked: list[str] = field(default_factory=list)
    sent_bytes: int = 0
    closing: threading.Event = field(default_factory=threading.Event)


Respond = Callable[[Request], None]


@contextlib.contextmanager
def hostile_prometheus(respond: Respond) -> Iterator[HostilePrometheus]:
    """Serve ``respond`` on a free loopback port until the block ends."""
    fake = HostilePrometheus()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            parts = urllib.parse.urlsplit(self.path)
            promql = urllib.parse.parse_qs(parts.query).get("query", [""])[0]
            name = QUERY_NAMES.get(promql) or HISTORY_NAMES.get(promql) or ""
            if promql.startswith("gputop_process_gpu_memory_bytes"):
                name = PROCESSES
            fake.asked.append(promql)
            request = Request(parts.path.rsplit("/", 1)[-1], promql, name, self, fake)
            with contextlib.suppress(OSError):  # the client hung up: what we test, often
                respond(request)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.closing.set()  # ends drips and endless bodies
        server.shutdown()
        server.server_close()


def head(request: Request, code: int, length: int | None, content_type: str) -> None:
    h = request.handler
    h.send_response(code)
    h.send_header("Content-Type", content_type)
    if length is not None:
        h.send_header("Content-Length", str(length))
    h.end_headers()
    h.wfile.flush()


def reply(request: Request, code: int, body: bytes, content_type: str = "application/json") -> None:
    head(request, code, len(body), content_type)
    request.write(body)


def vector(series: list[FakeSeries], at: Any = None) -> bytes:
    """A successful instant-query answer (every sample at ``at``: now unless told)."""
    stamp = time.time() if at is None else at
    result = [{"metric": labels, "value": [stamp, value]} for labels, value in series]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


def matrix(series: list[FakeRange]) -> bytes:
    result = [{"metric": labels, "values": points} for labels, points in series]
    return json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ).encode()


def fleet_answers(
    by_name: Mapping[str, list[FakeSeries]],
    history: Mapping[str, list[FakeRange]] | None = None,
    at: Any = None,
) -> Respond:
    """Answer each query the fleet asks from ``by_name`` (the model's query names, plus
    ``used_by_uuid``, ``processes``, and ``history_util``/``history_memory`` in ``history``);
    anything else gets an empty vector. ``free`` comes with the memory queries' answers, marked
    as Prometheus marks it there."""
    free = [
        ({**labels, FREE_MARK: "free"} if isinstance(labels, dict) else labels, value)
        for labels, value in by_name.get("free", [])
    ]

    def respond(request: Request) -> None:
        if request.api == "query_range":
            reply(request, 200, matrix(list((history or {}).get(request.name, []))))
        else:
            series = list(by_name.get(request.name, []))
            if request.name in ("used", "used_by_uuid"):
                series += free
            reply(request, 200, vector(series, at))

    return respond


def error_body(code: int, text: str) -> Respond:
    """Every query fails with Prometheus's error JSON carrying ``text``."""
    body = json.dumps({"status": "error", "errorType": "bad_data", "error": text}).encode()
    return lambda request: reply(request, code, body)


def nested(depth: int, code: int = 200) -> Respond:
    """A JSON body ``depth`` arrays deep, inside Prometheus's envelope."""
    body = (
        b'{"status":"success","data":{"resultType":"vector","result":'
        + b"[" * depth
        + b"]" * depth
        + b"}}"
    )
    return lambda request: reply(request, code, body)


def endless(chunk_bytes: int = 64 * 1024, declared: int | None = None) -> Respond:
    """A body that never ends (``declared``: the Content-Length it claims, else none)."""
    chunk = b" " * chunk_bytes

    def respond(request: Request) -> None:
        head(request, 200, declared, "application/json")
        while not request.server.closing.is_set():
            request.write(chunk)

    return respond


def drip(body: bytes, *, whole_head: bool, every_s: float = 1.0) -> Respond:
    """``body`` a byte every ``every_s``: after its whole head at once, or its head too."""

    def respond(request: Request) -> None:
        status = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
        data = status + b"Content-Length: %d\r\n\r\n" % len(body)
        if whole_head:
            request.write(data)
            data = body
        else:
            data += body
        for byte in data:
            if request.server.closing.wait(every_s):
                return
            request.write(bytes([byte]))

    return respond
