"""`gputop web` as a real process, plain HTTP to it, its websocket, and headless Chromium.

The browser is driven over the DevTools protocol (a websocket, aiohttp's client), so no
WebDriver is needed: Debian's ``chromium`` alone. What the page shows is read from xterm.js's own
buffer (the terminal object is found among the page's objects with ``Runtime.queryObjects``):
textual-serve's page draws on a canvas, so there is no text in the DOM to read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import itertools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.pty_terminal import clean_env

ROOT = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"on (http://([^/\s]+)/\?token=([A-Za-z0-9_~.-]+))$")


@dataclass(frozen=True)
class Served:
    proc: subprocess.Popen[str]
    url: str  # with the token
    hostport: str
    token: str

    @property
    def cookie(self) -> str:
        return f"gputop_web_{self.hostport.rpartition(':')[2]}={self.token}"


def gputop(*argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gputop", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**clean_env(), "COLUMNS": "200"},
        cwd=ROOT,
    )


def first_line(proc: subprocess.Popen[str], timeout_s: float = 30) -> str:
    """The first line on stdout (the URL), or fail with what the process said."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    if not ready:
        proc.kill()
        pytest.fail(f"no URL within {timeout_s} s: {proc.communicate()[1]}")
    return proc.stdout.readline().rstrip("\n")


