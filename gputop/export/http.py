"""The exporter's HTTP server: /metrics for many scrapers and for clients that misbehave.

prometheus_client's own server has a listen backlog of 5, a thread per connection kept forever, and
answers every path; this one does not (see :class:`MetricsServer`). It renders a
prometheus_client registry with prometheus_client's own encoders.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import queue
import re
import selectors
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import gzip_accepted

from gputop.errors import UsageError
from gputop.export.prom import choose_encoder  # dcgm's counters under their exact names
from gputop.export.web_config import WebConfig
from gputop.version import __version__

REQUEST_QUEUE_SIZE = 1024  # listen backlog (capped by net.core.somaxconn): prometheus_client has 5
DEFAULT_TIMEOUT_S = 5.0
WORKERS = 8
MAX_WAITING = 512  # connections still sending their request head
MAX_QUEUED = 512  # complete requests waiting for a worker
MAX_HEAD = 16 * 1024
RETRY_AFTER_S = 1  # told to a client refused for load: a scrape comes again soon anyway
# An answer the event loop sends itself (503, 431) is followed by FIN, and what the client still
# sends is read and dropped for this long before the close: closing with its request unread
# would reset the connection, and a reset destroys the answer before the client reads it.
LINGER_S = 1.0
MAX_LINGERING = 512
# method SP request-target SP HTTP-version (RFC 9112 section 3); LF alone is tolerated as the end
_REQUEST_LINE = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+ [\x21-\x7e]+ HTTP/(\d)\.\d\r?\n")
INDEX_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>gputop exporter</title></head>\n"
    b'<body><h1>gputop exporter</h1><p><a href="/metrics">/metrics</a></p></body></html>\n'
)


class MetricsServer:
    """/metrics over HTTP: an event-loop thread reads requests, a few worker threads answer.

    Built for a port that other hosts (and misbehaving clients) can reach:

    - The listen backlog is ``REQUEST_QUEUE_SIZE`` (1024), so a burst of scrapes waits in the
      kernel instead of being refused or timing out.
    - A connection costs no thread until its whole request head has arrived: one daemon thread
      reads all waiting connections with a selector. A connection that has not sent its head
      within ``timeout_s`` (default 5 s) is closed, idle or half-sent alike, and at most
      ``MAX_WAITING`` connections wait at once: past that the oldest is answered 503 with
      ``Retry-After`` and closed (or queued, if its whole request has come), so idle or
      slowloris clients can neither pile up threads nor delay a real scrape, and nobody is cut
      off without an answer.
    - ``WORKERS`` daemon threads answer complete requests in turn; an answer's write gets
      ``timeout_s`` in total. When ``MAX_QUEUED`` requests already wait for a worker, a new one
      gets 503 (with ``Retry-After``) at once.
    - GET or HEAD ``/metrics`` answers the metrics (``name[]`` filter, gzip and content type as
      prometheus_client does), ``/`` a page linking to it, any other path 404; other methods 405.
      A request line that is not ``METHOD TARGET HTTP/x.y`` gets 400, another major version 505:
      always with a status line (the standard library answers such lines without one).
      One request per connection (HTTP/1.0); nothing is logged.
    - With ``web`` (``--web-config-file``, :mod:`gputop.export.web_config`): TLS, basic auth
      (401 with ``WWW-Authenticate``), extra headers and a rate limit (429). The TLS handshake
      runs non-blocking in the event loop under the same deadline as the request head, so a
      client that never finishes it holds nothing but its place among ``MAX_WAITING``; a plain
      HTTP request to the TLS port gets 400 in plain text, as Go's server answers it.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        web: WebConfig | None = None,
    ) -> None:
        listener_class = _Listener6 if ":" in host else _Listener
        try:
            self._listener = listener_class((host, port), socketserver.BaseRequestHandler)
        except OSError as exc:
            raise UsageError(f"cannot listen on {_hostport(host, port)}: {_why(exc)}") from None
        self._registry = registry
        self._timeout_s = timeout_s
        self._web = web
        self._tls = web.tls if web is not None else None
        self._listener.socket.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._listener.socket, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        # Connections still sending their request head, oldest first (so also by deadline).
        self._waiting: dict[socket.socket, _Waiting] = {}
        # Connections answered by the loop, drained until the client closes (oldest first).
        self._lingering: dict[socket.socket, _Lingering] = {}
        self._jobs: queue.SimpleQueue[tuple[socket.socket, bytes] | None] = queue.SimpleQueue()
        self._busy: set[socket.socket] = set()  # being answered; close() aborts their writes
        self._lock = threading.Lock()
        self._stopping = False
        self._loop_thread = threading.Thread(target=self._loop, name="gputop-http", daemon=True)
        self._workers = [
            threading.Thread(target=self._work, name=f"gputop-http-{i}", daemon=True)
            for i in range(WORKERS)
        ]
        for thread in (self._loop_thread, *self._workers):
            thread.start()

    @property
    def server(self) -> socketserver.TCPServer:
        """The listening server (its ``server_address`` and socket tell the bound port)."""
        return self._listener

    @property
    def scheme(self) -> str:
        """ "https" with TLS, else "http"."""
        return "http" if self._tls is None else "https"

    @property
    def port(self) -> int:
        """The bound port (useful after asking for port 0)."""
        return int(self._listener.server_address[1])

    def close(self) -> None:
        """Stop serving, drop every open connection and release the port (within about 1 s)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._loop_thread.join(1.0)
        self._listener.server_close()
        while True:  # requests nobody has started answering: just close them
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].close()
        with self._lock:
            for conn in self._busy:  # a write to a slow reader fails now instead of at timeout
                with contextlib.suppress(OSError):
                    # socket's own shutdown: SSLSocket's would drop its TLS state under the
                    # worker that is writing through it
                    socket.socket.shutdown(conn, socket.SHUT_RDWR)
        for _ in self._workers:
            self._jobs.put(None)
        deadline = time.monotonic() + 0.5
        for thread in self._workers:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._wake_w.close()

    # The event loop: accept, read request heads, hand complete ones to the workers.

    def _loop(self) -> None:
        try:
            while not self._stopping:
                for key, _events in self._selector.select(self._next_timeout()):
                    if key.fileobj is self._listener.socket:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                    else:
                        self._ready(key.data)
                self._expire()
        finally:
            for waiting in list(self._waiting.values()):
                self._drop(waiting)
            for lingering in list(self._lingering.values()):
                self._close_lingering(lingering)
            self._selector.close()
            self._wake_r.close()
            self._listener.server_close()

    def _ready(self, pending: _Waiting | _Lingering) -> None:
        """A connection's event; skipped when it was dropped or answered earlier in the same
        batch of events (evicted by ``_accept``, say): its socket may be closed, or lingering."""
        if isinstance(pending, _Lingering):
            if self._lingering.get(pending.conn) is pending:
                self._drain(pending)
        elif self._waiting.get(pending.key) is pending:
            self._read(pending)

    def _next_timeout(self) -> float:
        deadlines = [0.5 + time.monotonic()]
        if self._waiting:
            deadlines.append(next(iter(self._waiting.values())).deadline)
        if self._lingering:
            deadlines.append(next(iter(self._lingering.values())).deadline)
        return max(0.0, min(deadlines) - time.monotonic())

    def _accept(self) -> None:
        for _ in range(64):  # a bounded batch, so reads and expiry still get their turn
            try:
                conn, _address = self._listener.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of file descriptors: free one, or let the others finish
                if self._lingering:
                    self._close_lingering(next(iter(self._lingering.values())))
                elif self._waiting:
                    self._evict(next(iter(self._waiting.values())))
                else:
                    time.sleep(0.05)
                return
            if len(self._waiting) >= MAX_WAITING:
                self._evict(next(iter(self._waiting.values())))
            conn.setblocking(False)
            stage = _Stage.HEAD if self._tls is None else _Stage.HELLO
            waiting = _Waiting(conn, conn, time.monotonic() + self._timeout_s, stage)
            self._waiting[conn] = waiting
            self._selector.register(conn, selectors.EVENT_READ, waiting)

    def _read(self, waiting: _Waiting) -> None:
        if waiting.stage is _Stage.HELLO and not self._start_tls(waiting):
            return
        if waiting.stage is _Stage.HANDSHAKE and not self._handshake(waiting):
            return
        chunk = _recv(waiting.conn)
        if chunk is None:
            return
        if not chunk:  # the client gave up
            self._drop(waiting)
            return
        waiting.head += chunk
        # TLS decrypts whole records: what is left of one waits in the SSL object, and the
        # socket will not be readable again for it.
        while (
            isinstance(waiting.conn, ssl.SSLSocket)
            and waiting.conn.pending()
            and len(waiting.head) <= MAX_HEAD
            and not _head_complete(waiting.head)
        ):
            waiting.head += _recv(waiting.conn) or b""
        if not _head_complete(waiting.head):
            if len(waiting.head) > MAX_HEAD:
                self._drop(waiting, _canned(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE))
            return
        self._forget(waiting)
        if self._jobs.qsize() >= MAX_QUEUED:
            self._drop(waiting, _SERVICE_UNAVAILABLE, forgotten=True)
            return
        self._jobs.put((waiting.conn, bytes(waiting.head)))

    def _start_tls(self, waiting: _Waiting) -> bool:
        """Peek at the first byte: a TLS handshake record starts the handshake (True), anything
        else is a plain HTTP client on the TLS port, answered 400 in plain text."""
        try:
            first = waiting.conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            first = b""
        if not first:
            self._drop(waiting)
            return False
        if first != b"\x16":  # TLS's record type "handshake"
            waiting.stage = _Stage.HEAD  # a plain-text conversation: it can be answered
            self._drop(waiting, _HTTP_TO_HTTPS)
            return False
        assert self._tls is not None
        # wrap_socket takes over the descriptor (the plain socket object is detached): the
        # selector is told of the new object; the key in _waiting stays the plain one.
        self._selector.unregister(waiting.conn)
        try:
            waiting.conn = self._tls.wrap_socket(
                waiting.conn, server_side=True, do_handshake_on_connect=False
            )
        except OSError:
            del self._waiting[waiting.key]
            waiting.conn.close()
            return False
        self._selector.register(waiting.conn, selectors.EVENT_READ, waiting)
        waiting.stage = _Stage.HANDSHAKE
        return True

    def _handshake(self, waiting: _Waiting) -> bool:
        """One step of the non-blocking handshake; True once it is done (and the client's
        certificate, if any, carries an allowed SAN)."""
        conn = waiting.conn
        assert isinstance(conn, ssl.SSLSocket)
        try:
            conn.do_handshake()
        except ssl.SSLWantReadError:
            self._selector.modify(conn, selectors.EVENT_READ, waiting)
            return False
        except ssl.SSLWantWriteError:
            self._selector.modify(conn, selectors.EVENT_WRITE, waiting)
            return False
        except OSError:  # a failed handshake (OpenSSL has sent its alert), or a reset
            self._drop(waiting)
            return False
        if self._web is not None and not self._web.san_allowed(conn.getpeercert()):
            self._drop(waiting)
            return False
        self._selector.modify(conn, selectors.EVENT_READ, waiting)
        waiting.stage = _Stage.HEAD
        return True

    def _evict(self, waiting: _Waiting) -> None:
        """Make room for a new connection: the oldest waiting one is read once more (its whole
        request may be there by now: then it is queued), else answered 503 and closed."""
        self._read(waiting)
        if self._waiting.get(waiting.key) is waiting:  # still waiting: refused for load
            self._drop(waiting, _SERVICE_UNAVAILABLE)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._waiting:
            oldest = next(iter(self._waiting.values()))
            if oldest.deadline > now:
                break
            self._drop(oldest)
        while self._lingering:
            done = next(iter(self._lingering.values()))
            if done.deadline > now:
                break
            self._close_lingering(done)

    def _forget(self, waiting: _Waiting) -> None:
        del self._waiting[waiting.key]
        self._selector.unregister(waiting.conn)

    def _drop(self, waiting: _Waiting, answer: bytes = b"", *, forgotten: bool = False) -> None:
        """Close a waiting connection; with ``answer``, send it first and linger (not before
        its TLS handshake is done: an HTTP answer cannot be sent then)."""
        if not forgotten:
            self._forget(waiting)
        conn = waiting.conn
        if not answer or waiting.stage is not _Stage.HEAD:
            conn.close()
            return
        try:  # a short answer fits the empty send buffer: never blocks
            conn.send(answer)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close()
            return
        if len(self._lingering) >= MAX_LINGERING:
            self._close_lingering(next(iter(self._lingering.values())))
        lingering = _Lingering(conn, time.monotonic() + LINGER_S)
        self._lingering[conn] = lingering
        self._selector.register(conn, selectors.EVENT_READ, lingering)

    def _drain(self, lingering: _Lingering) -> None:
        """Read and drop what an answered client still sends; close when it closes."""
        try:
            if lingering.conn.recv(65536):
                return
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            pass
        self._close_lingering(lingering)

    def _close_lingering(self, lingering: _Lingering) -> None:
        del self._lingering[lingering.conn]
        self._selector.unregister(lingering.conn)
        lingering.conn.close()

    # The workers: one complete request each, answered and closed.

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            conn, head = job
            with self._lock:
                self._busy.add(conn)
            try:
                self._answer(conn, head)
            except OSError:  # the client went away or read too slowly: its loss
                pass
            except Exception:  # noqa: BLE001 - a bug answering one request must not end a worker
                pass
            finally:
                with self._lock:
                    self._busy.discard(conn)
                conn.close()

    def _answer(self, conn: socket.socket, head: bytes) -> None:
        handler = _Handler(head, self._registry, self._web)
        handler.handle()
        _send_all(conn, handler.out.getvalue(), self._timeout_s)
        if handler.command not in ("GET", "HEAD"):
            _linger(conn)


class _Listener(socketserver.TCPServer):
    """Binds and listens only; MetricsServer runs its own loop on the socket."""

    request_queue_size = REQUEST_QUEUE_SIZE
    allow_reuse_address = True  # a restart binds again while old connections sit in TIME_WAIT


class _Listener6(_Listener):
    address_family = socket.AF_INET6


class _Stage(Enum):
    """Where a waiting connection is: its first byte (TLS only), the handshake, the head."""

    HELLO = "hello"
    HANDSHAKE = "handshake"
    HEAD = "head"


@dataclass(slots=True)
class _Waiting:
    """A connection whose request head has not fully arrived yet.

    ``key`` is the accepted socket, its key in ``MetricsServer._waiting`` for good; ``conn`` is
    what is read, the same socket or, once TLS starts, the SSLSocket that took it over.
    """

    key: socket.socket
    conn: socket.socket
    deadline: float
    stage: _Stage
    head: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class _Lingering:
    """A connection the event loop answered, drained until the client closes or ``deadline``."""

    conn: socket.socket
    deadline: float


class _Only:
    """The registry's families whose name or one of whose sample names (``x_total``) is asked."""

    def __init__(self, registry: CollectorRegistry, names: set[str]) -> None:
        self._registry = registry
        self._names = names

    def collect(self) -> Iterator[Metric]:
        for metric in self._registry.collect():
            if metric.name in self._names or any(s.name in self._names for s in metric.samples):
                yield metric


