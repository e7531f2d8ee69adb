"""The Textual fleet overview: rows, sort, filter, and STALE when Prometheus is slow or down.

The fleet comes from a stand-in read function (the engine is checked against a real Prometheus
in test_fleet_prometheus.py); the reads still run on the poller's own thread."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from textual import events
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from gputop.fleet.client import Answer, PrometheusError, Series
from gputop.fleet.model import (
    HISTORY_POINTS,
    Fleet,
    FleetHost,
    FleetProcess,
    HostHistory,
    build_fleet,
)
from gputop.ui.fleet.app import FleetApp
from gputop.ui.fleet.gpu_card import GpuCard, card_lines
from gputop.ui.fleet.host import HostScreen
from gputop.ui.fleet.host_table import HostTable
from gputop.ui.fleet.poller import PollState, stale_s
from gputop.ui.fleet.screen import SPARK_COLUMNS, FleetScreen
from gputop.ui.text import GLYPHS, sparkline


def _gpu(
    host: str, index: int, util: float, temp: float
) -> list[tuple[str, dict[str, str], float]]:
    labels = {"job": "gpus", "instance": f"{host}:9400", "Hostname": host, "gpu": str(index)}
    labels["UUID"] = f"GPU-{host}-{index}"
    return [
        ("util", labels, util),
        ("temp", labels, temp),
        ("used", labels, 1000),
        ("free", labels, 1000),
    ]


def sample_fleet() -> Fleet:
    rows = _gpu("alpha", 0, 10, 40) + _gpu("bravo", 0, 90, 80) + _gpu("bravo", 1, 70, 60)
    rows += _gpu("charlie", 0, 50, 50)
    answers: dict[str, list[Series]] = {}
    for key, labels, value in rows:
        answers.setdefault(key, []).append(Series(labels=labels, value=value))
    up = [
        Series(labels={"job": "gpus", "instance": f"{h}:9400"}, value=1)
        for h in ("alpha", "bravo", "charlie")
    ]
    up.append(Series(labels={"job": "gpus", "instance": "delta:9400"}, value=0))
    answers["up"] = up
    return build_fleet(
        {k: Answer(at=time.time(), series=tuple(v)) for k, v in answers.items()},
        prometheus="http://p:9090",
    )


def run(app: FleetApp, body: Callable[[FleetApp, Pilot[Any]], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await body(app, pilot)
            app.poller.stop()

    asyncio.run(main())


def table_hosts(app: FleetApp) -> list[str]:
    return app.screen.query_one("#fleet-hosts", HostTable).row_names


def header(app: FleetApp) -> str:
    return str(app.screen.query_one("#fleet-header", Static).render())


async def until(pilot: Pilot[Any], done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def test_rows_sort_and_filter() -> None:
    fleet = sample_fleet()
    app = FleetApp(lambda: fleet, interval_s=60, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        assert table_hosts(app) == ["alpha", "bravo", "charlie", "delta:9400"]
        assert "4 hosts (1 down)  4 GPUs" in header(app) and "STALE" not in header(app)
        await pilot.press("s")  # GPUS
        assert table_hosts(app) == ["delta:9400", "alpha", "charlie", "bravo"]
        await pilot.press("s")  # HEALTH: all well but the down host (not known: last)
        assert table_hosts(app) == ["alpha", "bravo", "charlie", "delta:9400"]
        await pilot.press("s")  # UTIL: the down host (no reading) stays last either way
        assert table_hosts(app) == ["alpha", "charlie", "bravo", "delta:9400"]
        await pilot.press("r")
        assert table_hosts(app) == ["bravo", "charlie", "alpha", "delta:9400"]
        await pilot.press("slash", "b", "r")
        assert table_hosts(app) == ["bravo"]
        assert "1/4 hosts (1 down)  2/4 GPUs" in header(app)  # the GPUs the filter shows
        await pilot.press("escape")
        assert len(table_hosts(app)) == 4
        await pilot.press("slash", *"down", "enter")
        assert table_hosts(app) == ["delta:9400"]
        await pilot.press("q")

    run(app, body)


def test_keys_typed_right_after_slash_go_to_the_filter() -> None:
    # Typed fast (or pasted): every key is queued before "/" is handled; Enter ends the filter
    # rather than drilling into the host under the cursor.
    fleet = sample_fleet()
    app = FleetApp(lambda: fleet, interval_s=60, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        keys = [("slash", "/"), *((c, c) for c in "down"), ("enter", None)]
        for key, char in keys:
            app.post_message(events.Key(key, char))
        await pilot.pause()
        await pilot.pause()
        assert table_hosts(app) == ["delta:9400"]
        assert not isinstance(app.screen, HostScreen)
        # "/" again selects the old filter; in the box "/" is a character, typed over it.
        await pilot.press("slash", "slash")
        assert app.screen.query_one("#fleet-filter", Input).value == "/"

    run(app, body)


def test_a_header_click_sorts_and_a_second_click_on_a_row_drills_in() -> None:
    fleet = sample_fleet()
    app = FleetApp(lambda: fleet, interval_s=60, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        table = app.screen.query_one("#fleet-hosts", HostTable)
        x = table._header.index("TEMP")  # the header as painted: its first line
        await pilot.click("#fleet-hosts", offset=(x, 0))
        assert app.screen.sort_column == "TEMP"  # type: ignore[attr-defined]
        assert table_hosts(app) == ["alpha", "charlie", "bravo", "delta:9400"]  # 40, 50, 80 °C
        assert "TEMP ▲" in table._header
        await pilot.click("#fleet-hosts", offset=(x, 0))
        assert table_hosts(app)[:3] == ["bravo", "charlie", "alpha"]
        await pilot.click("#fleet-hosts", offset=(2, 2))  # the second row: the cursor moves
        assert table.cursor_name == "charlie" and not isinstance(app.screen, HostScreen)
        await pilot.click("#fleet-hosts", offset=(2, 2))  # again: its drill-down
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        assert app.screen.host_name == "charlie"  # type: ignore[attr-defined]

    run(app, body)


def test_stale_and_the_error_when_prometheus_goes_away() -> None:
    fleet = sample_fleet()
    reads: list[int] = []

    def read() -> Fleet:
        reads.append(1)
        if len(reads) == 1:
            return fleet
        raise PrometheusError("cannot reach Prometheus at http://p:9090: connection refused")

    app = FleetApp(read, interval_s=0.2, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: "STALE" in header(app))
        error = str(app.screen.query_one("#fleet-error", Static).render())
        assert "connection refused" in error
        assert table_hosts(app) == ["alpha", "bravo", "charlie", "delta:9400"]  # the last good

    run(app, body)


def test_a_hung_prometheus_never_blocks_the_keys() -> None:
    release = threading.Event()
    fleet = sample_fleet()

    def read() -> Fleet:
        release.wait(10)
        return fleet

    app = FleetApp(read, interval_s=0.2, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await pilot.pause(0.3)
        assert "waiting for Prometheus" in header(app)
        await pilot.press("r")  # the UI thread answers while the read hangs
        assert app.screen.sort_reverse  # type: ignore[attr-defined]
        release.set()
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        assert table_hosts(app)[0] == "delta:9400"  # reversed by name

    run(app, body)


def test_stale_rule() -> None:
    fresh = PollState(fleet=None, read_mono=100.0, error=None, reading_since_mono=None)
    assert stale_s(fresh, 105.0, interval_s=5) is None
    assert stale_s(fresh, 112.0, interval_s=5) == 12.0  # slow: past 2 intervals and a second
    failed = PollState(fleet=None, read_mono=100.0, error="refused", reading_since_mono=None)
    assert stale_s(failed, 101.0, interval_s=5) == 1.0
    never = PollState(fleet=None, read_mono=None, error="refused", reading_since_mono=None)
    assert stale_s(never, 500.0, interval_s=5) is None


def test_a_sparkline_per_host_row() -> None:
    ramp = tuple(100.0 * i / (HISTORY_POINTS - 1) for i in range(HISTORY_POINTS))
    gap = (None,) * (HISTORY_POINTS - 2) + (50.0, 100.0)
    history = {"bravo": HostHistory(util_percent=ramp, memory_percent=gap)}
    fleet = dataclasses.replace(sample_fleet(), history=history)
    app = FleetApp(lambda: fleet, interval_s=60.0, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        table = app.screen.query_one("#fleet-hosts", HostTable)
        assert list(table.columns[-2:]) == list(SPARK_COLUMNS)
        util, memory = (table.cell("bravo", c) for c in SPARK_COLUMNS)
        assert util == sparkline(ramp, HISTORY_POINTS, top=100.0)
        assert len(util) == HISTORY_POINTS and util[-1] == GLYPHS.spark[8]
        levels = [GLYPHS.spark.index(c) for c in util]
        assert levels == sorted(levels) and levels[0] < levels[-1]  # it rises as the ramp does
        assert memory == " " * (HISTORY_POINTS - 2) + GLYPHS.spark[4] + GLYPHS.spark[8]
        alpha = [table.cell("alpha", c) for c in SPARK_COLUMNS]
        assert alpha == [" " * HISTORY_POINTS] * 2  # no history: blank, not zero
        await pilot.press("s")  # sorting cycles the data columns only
        assert app.screen.sort_column == "GPUS"  # type: ignore[attr-defined]

    run(app, body)


def test_enter_drills_into_a_host_and_escape_comes_back() -> None:
    fleet = sample_fleet()
    asked: list[tuple[str, str]] = []

    def read_processes(host: FleetHost) -> tuple[FleetProcess, ...] | None:
        asked.append((host.name, threading.current_thread().name))
        return (
            FleetProcess(gpu="1", pid="77", user="ana", command="train", memory_bytes=3 << 30),
            FleetProcess(gpu="0", pid="12", user="bo", command="vllm", memory_bytes=1 << 30),
        )

    app = FleetApp(
        lambda: fleet, interval_s=60.0, source="http://p:9090", read_processes=read_processes
    )

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        await pilot.press("down")  # alpha, bravo, charlie, delta: bravo
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.host_name == "bravo"
        cards = list(screen.query(GpuCard))
        assert [c.border_title for c in cards] == ["GPU 0", "GPU 1"]
        util, memory, power_temp = card_lines(cards[0].gpu)
        assert util.startswith("UTIL ") and util.endswith(" 90 %")
        assert GLYPHS.bar_full * 10 in util  # 90 % of a 12-cell bar: 10.8 cells
        assert memory.endswith(" GiB") and power_temp.endswith("80°C")
        procs = screen.query_one("#host-processes", DataTable)
        await until(pilot, lambda: procs.row_count == 2)
        assert [str(c) for c in procs.get_row_at(0)] == ["1", "77", "ana", "train", "-", "3.0 GiB"]
        assert asked and asked[0][0] == "bravo" and asked[0][1] != threading.main_thread().name
        hint = str(screen.query_one("#host-hint", Static).render())
        assert hint == "read-only: signals are sent on the box: ssh bravo gputop"
        assert "bravo  2 GPUs" in str(screen.query_one("#host-header", Static).render())
        await pilot.press("k")  # no key sends a signal: nothing happens
        assert app.screen is screen
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, FleetScreen))
        assert table_hosts(app) == ["alpha", "bravo", "charlie", "delta:9400"]

    run(app, body)


def test_a_dcgm_only_host_has_no_process_list() -> None:
    fleet = sample_fleet()
    app = FleetApp(lambda: fleet, interval_s=60.0, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        title = app.screen.query_one("#host-processes-title", Static)
        await until(pilot, lambda: "dcgm-exporter only" in str(title.render()))

    run(app, body)


def test_a_refresh_keeps_the_cursor_on_its_host() -> None:
    first = sample_fleet()
    alpha = first.hosts[0]
    hot = dataclasses.replace(alpha.gpus[0], util_percent=60.0)
    second = dataclasses.replace(
        first, hosts=(dataclasses.replace(alpha, gpus=(hot,)), *first.hosts[1:])
    )
    reads = [first]
    app = FleetApp(lambda: reads[-1], interval_s=60.0, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 4)
        table = app.screen.query_one("#fleet-hosts", HostTable)
        table.move_cursor(2)
        assert table.cell("alpha", "UTIL") == "10 %"
        reads.append(second)
        app.poller.refresh()
        await until(pilot, lambda: table.cell("alpha", "UTIL") == "60 %")
        assert table_hosts(app) == ["alpha", "bravo", "charlie", "delta:9400"]
        assert table.cursor_name == "charlie"  # the cursor stays where it was

    run(app, body)


def eight_gpu_fleet() -> Fleet:
    """A gputop host with 8 GPUs (one lost, an Xid on another) and a down gputop host."""
    answers: dict[str, list[Series]] = {}

    def add(key: str, labels: dict[str, str], value: float) -> None:
        answers.setdefault(key, []).append(Series(labels=labels, value=value))

    big = {"job": "gputop", "instance": "dgx-node-with-a-long-name-01:9400"}
    add("up", big, 1)
    add("up", {"job": "gputop", "instance": "gone:9400"}, 0)
    add("known", {"job": "gputop", "instance": "gone:9400", "hostname": "gone"}, 1)
    add("info", {**big, "hostname": "dgx-node-with-a-long-name-01"}, 1)
    for i in range(8):
        labels = {**big, "hostname": "dgx-node-with-a-long-name-01", "gpu": str(i)}
        labels |= {"UUID": f"GPU-{i}", "modelName": "NVIDIA H100 80GB HBM3"}
        for key, value in (("used", 1000.0 * i), ("free", 80000.0), ("util", 10.0 * i)):
            add(key, labels, value)
    add("lost", {**big, "gpu": "8"}, 1)
    add("xid", {**big, "hostname": "dgx-node-with-a-long-name-01", "gpu": "3", "UUID": "GPU-3"}, 79)
    now = time.time()
    return build_fleet({k: Answer(at=now, series=tuple(v)) for k, v in answers.items()})


def twelve_processes(host: FleetHost) -> tuple[FleetProcess, ...]:
    return tuple(
        FleetProcess(gpu=str(i % 8), pid=str(100 + i), user="ana", command="train", memory_bytes=i)
        for i in range(12)
    )


def run_at(app: FleetApp, size: tuple[int, int], body: Callable[..., Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await body(app, pilot)
            app.poller.stop()

    asyncio.run(main())


def on_screen(widget: Any, app: FleetApp) -> bool:
    region = widget.region
    return region.height > 0 and region.y >= 0 and region.bottom <= app.size.height


def test_at_80x24_an_8_gpu_drill_down_shows_its_header_health_and_process_rows() -> None:
    fleet = eight_gpu_fleet()
    app = FleetApp(
        lambda: fleet, interval_s=60.0, source="http://p:9090", read_processes=twelve_processes
    )

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 2)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        screen = app.screen
        procs = screen.query_one("#host-processes", DataTable)
        await until(pilot, lambda: procs.row_count == 12)
        await pilot.pause(0.1)
        header = screen.query_one("#host-header", Static)
        assert on_screen(header, app) and header.region.y == 0
        assert "8 GPUs" in str(header.render())
        health = screen.query_one("#host-health", Static)
        assert on_screen(health, app)
        assert str(health.render()) == "GPU 8 lost (fell off the bus); Xid 79 on GPU 3"
        cards = list(screen.query(GpuCard))
        assert len(cards) == 8 and all(c.compact and c.region.height == 1 for c in cards)
        assert str(cards[3].render()).startswith(" 3 ")
        # at least five process rows below the table's header, above the hint and the footer
        assert on_screen(procs, app) and procs.region.height >= 6
        assert on_screen(screen.query_one("#host-hint", Static), app)

    run_at(app, (80, 24), body)


def test_at_120x40_the_same_host_keeps_its_panels() -> None:
    fleet = eight_gpu_fleet()
    app = FleetApp(lambda: fleet, interval_s=60.0, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 2)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        await pilot.pause(0.1)
        cards = list(app.screen.query(GpuCard))
        assert len(cards) == 8 and not any(c.compact for c in cards)
        assert cards[0].region.height == 5

    run_at(app, (120, 40), body)


def test_the_host_column_stays_when_the_table_scrolls_sideways() -> None:
    fleet = eight_gpu_fleet()
    app = FleetApp(lambda: fleet, interval_s=60.0, source="http://p:9090")

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 2)
        table = app.screen.query_one("#fleet-hosts", HostTable)
        assert table.max_scroll_x > 0  # 80 columns do not hold the sparklines
        table.scroll_to(x=table.max_scroll_x, animate=False)
        await pilot.pause(0.1)
        header, row = table.render_line(0).text, table.render_line(1).text
        assert header.startswith(" HOST ▲") and row.startswith(" dgx-node-with-a-long-name-01 ")
        assert header.rstrip().endswith(SPARK_COLUMNS[1])  # the last column, scrolled into view
        assert "GPUS" not in header  # scrolled past; the host's column was not
        # a click on a scrolled header still finds its column (MEM, under the fixed HOST)
        table.header_clicked(int(table.scroll_x) + header.index(SPARK_COLUMNS[0]))

    run_at(app, (80, 24), body)


def test_a_down_gputop_host_drill_down_says_it_is_down() -> None:
    fleet = eight_gpu_fleet()
    app = FleetApp(
        lambda: fleet, interval_s=60.0, source="http://p:9090", read_processes=twelve_processes
    )

    async def body(app: FleetApp, pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 2)
        await pilot.press("down", "enter")  # "gone", down
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        title = app.screen.query_one("#host-processes-title", Static)
        await until(pilot, lambda: "down" in str(title.render()))
        assert (
            str(title.render()) == "Processes: not known: the host is down (its last scrape failed)"
        )
        assert "dcgm-exporter" not in str(title.render())

    run_at(app, (80, 24), body)


def test_the_overview_snapshot_at_80x24(snap_compare: Any) -> None:
    fleet = eight_gpu_fleet()
    app = FleetApp(lambda: fleet, interval_s=3600.0, source="http://p:9090")

    async def run_before(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: len(table_hosts(pilot.app)) == 2)  # type: ignore[arg-type]
        pilot.app.screen.query_one("#fleet-header", Static).update("gputop fleet (frozen)")
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
