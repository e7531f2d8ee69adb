"""`gputop fleet` against a Prometheus that lies: hostile label values reach every view cleaned
and as plain text, numbers no GPU can have are dropped and counted (never shown, never an exit
code), unreadable series are skipped without failing the fleet, and an answer that is too deep,
too large or too slow is one error line within the timeout, never a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from gputop.cli import main
from gputop.engine.sanitize import clean
from gputop.fleet import bounds
from gputop.fleet.client import MAX_TOKEN_BYTES, PrometheusClient, PrometheusError
from gputop.fleet.model import (
    EXIT_OK,
    EXIT_STUCK,
    MIB,
    USED_BY_UUID,
    FleetReader,
    build_fleet,
    read_fleet,
    read_processes,
)
from gputop.ui.fleet.app import FleetApp
from gputop.ui.fleet.host_table import HostTable
from gputop.ui.fleet.poller import FleetPoller
from tests.export.conftest import REPO
from tests.fleet.hostile_prometheus import (
    FakeRange,
    FakeSeries,
    drip,
    endless,
    error_body,
    fleet_answers,
    hostile_prometheus,
    nested,
    reply,
    vector,
)
from tests.fleet.test_overview import header, run, table_hosts, until

# Markup, terminal escapes (OSC title, CSI clear, C1 CSI), bidi, zero-width, wide and combining.
HOSTILE = [
    "[/]",
    "[@click=app.quit]x[/]",
    "[link=http://x]root[/link]",
    "[bold",
    "evil\x1b]0;OWNED\x07\x1b[2J",
    "c1\x9b31m",
    "bidi\u202eevil",
    "s\u200bsh",
    "宽字符主机",
    "combin\u0301\u0301ing",
]
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
GOOD_UUID = "GPU-good-0"


@pytest.fixture(autouse=True)
def _no_prometheus_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GPUTOP_PROMETHEUS"):
            monkeypatch.delenv(name)


def target(i: int) -> dict[str, str]:
    return {"job": "gpus", "instance": f"10.0.0.{i}:9400"}


def hostile_fleet() -> dict[str, list[FakeSeries]]:
    """One honest gputop host ("good", GPU 0) and one dcgm-exporter host per hostile name, plus
    12 series no fleet should believe (5 bad gpu labels, 3 values out of range, 4 unreadable)."""
    now = str(time.time())
    good = {**target(0), "hostname": "good"}
    series: dict[str, list[FakeSeries]] = {
        "up": [(target(0), "1")],
        "scraped": [(target(0), now)],
        "known": [(good, "1")],
        "used": [({**good, "gpu": "0", "UUID": GOOD_UUID, "modelName": "H100"}, "1024")],
        "used_by_uuid": [({"UUID": GOOD_UUID}, "1024")],
        "free": [({"UUID": GOOD_UUID}, "3072")],
        "util": [({"UUID": GOOD_UUID}, "50")],
        "power": [({"UUID": GOOD_UUID}, "300")],
        "temp": [({"UUID": GOOD_UUID}, "60")],
        "info": [(good, "1")],
        "stuck": [],
        "unattributed": [],
        "age": [(target(0), "0.5")],
    }
    for i, name in enumerate(HOSTILE, start=1):
        where = {**target(i), "Hostname": name}
        uuid = f"GPU-hostile-{i}"
        series["up"].append((target(i), "1"))
        series["scraped"].append((target(i), now))
        series["known"].append((where, "1"))
        series["used"].append(({**where, "gpu": "0", "UUID": uuid, "modelName": name}, "10"))
        series["used_by_uuid"].append(({"UUID": uuid}, "10"))
        series["free"].append(({"UUID": uuid}, "90"))
    # Unbelievable: gpu labels that are no index (int("²") raises, 5,000 digits too) ...
    for i, gpu in enumerate(["²", "9" * 5000, "-1", "x", "٣"]):
        uuid = f"GPU-bad-{i}"
        series["used"].append(({**good, "gpu": gpu, "UUID": uuid, "modelName": "H100"}, "1"))
        series["used_by_uuid"].append(({"UUID": uuid}, "1"))
    # ... values out of physical range (-5 stuck, 1e308 MiB overflows a sum, a 255 °C sensor) ...
    series["stuck"].append(({**target(0), "state": "holder"}, "-5"))
    huge = {**good, "gpu": "1", "UUID": "GPU-huge", "modelName": "H100"}
    series["used"].append((huge, "1e308"))
    series["used_by_uuid"].append(({"UUID": "GPU-huge"}, "1e308"))
    series["temp"].append(({"UUID": GOOD_UUID}, "255"))
    # ... and unreadable: NaN and +Inf as Prometheus writes them, a number for a label value, a
    # number where the value's string belongs.
    series["util"].append(({"UUID": GOOD_UUID}, "NaN"))
    series["power"].append(({"UUID": GOOD_UUID}, "+Inf"))
    series["info"].append(({**target(0), "hostname": 7}, "1"))
    series["age"].append((target(0), 0.5))
    return series


SKIPPED = {bounds.BAD_GPU: 5, bounds.OUT_OF_RANGE: 3, bounds.UNREADABLE: 4}


def assert_no_raw_controls(*texts: str) -> None:
    for text in texts:
        found = RAW.findall(text)
        assert not found, f"raw control characters {found!r} in {text[:200]!r}"


def fleet_cmd(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["fleet", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_model_drops_and_counts_what_no_gpu_can_report() -> None:
    with hostile_prometheus(fleet_answers(hostile_fleet())) as fake:
        fleet = read_fleet(PrometheusClient(fake.url))
    assert dict(fleet.skipped) == SKIPPED
    hosts = {h.name: h for h in fleet.hosts}
    assert set(hosts) == {"good", *(clean(n) for n in HOSTILE)}
    good = hosts["good"]
    assert [g.gpu for g in good.gpus] == ["0"]  # no "²", no 5,000 digits, no GPU-huge
    gpu = good.gpus[0]
    assert (gpu.memory_used_bytes, gpu.memory_total_bytes) == (1024 * MIB, 4096 * MIB)
    assert (gpu.util_percent, gpu.power_w, gpu.temperature_c) == (50, 300, 60)
    assert good.stuck_total == 0  # the -5 holders were dropped, not counted
    assert fleet.exit_code() == EXIT_OK
    for name in HOSTILE:  # every label cleaned where it entered, the model name too
        host = hosts[clean(name)]
        assert host.gpus[0].model == clean(name)
        assert_no_raw_controls(host.name, host.gpus[0].model)


@pytest.mark.parametrize("mode", ["--once", "--json"])
def test_the_cli_shows_hostile_names_as_text_and_notes_what_it_skipped(
    capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    with hostile_prometheus(fleet_answers(hostile_fleet())) as fake:
        code, out, err = fleet_cmd(capsys, mode, "--prometheus", fake.url)
    assert code == EXIT_OK, err  # -5 holders are no stuck processes
    assert "Traceback" not in err
    assert err.count("\n") == 1
    assert err.startswith("gputop: fleet: skipped 12 series Prometheus answered")
    assert "5 with a gpu label that is not a GPU index" in err
    assert "3 with a value out of physical range" in err and "4 unreadable" in err
    assert_no_raw_controls(out, err)
    assert re.search(r"(?<!\w)-5", out) is None and "1e308" not in out
    if mode == "--json":
        data = json.loads(out)
        names = {h["name"] for h in data["hosts"]}
        assert names == {"good", *(clean(n) for n in HOSTILE)}
        good = next(h for h in data["hosts"] if h["name"] == "good")
        assert good["stuck_total"] == 0 and [g["gpu"] for g in good["gpus"]] == ["0"]
        assert data["skipped"] == SKIPPED  # what was left out, by reason, for scripts too
    else:
        for name in ("[/]", "[@click=app.quit]x[/]", "[link=http://x]root[/link]", "[bold"):
            assert name in out  # as plain text: never markup in a one-shot
        assert "holder" not in out
        assert "Stuck processes across the fleet:\n  none reported" in out


def test_the_overview_reader_drops_the_same_on_every_read() -> None:
    history: dict[str, list[FakeRange]] = {
        "history_util": [
            (
                {"hostname": "good"},
                [
                    (time.time() - 30, "-5"),
                    (time.time(), "50"),
                    (1e308, "60"),
                    (time.time(), "1e308"),
                ],
            ),
            ({"hostname": "good"}, [("x", "50"), (time.time(), "NaN")]),
        ],
        "history_memory": [({"hostname": "good"}, [(time.time(), "25")])],
    }
    with hostile_prometheus(fleet_answers(hostile_fleet(), history)) as fake:
        reader = FleetReader(PrometheusClient(fake.url), place_every=2)
        first, second = reader(), reader()  # the second by UUID, with the kept placement
    assert fake.asked.count(USED_BY_UUID) == 1  # the second read was the by-UUID one
    for fleet in (first, second):
        assert dict(fleet.skipped) == SKIPPED
        good = next(h for h in fleet.hosts if h.name == "good")
        assert [g.gpu for g in good.gpus] == ["0"] and good.stuck_total == 0
    history_good = first.history["good"]
    shown = [v for v in history_good.util_percent if v is not None]
    assert shown == [50.0]  # -5, 1e308, NaN and the points at no real time: never drawn
    assert [v for v in history_good.memory_percent if v is not None] == [25.0]


def test_a_drill_down_shows_only_believable_processes() -> None:
    evil_user, evil_cmd = "[link=http://x]root[/link]", "[@click=app.quit]x[/]\x1b[2J"
    good_labels = {"gpu": "0", "pid": "4242", "user": evil_user, "command": evil_cmd}
    processes: list[FakeSeries] = [
        (good_labels, str(2 * MIB)),
        ({**good_labels, "pid": "²"}, "1"),
        ({**good_labels, "pid": "9" * 5000}, "1"),
        ({**good_labels, "gpu": "-1"}, "1"),
        ({**good_labels, "pid": "7"}, "-5"),
        ({**good_labels, "pid": "8"}, "1e308"),
    ]
    answers = hostile_fleet() | {"processes": processes}
    with hostile_prometheus(fleet_answers(answers)) as fake:
        client = PrometheusClient(fake.url)
        good = next(h for h in read_fleet(client).hosts if h.name == "good")
        found = read_processes(client, good)
    assert found is not None and len(found) == 1
    (process,) = found
    assert (process.pid, process.gpu, process.memory_bytes) == ("4242", "0", 2 * MIB)
    assert process.user == evil_user  # the owner as written: never parsed into "root"
    assert process.command == clean(evil_cmd) and "\x1b" not in process.command


def test_an_evaluation_time_that_is_no_time_is_not_used(capsys: pytest.CaptureFixture[str]) -> None:
    """time.localtime(1e308) raises: the answer's time falls back to now."""
    with hostile_prometheus(fleet_answers(hostile_fleet(), at=1e308)) as fake:
        before = time.time()
        fleet = read_fleet(PrometheusClient(fake.url))
        code, out, err = fleet_cmd(capsys, "--once", "--prometheus", fake.url)
    assert before - 1 <= fleet.at <= time.time() + 1
    assert code == EXIT_OK and "Traceback" not in err and out.startswith("HOST")