class _Handler(BaseHTTPRequestHandler):
    """Parses one buffered request head and writes the whole answer into ``wfile``.

    Runs without a socket (the worker sends ``wfile``'s bytes), so a slow client never holds a
    half-written answer in here.
    """

    server_version = f"gputop/{__version__}"
    # The stdlib's default, HTTP/0.9, answers a malformed request with no status line at all.
    default_request_version = "HTTP/1.0"

    def __init__(self, head: bytes, registry: CollectorRegistry, web: WebConfig | None) -> None:
        # No BaseRequestHandler.__init__: it would read a socket; MetricsServer calls handle().
        self.registry = registry
        self.web = web
        self.rfile = io.BytesIO(head)
        self.out = self.wfile = io.BytesIO()
        self.client_address = ("", 0)
        self.command = self.requestline = ""  # read by send_response's log line
        self.request_version = self.default_request_version

    def handle(self) -> None:
        self.close_connection = True
        self.raw_requestline = self.rfile.readline(MAX_HEAD + 1)
        for _ in range(2):  # RFC 9112 2.2: empty lines before the request line are ignored
            if self.raw_requestline not in (b"\r\n", b"\n"):
                break
            self.raw_requestline = self.rfile.readline(MAX_HEAD + 1)
        match = _REQUEST_LINE.fullmatch(self.raw_requestline)
        if match is None or match.group(1) != b"1":
            # Checked here, not by parse_request: it takes "GET /" for HTTP/0.9 (answered with
            # no status line) and puts the client's bytes in the status line.
            version = HTTPStatus.HTTP_VERSION_NOT_SUPPORTED
            self.send_error(HTTPStatus.BAD_REQUEST if match is None else version)
            return
        if not self.parse_request():  # it has answered (431, ...) itself
            return
        # In the toolkit's order (web/handler.go): the rate limit, then basic auth, on any path.
        web = self.web
        if web is not None and web.limiter is not None and not web.limiter.allow():
            self._send(HTTPStatus.TOO_MANY_REQUESTS, b"Too Many Requests\n")
            return
        if (
            web is not None
            and web.auth is not None
            and not web.auth.check(self.headers.get("Authorization"))
        ):
            # RFC 7617: realm is required; charset says the password is read as UTF-8
            challenge = 'Basic realm="gputop", charset="UTF-8"'
            body = b"Unauthorized\n"
            self._send(HTTPStatus.UNAUTHORIZED, body, headers={"WWW-Authenticate": challenge})
            return
        try:
            self._route()
        except Exception:  # noqa: BLE001 - a broken collector answers 500, the server lives on
            self.out = self.wfile = io.BytesIO()
            self._headers_buffer: list[bytes] = []
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, b"cannot render the metrics\n")

    def _route(self) -> None:
        if self.command not in ("GET", "HEAD"):
            body = b"only GET and HEAD\n"
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, body, headers={"Allow": "GET, HEAD"})
            return
        url = urlsplit(self.path)
        if url.path == "/metrics":
            self._metrics(parse_qs(url.query))
        elif url.path == "/":
            self._send(HTTPStatus.OK, INDEX_PAGE, "text/html; charset=utf-8")
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found; the metrics are at /metrics\n")

    def _metrics(self, params: dict[str, list[str]]) -> None:
        names = params.get("name[]")
        source = self.registry if names is None else _Only(self.registry, set(names))
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        body = encoder(source)
        headers = {}
        if gzip_accepted(self.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        self._send(HTTPStatus.OK, body, content_type, headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str = "text/plain; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        for name, value in self.web.headers if self.web is not None else ():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A plain answer with the status's own phrase: the stdlib's puts the client's bytes in
        its status line and an HTML page."""
        self.close_connection = True
        status = HTTPStatus(code)
        self._send(status, f"{status.phrase}\n".encode())

    def log_message(self, format: str, *args: object) -> None:
        """Log nothing: a scrape every few seconds would fill the journal."""


def _canned(status: HTTPStatus, headers: str = "") -> bytes:
    """A whole answer for the event loop to send without a handler (``headers``: more header
    lines, each ending in CRLF)."""
    body = f"{status.phrase}\n".encode()
    return (
        f"HTTP/1.0 {status.value} {status.phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n{headers}Connection: close\r\n\r\n"
    ).encode() + body


_SERVICE_UNAVAILABLE = _canned(HTTPStatus.SERVICE_UNAVAILABLE, f"Retry-After: {RETRY_AFTER_S}\r\n")
# What Go's net/http answers a plain request on a TLS port (so curl http:// says what is wrong).
_HTTP_TO_HTTPS = (
    b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
)


def _head_complete(head: bytes | bytearray) -> bool:
    return b"\r\n\r\n" in head or b"\n\n" in head


def _recv(conn: socket.socket) -> bytes | None:
    """What a non-blocking socket has (b"" when the client closed or failed), None for none yet."""
    try:
        return conn.recv(4096)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None
    except OSError:
        return b""


def _send_all(conn: socket.socket, data: bytes, timeout_s: float) -> None:
    """Send ``data`` within ``timeout_s`` in all; TimeoutError past it.

    A plain socket's sendall keeps one deadline for the whole (Python 3.5+); SSLSocket.sendall
    gives each of its writes the whole timeout, so here its pieces share one deadline.
    """
    if not isinstance(conn, ssl.SSLSocket):
        conn.settimeout(timeout_s)
        conn.sendall(data)
        return
    deadline = time.monotonic() + timeout_s
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client reads too slowly")
        conn.settimeout(left)
        sent = conn.send(view[: 1 << 16])
        view = view[sent:]


def _linger(conn: socket.socket) -> None:
    """Read what the client still sends (e.g. a POST body), briefly, before closing.

    Closing with unread data makes the kernel send a reset, which can destroy the answer
    before the client reads it.
    """
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(0.1)
        deadline = time.monotonic() + 0.25  # it holds a worker: short, the body is on its way
        read = 0
        while time.monotonic() < deadline and read < 1 << 20:
            chunk = conn.recv(65536)
            if not chunk:
                return
            read += len(chunk)


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _why(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "address already in use"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need root)"
    if exc.errno == errno.EADDRNOTAVAIL:
        return "no such address on this host"
    return exc.strerror or str(exc)
