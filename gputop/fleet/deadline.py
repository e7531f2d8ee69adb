"""One HTTP request's overall deadline: connect, TLS, headers and the whole body together.

urllib's timeout is per socket operation, so a server dripping a byte a second never trips it
(it kept ``fleet --once --timeout 2`` for 68 s). Here each request gets a :class:`Watchdog`: its
connections are made through it, and when the deadline passes it shuts their sockets down, which
ends any read or handshake in progress at once. urllib still does the rest (proxies from the
environment, TLS, HTTP errors), through :func:`opener`.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.request
from typing import Any


class Watchdog:
    """Shuts down every socket made through :meth:`connect` once ``deadline`` (monotonic) passes.

    ``fired`` says it did: whatever error the request then ends with, the cause is the deadline.
    """

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []
        self._timer: threading.Timer | None = None

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def connect(
        self,
        address: tuple[str, int],
        timeout: float | None = None,
        source_address: tuple[str, int] | None = None,
    ) -> socket.socket:
        """``socket.create_connection``, watched (http.client's ``_create_connection``)."""
        left = self.left_s()
        if left <= 0:
            self.fired = True
            raise TimeoutError("deadline passed")
        limit = left if timeout is None else min(timeout, left)
        sock = socket.create_connection(address, limit, source_address)
        self._watch(sock)
        return sock

    def _watch(self, sock: socket.socket) -> None:
        with self._lock:
            # A duplicate, so that shutting it down still works after TLS wraps (and detaches)
            # the socket http.client got: shutdown acts on the connection, not on one descriptor.
            self._watched.append(sock.dup())
            if self._timer is None:
                self._timer = threading.Timer(max(0.0, self.left_s()), self._fire)
                self._timer.name = "gputop-fleet-deadline"
                self._timer.daemon = True
                self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._watched:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Stop watching (the request is over) and release the duplicates."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            for sock in self._watched:
                sock.close()
            self._watched.clear()


def _connection(base: type[http.client.HTTPConnection], watchdog: Watchdog) -> Any:
    """``base`` whose connections are made (and watched) by ``watchdog``."""

    def make(*args: Any, **kwargs: Any) -> http.client.HTTPConnection:
        conn = base(*args, **kwargs)
        conn._create_connection = watchdog.connect  # type: ignore[attr-defined]
        return conn

    return make


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, watchdog: Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_connection(http.client.HTTPConnection, self._watchdog), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: Watchdog, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self._watchdog = watchdog
        self._tls = context

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        connection = _connection(http.client.HTTPSConnection, self._watchdog)
        return self.do_open(connection, req, context=self._tls)


def opener(
    watchdog: Watchdog, tls: ssl.SSLContext | None, *handlers: urllib.request.BaseHandler
) -> urllib.request.OpenerDirector:
    """A urllib opener whose HTTP connections, and HTTPS ones with ``tls`` (None: plain HTTP
    only), ``watchdog`` watches; plus ``handlers``."""
    watched: list[urllib.request.BaseHandler] = [_HTTP(watchdog)]
    if tls is not None:
        watched.append(_HTTPS(watchdog, tls))
    return urllib.request.build_opener(*handlers, *watched)
