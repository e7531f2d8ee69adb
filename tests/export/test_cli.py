"""`gputop export` on the command line: demo scrape, one-line errors, no prometheus-client."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.cli import main
from gputop.commands.export import exposure_note, parse_listen
from gputop.errors import UsageError
from gputop.sim import load_scenario
from tests.export.conftest import REPO, exporter_process, http_get, samples


def test_demo_exporter_serves_every_simulated_gpu() -> None:
    with exporter_process("--interval", "1") as url:
        body = http_get(url)
    rows = samples(body, "DCGM_FI_DEV_GPU_UTIL")
    assert {lab["UUID"] for lab, _ in rows} == {g.uuid for g in load_scenario("demo").gpus}
    assert all(lab["device"] == f"nvidia{lab['gpu']}" and lab["hostname"] for lab, _ in rows)
    # the demo's stuck holder is a real process found by the holder scan
    stuck = {lab["state"]: v for lab, v in samples(body, "gputop_stuck_processes")}
    assert stuck["holder"] >= 1
    commands = {lab["command"] for lab, _ in samples(body, "gputop_process_gpu_memory_bytes")}
    assert commands and all(" " not in c for c in commands)  # short names, no arguments


@pytest.mark.parametrize(
    ("text", "host", "port", "loopback"),
    [
        ("127.0.0.1:9400", "127.0.0.1", 9400, True),
        ("[::1]:9400", "::1", 9400, True),
        ("9401", "127.0.0.1", 9401, True),
        (":9400", "0.0.0.0", 9400, False),
        ("0.0.0.0:9400", "0.0.0.0", 9400, False),
    ],
)
def test_parse_listen(text: str, host: str, port: int, loopback: bool) -> None:
    listen = parse_listen(text)
    assert (listen.host, listen.port, listen.loopback) == (host, port, loopback)
    assert (exposure_note(listen) is None) == loopback


def test_localhost_resolves_to_a_loopback_address() -> None:
    listen = parse_listen("localhost:0")
    assert listen.loopback and listen.host in {"127.0.0.1", "::1"}


def test_exposure_note_names_the_address() -> None:
    note = exposure_note(parse_listen("0.0.0.0:9400"))
    assert note == "gputop: listening on 0.0.0.0:9400 — reachable from other hosts"


@pytest.mark.parametrize(
    "text", ["127.0.0.1:http", "127.0.0.1:70000", "::1:9400", "[::1]9400", "no.such.host.invalid:1"]
)
def test_bad_listen_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--listen"):
        parse_listen(text)


def _run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["export", "--demo", *argv])
    return code, capsys.readouterr().err


def test_port_in_use_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = _run_main(capsys, "--listen", f"127.0.0.1:{port}")
    assert code == 2
    assert err == f"gputop: cannot listen on 127.0.0.1:{port}: address already in use\n"


def test_bad_listen_from_cli(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_main(capsys, "--listen", "localhost:port")
    assert code == 2
    assert err.startswith("gputop: --listen:") and err.count("\n") == 1


def test_missing_textfile_dir_from_cli(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _run_main(capsys, "--textfile", str(tmp_path / "nope"))
    assert code == 2
    assert err == f"gputop: --textfile: not a directory: {tmp_path / 'nope'}\n"


def test_missing_prometheus_client_message() -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from gputop.cli import main\n"
        "sys.exit(main(['export', '--demo']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "gputop: the exporter needs prometheus-client: pip install prometheus-client"
        " (pipx: pipx inject gputop-nv prometheus-client)\n"
    )
    assert proc.stdout == ""


def test_textfile_written_from_cli(tmp_path: Path) -> None:
    with exporter_process("--interval", "1", "--textfile", str(tmp_path)):
        text = (tmp_path / "gputop.prom").read_text()  # written before the address is printed
    gpus = load_scenario("demo").gpus
    assert len(samples(text, "DCGM_FI_DEV_GPU_UTIL")) == len(gpus)