def test_series_that_are_not_series_do_not_fail_the_rest() -> None:
    good = {**target(0), "hostname": "good"}
    answers = hostile_fleet()
    answers["used"] = [
        *answers["used"],
        ({"gpu": {"nested": True}}, "1"),  # a label value that is an object
        (["not", "a", "dict"], "1"),  # type: ignore[list-item]
        (good, ["1"]),
    ]
    with hostile_prometheus(fleet_answers(answers)) as fake:
        fleet = read_fleet(PrometheusClient(fake.url))
    assert fleet.skipped[bounds.UNREADABLE] == SKIPPED[bounds.UNREADABLE] + 3
    assert "good" in {h.name for h in fleet.hosts}


ESCAPES = "\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202e bad query"


@pytest.mark.parametrize("code", [400, 422, 503])
def test_an_error_text_with_terminal_escapes_is_one_clean_line(
    capsys: pytest.CaptureFixture[str], code: int
) -> None:
    with hostile_prometheus(error_body(code, ESCAPES + "x" * 5000)) as fake:
        status, out, err = fleet_cmd(capsys, "--once", "--prometheus", fake.url)
        with pytest.raises(PrometheusError) as caught:
            PrometheusClient(fake.url).query("up")
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"answered HTTP {code}: \\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m\\u202e bad query" in err
    assert len(err) < 600  # the 5,000 x's are cut
    assert_no_raw_controls(out, err, str(caught.value))


