"""`gputop web --demo` in headless Chromium: what a person opening the printed URL sees.

Skips (saying why) where no chromium is installed, as the Prometheus test does without its
binary; the HTTP and websocket tests (test_web_server.py) still run.
"""

from __future__ import annotations

import asyncio

from tests.web.served import Served, browser, chromium_binary, get, serving


async def look(binary: str, served: Served) -> None:
    async with browser(binary) as page:
        await page.navigate(served.url)
        lines = await page.wait_for_text("DEMO", "READONLY", "GPU 0", "Processes", "COMMAND")
        assert lines[0].lstrip().startswith("gputop")  # the header, as in a terminal
        assert await page.evaluate("window.location.pathname + window.location.search") == "/"
        assert await page.evaluate("document.cookie") == ""  # HttpOnly: no script reads it
        await page.press("?", "Slash", 191)
        lines = await page.wait_for_text("gputop help", "this help", "esc to close")
        assert not any("k is kill" in line for line in lines)  # read-only
        await page.press("Escape", "Escape", 27)
        for _ in range(40):  # esc closes it
            lines = await page.terminal_lines() or []
            if not any("gputop help" in line for line in lines):
                break
            await asyncio.sleep(0.5)
        assert any("COMMAND" in line for line in lines)
        assert not any("gputop help" in line for line in lines)


async def refused(binary: str, served: Served) -> None:
    """The address without its token: a 403 page, and no terminal, no session."""
    async with browser(binary) as page:
        await page.navigate(f"http://{served.hostport}/")
        await asyncio.sleep(1)
        body = await page.evaluate("document.body.innerText")
        assert "this needs the token" in body
        assert await page.terminal_lines() is None


def test_the_browser_shows_the_dashboard_and_its_keys_work() -> None:
    binary = chromium_binary()
    with serving("web", "--demo") as served:
        asyncio.run(look(binary, served))
    assert served.proc.returncode == 0


def test_the_browser_without_the_token_is_refused() -> None:
    binary = chromium_binary()
    with serving("web", "--demo") as served:
        asyncio.run(refused(binary, served))
        assert get(served, "/ws")[0] == 403
