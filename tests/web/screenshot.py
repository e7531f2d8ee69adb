"""screenshots/web.png: the dashboard in headless Chromium, served as `gputop web` serves it.

``python -m tests.web.screenshot [FILE]`` (``make screenshots``). The session draws the showcase
box's fixed frames (tests/web/showcase_session.py), so the picture names nothing of the machine
that took it; needs chromium (exit 2 with one line without it).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import socket
import sys
from pathlib import Path

from gputop.ui.web.server import WebServer
from gputop.ui.web.token import new_token
from tests.web.served import ROOT, browser

DEFAULT = ROOT / "screenshots" / "web.png"


async def shoot(binary: str, out: Path) -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    token = new_token()
    server = WebServer([], token=token, port=port, title="gputop")
    server.command = f"exec {shlex.quote(sys.executable)} -m tests.web.showcase_session"
    os.environ["PYTHONPATH"] = str(ROOT)
    stopped = asyncio.Event()
    serving = asyncio.create_task(server.run(sock, lambda: None, stopped))
    try:
        async with browser(binary) as page:
            await page.navigate(f"http://127.0.0.1:{port}/?token={token}")
            await page.wait_for_text("READONLY", "Processes")
            await asyncio.sleep(1.5)  # the panels' last frame, and the page's fade-in
            out.write_bytes(await page.screenshot())
    finally:
        stopped.set()
        await serving
        sock.close()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else DEFAULT
    binary = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None
    )
    if binary is None:
        print("tests.web.screenshot: no chromium here (apt-get install chromium)", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(shoot(binary, out))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
