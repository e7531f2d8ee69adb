"""The web server of `gputop web` and `gputop fleet --web`: aiohttp, and textual-serve's sessions.

Each browser connection (a websocket) runs one dashboard process with Textual's web driver,
started by textual-serve's ``AppService``; its keys and frames travel on that websocket, and
textual-serve's page (xterm.js) draws them. Around that, what textual-serve's own server does
not do:

- every request needs the token: ``?token=`` once (answered by a redirect that sets an HttpOnly,
  SameSite=Strict cookie, so the token leaves the address bar and no other site's page can use
  it), then the cookie; compared in constant time; otherwise 403;
- a websocket whose Origin is not this page's is refused (403), and at most
  :data:`MAX_SESSIONS` run at once (503);
- whatever a browser sends is checked before use (a message that is not what the page sends is
  dropped), and every answer says: no caching, no referrer, no framing, scripts from here only;
- the session's command is a fixed shell line (textual-serve runs it with a shell): the
  dashboard's arguments travel in the environment (:data:`ARGV_ENV`) as JSON, never through a
  shell.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TypeGuard
from urllib.parse import urlsplit

import textual_serve
from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from gputop.exits import EXIT_OK, EXIT_SIGNALS, handling, signal_exit
from gputop.ui.web import ARGV_ENV
from gputop.ui.web.token import token_matches

# What a session runs: gputop's command line, its arguments read from ARGV_ENV (cli.web_session).
SESSION_CODE = "from gputop.cli import web_session; raise SystemExit(web_session())"
STATIC = Path(textual_serve.__file__).resolve().parent / "static"
MAX_SESSIONS = 8  # each is a dashboard process (and its driver process): a bound on the box's load
MAX_MESSAGE_BYTES = 64 * 1024  # a key press or a paste; not megabytes
MAX_CELLS = 1000  # a terminal's width or height, in cells
SHUTDOWN_S = 5.0  # sessions get this long to quit when the server stops
FORBIDDEN = "gputop web: this needs the token: open the URL gputop web printed\n"

SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",  # the first address holds the token
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # textual-serve's page inserts its styles at run time ('unsafe-inline' for styles only).
    "Content-Security-Policy": (
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
}

# textual-serve's page, without its web fonts from Google (the box may have no way out, and the
# page would tell Google who looks at it) and with the websocket's address set by a script of
# ours from the page's own address (a Host header is not written into the page).
PAGE = """<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8">
    <title>{title}</title>
    <link rel="stylesheet" href="/static/css/xterm.css">
    <style>
      @font-face {{
        font-family: "Roboto Mono";
        src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf");
      }}
      body {{ background: #0c181f; margin: 0; }}
      .closed-dialog {{ display: none; }}
      body.-closed .closed-dialog {{
        display: flex; position: absolute; width: 100vw; height: 100vh; z-index: 10;
        align-items: center; justify-content: center; color: #eee;
        font-family: "Roboto Mono", monospace;
      }}
      #start {{ display: none; }}
    </style>
    <script src="/gputop-web.js"></script>
    <script src="/static/js/textual.js"></script>
  </head>
  <body>
    <div class="closed-dialog">Session ended: reload the page for a new one.</div>
    <button id="start" type="button"></button>
    <div id="terminal" class="textual-terminal" data-font-size="16"></div>
  </body>
</html>
"""
SCRIPT = """document.addEventListener("DOMContentLoaded", function () {
  var scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  document.getElementById("terminal").dataset.sessionWebsocketUrl =
    scheme + "//" + window.location.host + "/ws";
});
"""


def session_command() -> str:
    """The shell line textual-serve runs per session: nothing in it comes from a user."""
    return f"exec {shlex.quote(sys.executable)} -c {shlex.quote(SESSION_CODE)}"


@dataclass(slots=True)
class WebServer:
    """The server: ``argv`` is the gputop command line each session runs (without "gputop")."""

    argv: Sequence[str]
    token: str
    port: int
    title: str = "gputop"
    command: str = field(default_factory=session_command)
    live: set[web.WebSocketResponse] = field(default_factory=set)
    downloads: DownloadManager = field(default_factory=DownloadManager)

    @property
    def cookie_name(self) -> str:
        # Browsers keep cookies per host, not per port: one per port, so that two servers on
        # one host do not overwrite each other's.
        return f"gputop_web_{self.port}"

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate], client_max_size=MAX_MESSAGE_BYTES)
        app.on_response_prepare.append(_secure)
        app.add_routes(
            [
                web.get("/", self._page),
                web.get("/gputop-web.js", _script),
                web.get("/ws", self._websocket),
                web.static("/static", STATIC, show_index=False, follow_symlinks=False),
            ]
        )
        return app

    @web.middleware
    async def _gate(
        self,
        request: web.Request,
        handler: Callable[[web.Request], object],
    ) -> web.StreamResponse:
        """The token, or 403; from the address (once: then the cookie) or the cookie."""
        if not token_matches(request.cookies.get(self.cookie_name), self.token):
            if not token_matches(request.query.get("token"), self.token):
                return web.Response(status=403, text=FORBIDDEN)
            if request.path == "/":
                # Swap the token in the address for a cookie that only this site's pages send.
                answer = web.HTTPSeeOther("/")
                answer.set_cookie(
                    self.cookie_name, self.token, path="/", httponly=True, samesite="Strict"
                )
                return answer
        elif request.path == "/" and request.query_string:
            # The page reads its own query (ping=, delay=): it never gets one.
            return web.HTTPSeeOther("/")
        response = await handler(request)  # type: ignore[misc]
        assert isinstance(response, web.StreamResponse)
        return response

    async def _page(self, _request: web.Request) -> web.Response:
        title = self.title.replace("&", "&amp;").replace("<", "&lt;")
        return web.Response(text=PAGE.format(title=title), content_type="text/html")

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        """One session: a dashboard process, its frames out and the browser's keys in."""
        if not _same_origin(request):
            return web.Response(status=403, text="gputop web: a page of another site\n")
        if len(self.live) >= MAX_SESSIONS:
            return web.Response(status=503, text=f"gputop web: {MAX_SESSIONS} sessions already\n")
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_MESSAGE_BYTES)
        width = _cells(request.query.get("width"), 80)
        height = _cells(request.query.get("height"), 24)
        self.live.add(websocket)
        try:
            await websocket.prepare(request)

            async def close() -> None:
                await websocket.close()

            service = AppService(
                self.command,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=close,
                download_manager=self.downloads,
            )
            await service.start(width, height)
            try:
                await _relay(websocket, service)
            finally:
                await service.stop()
        finally:
            self.live.discard(websocket)
        return websocket

    def serve(self, sock: socket.socket, announce: Callable[[], None]) -> int:
        """Serve on the bound ``sock`` until SIGTERM (0), SIGHUP (129) or SIGINT (130);
        ``announce`` is called once the server answers."""
        received: list[int] = []
        wakers: list[Callable[[], None]] = []

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            if not received:
                received.append(signum)
                for wake in wakers:
                    wake()

        async def until_a_signal() -> None:
            loop, stopped = asyncio.get_running_loop(), asyncio.Event()

            def wake() -> None:
                loop.call_soon_threadsafe(stopped.set)  # from a signal handler: thread-safe only

            wakers.append(wake)
            if received:  # a signal came before the loop ran
                stopped.set()
            await self.run(sock, announce, stopped)

        with handling(EXIT_SIGNALS, on_signal):
            asyncio.run(until_a_signal())
        if not received or received[0] == EXIT_SIGNALS[0]:  # SIGTERM: stopped, as a service is
            return EXIT_OK
        return signal_exit(received[0])

    async def run(
        self, sock: socket.socket, announce: Callable[[], None], stopped: asyncio.Event
    ) -> None:
        """Serve on ``sock`` until ``stopped`` is set; then each session quits, as with q."""
        os.environ[ARGV_ENV] = json.dumps(list(self.argv))  # each session's environment
        runner = web.AppRunner(self.make_app(), access_log=None, shutdown_timeout=SHUTDOWN_S)
        await runner.setup()
        try:
            await web.SockSite(runner, sock, shutdown_timeout=SHUTDOWN_S).start()
            announce()
            await stopped.wait()
            for websocket in list(self.live):
                await websocket.close()  # textual-serve's stop() then quits its dashboard
        finally:
            await runner.cleanup()


async def _relay(websocket: web.WebSocketResponse, service: AppService) -> None:
    """What the page sends, checked, to the session; anything else is dropped."""
    async for message in websocket:
        if message.type != WSMsgType.TEXT:
            continue
        try:
            envelope = json.loads(message.data)
        except ValueError:
            continue
        if not isinstance(envelope, list) or not envelope:
            continue
        kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
        if kind == "stdin" and isinstance(data, str):
            await service.send_bytes(data.encode("utf-8", "replace"))
        elif kind == "resize" and isinstance(data, dict):
            width, height = data.get("width"), data.get("height")
            if _cell_count(width) and _cell_count(height):
                await service.set_terminal_size(width, height)
        elif kind == "ping" and isinstance(data, str) and len(data) <= 64:
            await websocket.send_json(["pong", data])
        elif kind == "blur":
            await service.blur()
        elif kind == "focus":
            await service.focus()


def _cell_count(value: object) -> TypeGuard[int]:
    """Whether a width or height the page sent is one (an int, not a bool, in bounds)."""
    return type(value) is int and 1 <= value <= MAX_CELLS


def _cells(text: str | None, default: int) -> int:
    """A width or height from the query string, within bounds; ``default`` for anything else."""
    if text is None or not text.isdigit() or len(text) > 4:
        return default
    return min(max(int(text), 1), MAX_CELLS)


def _same_origin(request: web.Request) -> bool:
    """Whether the websocket comes from this server's page (or from no page: a script)."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    try:
        where = urlsplit(origin).netloc
    except ValueError:
        return False
    return bool(where) and where.lower() == request.host.lower()


async def _script(_request: web.Request) -> web.Response:
    return web.Response(text=SCRIPT, content_type="text/javascript")


async def _secure(_request: web.Request, response: web.StreamResponse) -> None:
    for name, value in SECURITY_HEADERS.items():  # headers, not a widget: set one by one
        response.headers[name] = value


__all__ = ["ARGV_ENV", "MAX_SESSIONS", "WebServer", "session_command"]
