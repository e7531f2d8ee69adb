"""`gputop fleet`'s one-line errors and exit codes, and its credentials, against tiny servers."""

from __future__ import annotations

import base64
import http.server
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.cli import main
from gputop.fleet.client import PrometheusClient, PrometheusError, authorization
from tests.export.conftest import free_port
from tests.fleet.conftest import send, static_server

EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}).encode()


@pytest.fixture(autouse=True)
def _no_prometheus_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "GPUTOP_PROMETHEUS",
        "GPUTOP_PROMETHEUS_TOKEN",
        "GPUTOP_PROMETHEUS_USER",
        "GPUTOP_PROMETHEUS_PASSWORD",
    ):
        monkeypatch.delenv(name, raising=False)


def fleet(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `gputop fleet ARGS` in-process: (exit code, stdout, the one stderr line)."""
    code = main(["fleet", *args])
    out, err = capsys.readouterr()
    assert err.count("\n") <= 1, err
    return code, out, err.strip()


@pytest.mark.parametrize(
    "url", ["localhost:9090", "ftp://prometheus:9090", "http://", "http://host:99999"]
)
def test_a_bad_url_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = fleet(capsys, "--once", "--prometheus", url)
    assert (code, out) == (2, "")
    assert err.startswith("gputop: --prometheus: ") and url.split(":")[0] in err


def test_credentials_in_the_url_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fleet(capsys, "--once", "--prometheus", "http://me:secret@prom:9090")
    assert code == 2
    assert "GPUTOP_PROMETHEUS_USER" in err and "secret" not in err


def test_no_url_at_all(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fleet(capsys, "--once")
    assert code == 2 and "--prometheus URL or GPUTOP_PROMETHEUS" in err


def test_connection_refused(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = fleet(capsys, "--once", "--prometheus", url)
    assert (code, out) == (1, "")
    reason = "connection refused (is Prometheus running there?)"
    assert err == f"gputop: cannot reach Prometheus at {url}: {reason}"


def test_unknown_host(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fleet(capsys, "--json", "--prometheus", "http://no-such-host.invalid:9090")
    assert code == 1 and "cannot resolve the host name" in err


def test_401_says_which_credentials_to_set(capsys: pytest.CaptureFixture[str]) -> None:
    with static_server(lambda h: send(h, 401, b"Unauthorized\n")) as server:
        code, out, err = fleet(capsys, "--once", "--prometheus", server.url)
    assert (code, out) == (1, "")
    assert err == (
        f"gputop: Prometheus at {server.url} refused access (HTTP 401 Unauthorized): "
        "set GPUTOP_PROMETHEUS_TOKEN (or --token-file), or GPUTOP_PROMETHEUS_USER and "
        "GPUTOP_PROMETHEUS_PASSWORD"
    )


def _guarded(expected: str) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    """A Prometheus stand-in: 403 unless the request carries Authorization ``expected``."""

    def respond(h: http.server.BaseHTTPRequestHandler) -> None:
        if h.headers.get("Authorization") == expected:
            send(h, 200, EMPTY, "application/json")
        else:
            send(h, 403, b'{"status":"error","error":"forbidden"}', "application/json")

    return respond


def test_bearer_token_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with static_server(_guarded("Bearer s3cr3t")) as server:
        code, _, err = fleet(capsys, "--once", "--prometheus", server.url)
        assert code == 1 and "HTTP 403 Forbidden" in err
        monkeypatch.setenv("GPUTOP_PROMETHEUS_TOKEN", "wrong")
        code, _, err = fleet(capsys, "--once", "--prometheus", server.url)
        assert code == 1 and err.endswith("check the credentials")
        monkeypatch.setenv("GPUTOP_PROMETHEUS_TOKEN", "s3cr3t")
        code, out, err = fleet(capsys, "--once", "--prometheus", server.url)
    assert (code, err) == (0, "")
    assert out.startswith("no GPU hosts: ")


def test_bearer_token_from_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("from-a-file\n")
    with static_server(_guarded("Bearer from-a-file")) as server:
        code, out, err = fleet(
            capsys, "--json", "--prometheus", server.url, "--token-file", str(token)
        )
    assert (code, err) == (0, "")
    assert json.loads(out)["hosts"] == []
    code, _, err = fleet(
        capsys, "--json", "--prometheus", server.url, "--token-file", str(tmp_path / "none")
    )
    assert code == 2 and "--token-file" in err and "No such file" in err


def test_basic_auth_from_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTOP_PROMETHEUS_USER", "ops")
    monkeypatch.setenv("GPUTOP_PROMETHEUS_PASSWORD", "pa:ss")
    expected = "Basic " + base64.b64encode(b"ops:pa:ss").decode()
    with static_server(_guarded(expected)) as server:
        code, _, err = fleet(capsys, "--once", "--prometheus", server.url)
    assert (code, err) == (0, "")
    monkeypatch.setenv("GPUTOP_PROMETHEUS_TOKEN", "t")
    code, _, err = fleet(capsys, "--once", "--prometheus", server.url)
    assert code == 2 and "keep one" in err


def test_not_prometheus(capsys: pytest.CaptureFixture[str]) -> None:
    page = b"<html><body>Grafana</body></html>"
    with static_server(lambda h: send(h, 200, page, "text/html")) as server:
        code, out, err = fleet(capsys, "--once", "--prometheus", server.url)
    assert (code, out) == (1, "")
    assert "did not answer like Prometheus" in err


def test_404_is_not_the_api(capsys: pytest.CaptureFixture[str]) -> None:
    with static_server(lambda h: send(h, 404, b"404 page not found\n")) as server:
        code, _, err = fleet(capsys, "--once", "--prometheus", server.url + "/wrong")
    assert code == 1 and "HTTP 404" in err and "base address" in err


def test_a_redirect_is_not_followed_with_the_token(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str | None] = []

    def elsewhere(h: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(h.headers.get("Authorization"))
        send(h, 200, EMPTY, "application/json")

    monkeypatch.setenv("GPUTOP_PROMETHEUS_TOKEN", "s3cr3t")
    with static_server(elsewhere) as other:

        def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
            h.send_response(302)
            h.send_header("Location", other.url + h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()

        with static_server(redirect) as server:
            code, _, err = fleet(capsys, "--once", "--prometheus", server.url)
    assert code == 1 and f"redirects to {other.url}/api/v1/query" in err
    assert seen == []


def test_a_slow_server_times_out(capsys: pytest.CaptureFixture[str]) -> None:
    def slow(h: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(3.0)  # far past the 0.3 s limit, so the bound below holds on a busy box
        send(h, 200, EMPTY, "application/json")

    with static_server(slow) as server:
        started = time.monotonic()
        code, _, err = fleet(capsys, "--once", "--timeout", "0.3", "--prometheus", server.url)
        took = time.monotonic() - started
    assert code == 1 and err.endswith("did not answer within 0.3 s")
    assert took < 2.0


def test_tls_to_a_plain_http_server(capsys: pytest.CaptureFixture[str]) -> None:
    with static_server(lambda h: send(h, 200, EMPTY)) as server:
        code, _, err = fleet(capsys, "--once", "--prometheus", f"https://{server.address}")
    assert code == 1 and "TLS failure" in err


def test_a_query_error_is_reported() -> None:
    reply = json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"})
    with (
        static_server(lambda h: send(h, 400, reply.encode(), "application/json")) as server,
        pytest.raises(PrometheusError, match="HTTP 400: parse error"),
    ):
        PrometheusClient(server.url).query("up{")


def test_authorization_needs_both_user_and_password() -> None:
    from gputop.errors import UsageError

    with pytest.raises(UsageError, match="both"):
        authorization({"GPUTOP_PROMETHEUS_USER": "ops"})
    assert authorization({}) is None


def test_demo_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = fleet(capsys, "--demo", "--once", "--prometheus", "http://p:9090")
    assert code == 2 and "gputop export --demo" in err


def test_the_overview_without_a_terminal_says_use_once() -> None:
    import subprocess
    import sys

    from tests.export.conftest import REPO

    done = subprocess.run(
        [sys.executable, "-m", "gputop", "fleet", "--prometheus", "http://127.0.0.1:9"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,  # no controlling terminal: no /dev/tty to fall back on
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "gputop: the dashboard needs a terminal; use fleet --once or fleet --json for scripts\n"
    )


def test_once_and_json_load_neither_textual_nor_pynvml() -> None:
    from tests.fresh import modules_after

    code = "\n".join(
        [
            "import contextlib, io, json, threading, http.server",
            f"EMPTY = {EMPTY!r}",
            "class H(http.server.BaseHTTPRequestHandler):",
            "    def do_GET(self):",
            "        self.send_response(200); self.send_header('Content-Length', str(len(EMPTY)))",
            "        self.end_headers(); self.wfile.write(EMPTY)",
            "    def log_message(self, *a): pass",
            "s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)",
            "threading.Thread(target=s.serve_forever, daemon=True).start()",
            "from gputop.cli import main",
            "url = f'http://127.0.0.1:{s.server_address[1]}'",
            "out = io.StringIO()",
            "with contextlib.redirect_stdout(out):",
            "    assert main(['fleet', '--once', '--prometheus', url]) == 0",
            "    assert main(['fleet', '--json', '--prometheus', url]) == 0",
            "assert 'no GPU hosts' in out.getvalue(), out.getvalue()",
        ]
    )
    loaded = {name.split(".")[0] for name in modules_after(code)}
    assert "gputop" in loaded
    assert {n for n in loaded if n.startswith("textual") or n == "pynvml"} == set()


def test_hostile_label_values_never_reach_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    # Label values are written by whoever runs an exporter Prometheus scrapes.
    evil = {
        "Hostname": "evil\x1b]0;OWNED\x07host",
        "gpu": "0",
        "UUID": "GPU-1",
        "modelName": "A100\u202eevil",
        "job": "dcgm\x9b31m",
        "instance": "h:9400",
    }
    reply = json.dumps(
        {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": evil, "value": [1, "1"]}]},
        }
    ).encode()
    with static_server(lambda h: send(h, 200, reply, "application/json")) as server:
        code, out, err = fleet(capsys, "--once", "--prometheus", server.url)
        code_json, as_json, _ = fleet(capsys, "--json", "--prometheus", server.url)
    # every query answers this one series with 1: one stuck process and Xid 1 (4), GPU 0 lost
    # (5): exit 6, the host named on stderr
    assert (code, code_json) == (6, 6), err
    assert "evil" in out and "evil" in as_json and "evil" in err
    for text in (out, as_json, err):
        assert "\x1b" not in text and "\x07" not in text
        assert "\u202e" not in text and "\x9b" not in text