def test_a_failed_query_status_with_escapes_is_clean() -> None:
    body = json.dumps({"status": "error", "error": ESCAPES}).encode()
    with (
        hostile_prometheus(lambda r: reply(r, 200, body)) as fake,
        pytest.raises(PrometheusError) as caught,
    ):
        PrometheusClient(fake.url).query("up")
    assert "failed: \\x1b]0;PWNED" in str(caught.value)
    assert_no_raw_controls(str(caught.value))


def test_the_overview_error_line_is_clean() -> None:
    """The overview shows the poller's error as it is: it must arrive clean."""
    with hostile_prometheus(error_body(400, ESCAPES)) as fake:
        poller = FleetPoller(FleetReader(PrometheusClient(fake.url)), interval_s=60)
        poller.start()
        deadline = time.monotonic() + 10
        while poller.state.error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        poller.stop()
    error = poller.state.error
    assert error is not None and "PWNED" in error
    assert_no_raw_controls(error)


@pytest.mark.parametrize("code", [200, 500])
def test_json_nested_100000_deep_is_one_line(capsys: pytest.CaptureFixture[str], code: int) -> None:
    with hostile_prometheus(nested(100_000, code)) as fake:
        status, out, err = fleet_cmd(capsys, "--json", "--prometheus", fake.url)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and "Traceback" not in err and "Recursion" not in err
    if code == 200:
        assert err.strip().endswith("answered JSON nested too deeply to read")
    else:
        assert err.strip().endswith("answered HTTP 500")


