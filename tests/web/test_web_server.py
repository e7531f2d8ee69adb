"""`gputop web` as a real process: the token on every request, its refusals, its sessions."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import aiohttp
import pytest

from gputop.ui.web import ARGV_ENV
from tests.pty_terminal import clean_env
from tests.web.served import ROOT, UPGRADE, Served, get, gputop, serving, session_text


def test_nothing_is_served_without_the_token() -> None:
    with serving("web", "--demo") as served:
        port = served.hostport.rpartition(":")[2]
        for path in ("/", "/ws", "/static/js/textual.js", "/gputop-web.js", "/?token=wrong"):
            status, headers, body = get(served, path)
            assert status == 403, path
            assert body == "gputop web: this needs the token: open the URL gputop web printed\n"
            assert headers["Cache-Control"] == "no-store"
        # The websocket's handshake, as a browser's or a script's, without the token.
        assert get(served, "/ws", UPGRADE)[0] == 403
        wrong = {**UPGRADE, "Cookie": f"gputop_web_{port}={served.token[:-1]}x"}
        assert get(served, "/ws", wrong)[0] == 403
        # urllib, as anyone on the box would try it.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://{served.hostport}/", timeout=10)
        assert refused.value.code == 403
    assert served.proc.returncode == 0  # SIGTERM: stopped, as a service is


def test_the_token_is_swapped_for_a_strict_cookie() -> None:
    with serving("web", "--demo") as served:
        status, headers, _ = get(served, f"/?token={served.token}")
        assert (status, headers["Location"]) == (303, "/")  # the token leaves the address bar
        cookie = headers["Set-Cookie"]
        assert cookie.startswith(served.cookie + ";")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        status, headers, page = get(served, "/", {"Cookie": served.cookie})
        assert status == 200 and '<script src="/static/js/textual.js">' in page
        assert headers["Referrer-Policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert "googleapis" not in page  # nothing fetched from outside the box
        # With the cookie, a query string is dropped before the page sees it (its ping=, delay=).
        assert get(served, "/?ping=http://x", {"Cookie": served.cookie})[:2][0] == 303
        assert get(served, "/static/js/textual.js", {"Cookie": served.cookie})[0] == 200
        assert get(served, "/static/", {"Cookie": served.cookie})[0] in (403, 404)  # no index


def test_a_session_is_the_read_only_demo_dashboard_and_its_keys_work() -> None:
    with serving("web", "--demo") as served:
        text = asyncio.run(session_text(served, until=("DEMO", "READONLY", "Processes")))
        assert "GPU 0" in text
        text = asyncio.run(session_text(served, keys="?", until=("gputop help", "Processes")))
        assert "k is kill" not in text  # read-only: the help says nothing of signals


def test_allow_kill_serves_a_dashboard_that_may_signal() -> None:
    with serving("web", "--demo", "--allow-kill") as served:
        text = asyncio.run(session_text(served, until=("DEMO", "Processes")))
        assert "READONLY" not in text
        asyncio.run(session_text(served, keys="?", until=("gputop help", "k is kill")))


def test_a_page_of_another_site_cannot_open_a_session() -> None:
    with serving("web", "--demo") as served:
        evil = {**UPGRADE, "Cookie": served.cookie, "Origin": "http://evil.example"}
        assert get(served, "/ws", evil)[0] == 403
        ours = {**UPGRADE, "Cookie": served.cookie, "Origin": f"http://{served.hostport}"}
        assert get(served, "/ws", ours)[0] == 101


def test_what_a_browser_sends_is_checked() -> None:
    """Garbage on the websocket is dropped: the session goes on drawing."""

    async def talk(served: Served) -> None:
        url = f"ws://{served.hostport}/ws?width=99999&height=-1"
        headers = {"Cookie": served.cookie}
        async with aiohttp.ClientSession() as client, client.ws_connect(url, headers=headers) as ws:
            for junk in (
                "{",
                "[]",
                '{"a": 1}',
                '["resize", {"width": true, "height": 5}]',
                '["resize", {"width": 1e9, "height": 5}]',
                '["stdin", 5]',
                '["ping", "' + "x" * 100 + '"]',
            ):
                await ws.send_str(junk)
            await ws.send_str('["ping", "hello"]')
            async with asyncio.timeout(30):
                async for message in ws:
                    if message.type == aiohttp.WSMsgType.TEXT:
                        assert json.loads(message.data) == ["pong", "hello"]
                        return
        raise AssertionError("the session ended instead of answering the ping after the junk")

    with serving("web", "--demo") as served:
        asyncio.run(talk(served))
        assert served.proc.poll() is None
        assert asyncio.run(session_text(served, until=("DEMO",)))


def one_line_exit_2(*argv: str) -> str:
    proc = gputop(*argv)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # it served instead of refusing
        out, err = proc.communicate()
    assert proc.returncode == 2, err
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_taken_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = one_line_exit_2("web", "--demo", "--listen", f"127.0.0.1:{port}")
    assert (
        err == f"gputop: --listen 127.0.0.1:{port}: the port is taken (another server "
        "listens there; pick one with --listen)\n"
    )


@pytest.mark.parametrize("listen", ["0.0.0.0:0", ":0", "[::]:0"])
def test_an_address_others_reach_needs_allow_remote(listen: str) -> None:
    err = one_line_exit_2("web", "--demo", "--listen", listen)
    assert "other hosts could reach it; give --allow-remote" in err


def test_allow_remote_serves_on_every_address() -> None:
    proc = gputop("web", "--demo", "--listen", "0.0.0.0:0", "--allow-remote")
    try:
        from tests.web.served import first_line

        line = first_line(proc)
        assert line.startswith("gputop web: the dashboard (read-only) on http://")
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        with pytest.raises(urllib.error.HTTPError) as refused:  # the token still guards it
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10)
        assert refused.value.code == 403
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_audit_log_needs_allow_kill() -> None:
    err = one_line_exit_2("web", "--demo", "--audit-log", "/tmp/x.log")
    assert "--audit-log: only with --allow-kill" in err


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGHUP, 129), (signal.SIGINT, 130)])
def test_a_signal_ends_it(sig: int, status: int) -> None:
    with serving("web", "--demo", end=sig) as served:
        assert asyncio.run(session_text(served, until=("DEMO",)))  # with a session open
    assert served.proc.returncode == status
    assert served.proc.stderr is not None
    assert "Traceback" not in served.proc.stderr.read()


def test_a_token_file_gives_the_same_token_every_start(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "token")
    with serving("web", "--demo", "--token-file", path) as first:
        pass
    assert os.stat(path).st_mode & 0o777 == 0o600
    with serving("web", "--demo", "--token-file", path) as second:
        assert get(second, f"/?token={first.token}")[0] == 303
    with open(path) as kept:
        assert first.token == second.token == kept.read().strip()


def test_a_session_refuses_arguments_that_are_no_list() -> None:
    """cli.web_session: what textual-serve runs; its arguments come from the environment."""
    code = "from gputop.cli import web_session; raise SystemExit(web_session())"
    for bad in ("", "not json", '{"a": 1}', '["--demo", 5]'):
        env = {**clean_env(), ARGV_ENV: bad}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr == (
            f"gputop: {ARGV_ENV} is not a JSON list of arguments (gputop web sets it for its "
            "sessions)\n"
        )


def test_the_dashboard_starts_under_textual_serves_web_driver() -> None:
    """As textual-serve runs a session (also `textual serve "gputop --demo"`): no terminal at all,
    TERM=dumb, keys and frames as packets on stdin/stdout; `q` (a quit packet) ends it."""
    env = {**clean_env(), "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "TERM": "dumb"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "--demo", "--readonly"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
        start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
    )
    assert proc.stdout is not None and proc.stdin is not None
    drawn = b""
    deadline = time.monotonic() + 30
    # Both markers: a frame arrives in pieces, READONLY may come before DEMO.
    while not (b"READONLY" in drawn and b"DEMO" in drawn) and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            drawn += chunk
    quit_packet = json.dumps({"type": "quit"}).encode()
    proc.stdin.write(b"M" + len(quit_packet).to_bytes(4, "big") + quit_packet)
    proc.stdin.flush()
    _, err = proc.communicate(timeout=30)
    assert drawn.startswith(b"__GANGLION__\n"), drawn[:200]  # textual-serve's "it is Textual"
    assert b"DEMO" in drawn and b"READONLY" in drawn
    assert (proc.returncode, err) == (0, b"")


def test_fleet_web_serves_the_overview() -> None:
    from tests.fleet.hostile_prometheus import fleet_answers, hostile_prometheus
    from tests.test_help import fleet_series

    answers = fleet_answers(fleet_series(stuck=False, stale=False))
    with (
        hostile_prometheus(answers) as fake,
        serving("fleet", "--web", "--prometheus", fake.url, "--interval", "1") as served,
    ):
        assert get(served, "/")[0] == 403  # the same token as gputop web
        text = asyncio.run(
            session_text(
                served, until=("gputop fleet", "1 hosts", "Stuck processes across the fleet")
            )
        )
        assert fake.url.split("//")[1] in text  # the overview names its Prometheus
    assert served.proc.returncode == 0


def test_fleet_web_is_not_with_once() -> None:
    err = one_line_exit_2("fleet", "--web", "--once", "--prometheus", "http://127.0.0.1:9")
    assert "--web serves the overview: not with --once or --json" in err