@contextlib.contextmanager
def serving(*argv: str, end: int = signal.SIGTERM) -> Iterator[Served]:
    """``gputop ARGV`` (web, or fleet --web) on a free loopback port until the block ends; then
    ``end`` is sent and the exit status checked by the caller through ``proc``."""
    proc = gputop(*argv, "--listen", "127.0.0.1:0")
    try:
        line = first_line(proc)
        found = SERVING.search(line)
        assert found is not None, line
        yield Served(proc, found[1], found[2], found[3])
    finally:
        if proc.poll() is None:
            proc.send_signal(end)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def get(
    served: Served, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    """A plain HTTP GET (no redirect followed): status, headers, body."""
    conn = http.client.HTTPConnection(served.hostport, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), reply.read().decode("utf-8", "replace")
    finally:
        conn.close()


UPGRADE = {
    "Connection": "Upgrade",
    "Upgrade": "websocket",
    "Sec-WebSocket-Version": "13",
    "Sec-WebSocket-Key": base64.b64encode(b"0123456789abcdef").decode(),
}


# -- a session over the websocket, as the page talks to it ---------------------------------------
async def session_text(
    served: Served, *, keys: str = "", until: tuple[str, ...], timeout_s: float = 30
) -> str:
    """The text (escape codes stripped) a session draws until each of ``until`` was seen, the
    ``keys`` typed once the first frame showed them; TimeoutError if they never show."""
    url = f"ws://{served.hostport}/ws?width=140&height=45"
    headers = {"Cookie": served.cookie}
    drawn = b""
    async with aiohttp.ClientSession() as client, client.ws_connect(url, headers=headers) as ws:
        typed = not keys
        try:
            async with asyncio.timeout(timeout_s):
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.BINARY:
                        drawn += message.data
                    text = plain(drawn)
                    if not typed and "DEMO" in text:
                        await ws.send_str(json.dumps(["stdin", keys]))
                        typed, drawn = True, b""
                        continue
                    if typed and all(word in text for word in until):
                        return text
        except TimeoutError:
            raise AssertionError(
                f"{until} not drawn in {timeout_s} s: {plain(drawn)[-3000:]}"
            ) from None
    raise AssertionError(f"the session ended first: {plain(drawn)[-500:]}")


def plain(data: bytes) -> str:
    """Terminal output without its escape codes."""
    text = data.decode("utf-8", "replace")
    return re.sub(r"\x1b(\[[0-9;?<>=$]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|.)", "", text)


# -- headless Chromium over the DevTools protocol ------------------------------------------------
def chromium_binary() -> str:
    """Debian's chromium, or skip (as the Prometheus test does without prometheus)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "no chromium here (as root: apt-get install chromium; `make test-tools` tries); "
        "the web server's HTTP and websocket tests still ran"
    )


class Browser:
    """One headless Chromium page, driven over the DevTools protocol."""

    def __init__(self, binary: str, folder: Path, *, width: int = 1400, height: int = 900) -> None:
        self.proc = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",  # tests may run as root, where Chromium's sandbox refuses
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-port=0",
                f"--user-data-dir={folder}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its renderers and helpers: one group, ended together
        )
        self.ids = itertools.count(1)
        self.client: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self.console: list[str] = []

    def devtools_port(self, timeout_s: float = 30) -> int:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stderr], [], [], 1)
            if ready:
                line = self.proc.stderr.readline()
                found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
                if found:
                    return int(found[1])
                if not line and self.proc.poll() is not None:
                    break
        raise AssertionError(f"chromium did not start (exit {self.proc.poll()})")

    async def open(self) -> None:
        port = self.devtools_port()
        self.client = aiohttp.ClientSession()
        async with self.client.get(f"http://127.0.0.1:{port}/json/list") as reply:
            pages = [t for t in await reply.json() if t["type"] == "page"]
        self.ws = await self.client.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        await self.call("Runtime.enable")
        await self.call("Page.enable")

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.ws is not None
        ident = next(self.ids)
        await self.ws.send_json({"id": ident, "method": method, "params": params})
        async for message in self.ws:
            data = json.loads(message.data)
            if data.get("method") == "Runtime.consoleAPICalled":
                args = data["params"]["args"]
                self.console.append(" ".join(str(a.get("value", "")) for a in args))
            if data.get("id") == ident:
                if "error" in data:
                    raise AssertionError(f"{method}: {data['error']}")
                result: dict[str, Any] = data["result"]
                return result
        raise AssertionError("the DevTools connection closed")

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def navigate(self, url: str) -> None:
        await self.call("Page.navigate", url=url)

    async def terminal_lines(self) -> list[str] | None:
        """The rows xterm.js shows now, or None while the page has no terminal yet."""
        if not await self.evaluate("Boolean(window.__terminal)"):
            await self._find_terminal()
        read = """(() => {
          const terminal = window.__terminal;
          if (!terminal) return null;
          const lines = [];
          for (let y = 0; y < terminal.rows; y++) {
            const line = terminal.buffer.active.getLine(y);
            lines.push(line ? line.translateToString(true) : "");
          }
          return lines;
        })()"""
        value = await self.evaluate(read)
        return None if value is None else [str(line) for line in value]

    async def _find_terminal(self) -> None:
        """window.__terminal: xterm.js's Terminal, found among every object of the page (the
        page keeps it in a closure); some objects throw when asked, hence the try."""
        prototype = await self.call("Runtime.evaluate", expression="Object.prototype")
        found = await self.call(
            "Runtime.queryObjects", prototypeObjectId=prototype["result"]["objectId"]
        )
        objects = found["objects"]["objectId"]
        finder = """function () {
          for (const o of this) {
            try {
              if (o && typeof o.rows === "number" && o.buffer && o.buffer.active
                  && typeof o.buffer.active.getLine === "function") {
                window.__terminal = o;
                return;
              }
            } catch (e) {}
          }
        }"""
        await self.call("Runtime.callFunctionOn", functionDeclaration=finder, objectId=objects)
        await self.call("Runtime.releaseObject", objectId=objects)

    async def wait_for_text(self, *words: str, timeout_s: float = 45) -> list[str]:
        """The terminal's rows once every one of ``words`` shows in them."""
        deadline = time.monotonic() + timeout_s
        lines: list[str] | None = None
        while time.monotonic() < deadline:
            lines = await self.terminal_lines()
            if lines is not None and all(any(w in line for line in lines) for w in words):
                return lines
            await asyncio.sleep(0.5)
        shown = "\n".join(lines or ["(no terminal)"])
        raise AssertionError(f"{words} not shown within {timeout_s} s; the page shows:\n{shown}")

    async def press(self, key: str, code: str, key_code: int) -> None:
        """A key press as a person's (into the terminal, focused as a click would): keyDown
        (with its text, for a printable key), keyUp. ``key_code``: the DOM keyCode."""
        await self.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        down: dict[str, Any] = {"key": key, "code": code, "windowsVirtualKeyCode": key_code}
        if len(key) == 1:
            down["text"] = key
        await self.call("Input.dispatchKeyEvent", type="keyDown", **down)
        await self.call(
            "Input.dispatchKeyEvent",
            type="keyUp",
            key=key,
            code=code,
            windowsVirtualKeyCode=key_code,
        )

    async def screenshot(self) -> bytes:
        result = await self.call("Page.captureScreenshot", format="png")
        return base64.b64decode(result["data"])

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.client is not None:
            await self.client.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextlib.asynccontextmanager
async def browser(binary: str) -> Any:
    # A helper of Chromium's may still write its profile while the folder goes.
    with tempfile.TemporaryDirectory(
        prefix="gputop-chromium-", ignore_cleanup_errors=True
    ) as folder:
        page = Browser(binary, Path(folder))
        try:
            await page.open()
            yield page
        finally:
            await page.close()


__all__ = ["Browser", "Served", "browser", "chromium_binary", "get", "serving", "session_text"]