def test_an_endless_body_is_refused_at_the_limit() -> None:
    limit = 1024 * 1024
    with hostile_prometheus(endless()) as fake:
        client = PrometheusClient(fake.url, max_reply_bytes=limit, timeout_s=30)
        started = time.monotonic()
        with pytest.raises(PrometheusError, match=r"answer too large \(over 1048576 bytes\)"):
            client.query("up")
        took = time.monotonic() - started
        time.sleep(0.2)
        sent = fake.sent_bytes
        time.sleep(0.5)
        assert fake.sent_bytes == sent  # the client hung up: the server cannot write more
    assert took < 5
    # what it read stopped at the limit; the rest sat in the two socket buffers when it hung up
    assert limit < sent < limit + 32 * 1024 * 1024


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    with hostile_prometheus(endless(declared=10**15)) as fake:
        client = PrometheusClient(fake.url, max_reply_bytes=1024 * 1024, timeout_s=30)
        started = time.monotonic()
        with pytest.raises(PrometheusError, match="answer too large"):
            client.query("up")
    assert time.monotonic() - started < 2


def test_the_default_limit_holds_for_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with hostile_prometheus(endless()) as fake:
        status, out, err = fleet_cmd(capsys, "--once", "--timeout", "30", "--prometheus", fake.url)
    assert (status, out) == (1, "")
    assert err.strip().endswith("answer too large (over 67108864 bytes)")


EMPTY = vector([])
FLEET_ONCE = [sys.executable, "-m", "gputop", "fleet", "--once"]


@pytest.mark.parametrize("whole_head", [False, True], ids=["head-dripped", "body-dripped"])
def test_a_server_dripping_a_byte_a_second_is_cut_at_the_timeout(whole_head: bool) -> None:
    """urllib's timeout is per read: this took 68 s before the overall deadline."""
    with hostile_prometheus(drip(EMPTY, whole_head=whole_head)) as fake:
        started = time.monotonic()
        done = subprocess.run(
            [*FLEET_ONCE, "--timeout", "2", "--prometheus", fake.url],
            cwd=REPO,
            env={k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_PROM")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - started
    assert len(EMPTY) > 60  # the drip alone would take over a minute
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f"gputop: Prometheus at {fake.url} did not answer within 2 s\n"
    assert took < 2 + 8, f"took {took:.1f} s"  # the interpreter's start included, under load


# The token file: bounded, a regular file, printable ASCII.


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("zero", "is not a regular file"),
        ("fifo", "is not a regular file"),
        ("directory", "is not a regular file"),
        ("large", "is too large for a token (over 16384 bytes)"),
    ],
)
def test_a_token_file_that_is_no_token_is_refused_at_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, message: str
) -> None:
    path = {"zero": Path("/dev/zero"), "directory": tmp_path}.get(kind, tmp_path / "token")
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes to it: a blocking open would hang here
    elif kind == "large":
        path.write_bytes(b"t" * (MAX_TOKEN_BYTES + 1))
    started = time.monotonic()
    code, out, err = fleet_cmd(
        capsys, "--once", "--prometheus", "http://127.0.0.1:9", "--token-file", str(path)
    )
    assert time.monotonic() - started < 2
    assert (code, out) == (2, "")
    assert err == f"gputop: --token-file: {path} {message}\n"


@pytest.mark.parametrize("token", ["caf\u00e9", "tab\there", "\u20ac"])
def test_a_token_that_cannot_go_in_a_header_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    monkeypatch.setenv("GPUTOP_PROMETHEUS_TOKEN", token)
    code, out, err = fleet_cmd(capsys, "--once", "--prometheus", "http://127.0.0.1:9")
    assert (code, out) == (2, "")
    assert err == ("gputop: the bearer token holds a space, control or non-ASCII character\n")


def test_a_url_with_control_characters_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = fleet_cmd(capsys, "--once", "--prometheus", "http://p:9090/\x1b]0;x\x07")
    assert (code, out) == (2, "")
    assert err.startswith("gputop: --prometheus: the URL holds control characters")
    assert_no_raw_controls(err)


def test_build_fleet_alone_never_raises_on_hostile_numbers() -> None:
    """The same screening for answers that did not come over HTTP (the model's own entry)."""
    from gputop.fleet.client import Answer, Series

    labels = {**target(0), "hostname": "h", "gpu": "²", "UUID": "U"}
    fleet = build_fleet({"used": Answer(at=1.0, series=(Series(labels, 1.0),))})
    assert fleet.hosts == () and dict(fleet.skipped) == {bounds.BAD_GPU: 1}


def test_the_overview_says_what_it_skipped_and_why() -> None:
    """The overview reads the same hostile exporter: the header counts what was left out, the
    report's last line says why, and no skipped value reaches the table."""
    with hostile_prometheus(fleet_answers(hostile_fleet())) as fake:
        app = FleetApp(FleetReader(PrometheusClient(fake.url)), interval_s=60, source=fake.url)

        async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
            await until(pilot, lambda: len(table_hosts(app)) == 1 + len(HOSTILE))
            await pilot.pause()
            assert "  12 series skipped" in header(app)
            report = str(app.screen.query_one("#fleet-stuck", Static).render())
            last = report.splitlines()[-1]
            assert last.startswith("Note: skipped 12 series Prometheus answered")
            assert "5 with a gpu label that is not a GPU index" in last
            shown = "\n".join(" ".join(row.cells) for row in app.screen.query_one(HostTable).rows)
            assert "1e308" not in shown and re.search(r"(?<!\w)-5", shown) is None

        run(app, body)


@pytest.mark.parametrize("mode", ["--once", "--json"])
def test_a_closed_pipe_keeps_the_fleets_verdict(mode: str) -> None:
    """``gputop fleet --once | head -c1``: scripts read the exit code (4: stuck somewhere)."""
    series = hostile_fleet()
    series["stuck"].append(({**target(0), "state": "holder"}, "2"))
    with hostile_prometheus(fleet_answers(series)) as fake:
        argv = [sys.executable, "-m", "gputop", "fleet", mode, "--prometheus", fake.url]
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_PROM")}
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first write
        try:
            done = subprocess.run(
                argv, cwd=REPO, env=env, stdout=write_end, stderr=subprocess.PIPE, timeout=60
            )
        finally:
            os.close(write_end)
        whole = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, timeout=60)
    assert whole.returncode == EXIT_STUCK, whole.stderr
    assert done.returncode == EXIT_STUCK, done.stderr
    assert b"Traceback" not in done.stderr and b"Broken pipe" not in done.stderr
