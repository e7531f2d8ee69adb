"""--timeout: one-shots and logging loops print what the driver gave in time, and say what hung.

A GPU the driver did not answer for is NOT RESPONDING in every view (``--once``, ``--json``,
``doctor``, ``query``, ``dmon``), one line on stderr names the call that hung, and a run that
ends by itself exits 3. Fakes here hang one GPU of a real simulated reading; the in-process
fallback is checked with a driver call that really blocks (SimLibrary.blocked), and the whole
path with a driver process stuck in a scenario's hung call.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputop import sim
from gputop.argtypes import MAX_TIMEOUT_S, MIN_TIMEOUT_S, timeout_seconds
from gputop.cli import main
from gputop.commands.query_fields import UNKNOWN_ERROR
from gputop.commands.schedule import run_on_schedule
from gputop.engine.deadline import (
    DEFAULT_TIMEOUT_S,
    Readings,
    read_within,
    row_timeout,
    timeout_message,
)
from gputop.engine.model import GpuSample, Snapshot, SystemInfo, silent_gpu
from gputop.engine.source import SourceBase
from gputop.errors import DriverTimeout
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]
CALL = "nvmlDeviceGetPowerUsage"
ROOT = Path(__file__).resolve().parents[2]


def note_for(gpu: int, timeout_s: float) -> str:
    return f"{CALL} (GPU {gpu}) did not return within {timeout_s:g} s"


def silent(gpu: GpuSample, waited: float) -> GpuSample:
    """What a driver-process source gives for a GPU that did not answer: identity, no readings
    (the driver-process source's own stand-in, gputop.engine.model.silent_gpu)."""
    return silent_gpu(gpu, error=f"{CALL} did not return", stale_s=waited)


class HungSource(SourceBase):
    """A source whose GPU ``hung`` never answers: snapshot_within gives the other GPUs of a real
    simulated reading and that one NOT_RESPONDING, as gputop.engine.isolated does.

    ``same_reading``: every call answers with the same driver reading (seq), as a driver process
    stuck in one call does. ``hang_after``: the first that many readings are whole.
    """

    partial_readings = True  # as the driver process's source

    def __init__(
        self,
        inner: FixedTimeSource,
        hung: int | None,
        *,
        same_reading: bool = False,
        hang_after: int = 0,
        interrupt_after: int | None = None,
    ) -> None:
        self.inner = inner
        self.hung = hung
        self.same_reading = same_reading
        self.hang_after = hang_after
        self.interrupt_after = interrupt_after
        self.simulated = True
        self.dev_dir = inner.dev_dir  # the simulated box's own folder, never the real /dev
        self.timeouts: list[float] = []
        self.closed = False
        self._held: Snapshot | None = None

    def snapshot(self) -> Snapshot:
        raise AssertionError("a read without a deadline could hang for ever")

    def snapshot_within(self, timeout_s: float) -> Snapshot:
        if self.interrupt_after is not None and len(self.timeouts) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.timeouts.append(timeout_s)
        if self.same_reading and self._held is not None:
            return self._held
        snap = self.inner.snapshot()
        if self.hung is None or len(self.timeouts) <= self.hang_after:
            return snap
        gpus = tuple(silent(g, timeout_s) if g.index == self.hung else g for g in snap.gpus)
        snap = replace(snap, gpus=gpus, driver_note=note_for(self.hung, timeout_s))
        if self.same_reading:
            self._held = snap
        return snap

    def close(self) -> None:
        self.closed = True
        self.inner.close()

    def request_probes(self, probes: Any, explain: Any = ()) -> None:
        self.inner.request_probes(probes, explain)


class NothingSource(SourceBase):
    """A source whose driver hung before it listed its GPUs: nothing at all to show."""

    partial_readings = True  # as the driver process's source, which has no GPUs to answer with
    simulated = True
    dev_dir = os.devnull  # no box: no device files to read

    def __init__(self) -> None:
        self.closed = False

    def snapshot(self) -> Snapshot:
        raise AssertionError("a read without a deadline could hang for ever")

    def snapshot_within(self, timeout_s: float) -> Snapshot:
        raise DriverTimeout(
            f"the NVIDIA driver did not answer within {timeout_s:g} s "
            "(nvmlInitWithFlags did not return)"
        )

    def close(self) -> None:
        self.closed = True


def one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gputop: ")
    return lines[0]


def csv_rows(out: str) -> list[list[str]]:
    return [line.split(", ") for line in out.splitlines()]


# -- --once, --json, doctor ----------------------------------------------------------------------


def test_once_shows_the_silent_gpu_and_the_others_as_usual(box: Box, run_cli: Cli) -> None:
    healthy = run_cli(box("demo"), "--once")
    source = HungSource(box("demo"), hung=2)
    result = run_cli(source, "--once", "--timeout", "2")
    assert healthy.rc == 0 and result.rc == DriverTimeout.exit_code == 3
    assert source.timeouts == [2.0] and source.closed
    lines, before = result.out.splitlines(), healthy.out.splitlines()
    assert len(lines) == len(before) == 5  # the header and the demo's four GPUs
    assert lines[0] == before[0]
    at = next(i for i, line in enumerate(lines) if line.startswith("[2"))
    assert lines[at].endswith(f"| NOT RESPONDING for 2 s ({CALL} did not return)")
    assert "°C" not in lines[at] and "MiB" not in lines[at]
    for i in range(1, 5):
        if i != at:  # the others: their readings and processes, as without the hang
            assert "°C" in lines[i] and lines[i].split("|")[1:] == before[i].split("|")[1:]
    assert one_line(result.err) == f"gputop: GPU 2 NOT RESPONDING: {note_for(2, 2)}"


def test_once_default_timeout(box: Box, run_cli: Cli) -> None:
    source = HungSource(box("demo"), hung=None)
    result = run_cli(source, "--once")
    assert result.rc == 0 and result.err == ""
    assert source.timeouts == [DEFAULT_TIMEOUT_S]


def test_json_has_the_state_stale_s_and_driver_note(box: Box, run_cli: Cli) -> None:
    uuid = json.loads(run_cli(box("demo"), "--json").out)["gpus"][1]["uuid"]
    source = HungSource(box("demo"), hung=1)
    result = run_cli(source, "--json", "--timeout", "1.5")
    assert result.rc == 3
    data = json.loads(result.out)
    states = {g["index"]: g["state"] for g in data["gpus"]}
    assert states == {0: "ok", 1: "not-responding", 2: "ok", 3: "ok"}
    gpu1 = data["gpus"][1]
    assert gpu1["stale_s"] == 1.5 and gpu1["error"] == f"{CALL} did not return"
    assert gpu1["temperature_c"] is None and gpu1["uuid"] == uuid is not None
    assert all(g["stale_s"] is None for g in data["gpus"] if g["index"] != 1)
    assert data["driver_note"] == note_for(1, 1.5)
    assert data["sampler_restarts"] == 0
    assert one_line(result.err) == f"gputop: GPU 1 NOT RESPONDING: {note_for(1, 1.5)}"


@pytest.mark.parametrize("before", [False, True], ids=["after-doctor", "before-doctor"])
def test_doctor_says_the_gpu_did_not_answer(box: Box, run_cli: Cli, before: bool) -> None:
    source = HungSource(box("demo"), hung=1)
    argv = ("--timeout", "1.5", "doctor") if before else ("doctor", "--timeout", "1.5")
    result = run_cli(source, *argv)
    assert result.rc == 3
    assert source.timeouts == [1.5] and source.closed
    gpu_lines = [line for line in result.out.splitlines() if line.startswith("GPU ")]
    assert len(gpu_lines) == 4
    assert gpu_lines[1].startswith("GPU 1  NVIDIA A100-SXM4-80GB: NOT RESPONDING: ")
    assert "did not answer for it within 2 s" in gpu_lines[1]  # 1.5 s, to the second
    assert f"({CALL} did not return)" in gpu_lines[1]
    assert all("NOT RESPONDING" not in line for i, line in enumerate(gpu_lines) if i != 1)
    verdict = result.out.splitlines()[-1]
    assert "GPU 1 did not answer: not diagnosed" in verdict
    assert one_line(result.err) == f"gputop: GPU 1 NOT RESPONDING: {note_for(1, 1.5)}"


@pytest.mark.parametrize(
    "argv",
    [
        ("--once",),
        ("--json",),
        ("doctor",),
        ("query", "--query-gpu=index"),
        ("query", "--query-gpu=index", "-l", "0.1", "--count", "2"),
        ("dmon", "-c", "2"),
    ],
    ids=["once", "json", "doctor", "query", "query-loop", "dmon"],
)
def test_nothing_at_all_in_time_is_one_line_and_exit_3(run_cli: Cli, argv: tuple[str, ...]) -> None:
    source = NothingSource()
    result = run_cli(source, *argv, "--timeout", "1")
    assert result.rc == 3 and result.out == "" and source.closed
    line = one_line(result.err)  # a loop's first row waits 0.5 s for a source with no wait_ready
    assert line.startswith("gputop: the NVIDIA driver did not answer within ")
    assert line.endswith(" s (nvmlInitWithFlags did not return)")


# -- query ---------------------------------------------------------------------------------------

FIELDS = "--query-gpu=index,name,uuid,temperature.gpu,power.draw"


def test_query_once_prints_unknown_error_for_the_silent_gpus_readings(
    box: Box, run_cli: Cli
) -> None:
    healthy = csv_rows(run_cli(box("demo"), "query", FIELDS, "--format=csv,noheader").out)
    source = HungSource(box("demo"), hung=3)
    result = run_cli(source, "query", FIELDS, "--format=csv,noheader", "--timeout", "0.5")
    assert result.rc == 3 and source.timeouts == [0.5]
    rows = csv_rows(result.out)
    assert len(rows) == len(healthy) == 4
    assert rows[:3] == healthy[:3]
    # Identity as the driver gave it when it opened; every reading the error nvidia-smi prints.
    assert rows[3] == [*healthy[3][:3], UNKNOWN_ERROR, UNKNOWN_ERROR]
    assert one_line(result.err) == f"gputop: GPU 3 NOT RESPONDING: {note_for(3, 0.5)}"


def test_query_loop_prints_every_row_on_schedule(box: Box, run_cli: Cli) -> None:
    source = HungSource(box("demo"), hung=1, hang_after=1)
    started = time.monotonic()
    result = run_cli(source, "query", FIELDS, "-l", "0.2", "--count", "3", "-i", "0,1")
    took = time.monotonic() - started
    assert result.rc == 3
    # Each row waited at most max(0.9 * 0.2, 0.5) s (the cap, --timeout, is 5 s), the first too.
    assert source.timeouts == [0.5, 0.5, 0.5]
    assert took < 3
    rows = csv_rows(result.out)
    assert rows[0] == ["index", "name", "uuid", "temperature.gpu", "power.draw [W]"]
    data = rows[1:]
    assert [r[0] for r in data] == ["0", "1"] * 3  # no row skipped, none twice
    assert data[1][3:] != [UNKNOWN_ERROR] * 2  # the first reading was whole
    for row in (data[3], data[5]):
        assert row[3:] == [UNKNOWN_ERROR, UNKNOWN_ERROR] and row[1] == data[1][1]
    assert all(UNKNOWN_ERROR not in r for r in data[0::2])
    assert one_line(result.err) == f"gputop: GPU 1 NOT RESPONDING: {note_for(1, 0.5)}"


def test_loop_rows_wait_at_most_the_timeout(box: Box, run_cli: Cli) -> None:
    source = HungSource(box("demo"), hung=0)
    result = run_cli(
        source, "query", "--query-gpu=index", "-lms", "100", "--count", "2", "--timeout", "0.2"
    )
    assert result.rc == 3 and source.timeouts == [0.2, 0.2]


def test_a_reading_is_never_printed_twice(box: Box, run_cli: Cli) -> None:
    """A driver stuck on GPU 1 answers row after row with the reading it began rows ago: GPU 0's
    values from it are printed once; the later rows have none for it either."""
    source = HungSource(box("demo"), hung=1, same_reading=True)
    result = run_cli(
        source, "query", "--query-gpu=index,temperature.gpu", "-lms", "100", "--count", "3"
    )
    assert result.rc == 3
    data = csv_rows(result.out)[1:]
    gpu0 = [r[1] for r in data if r[0] == "0"]
    assert len(gpu0) == 3 and gpu0[0].isdigit()
    assert gpu0[1:] == [UNKNOWN_ERROR, UNKNOWN_ERROR]
    assert [r[1] for r in data if r[0] == "1"] == [UNKNOWN_ERROR] * 3
    assert "GPUs 0, 1, 2, 3 NOT RESPONDING" in one_line(result.err)


def test_an_interrupted_endless_loop_keeps_its_exit_code(box: Box, run_cli: Cli) -> None:
    source = HungSource(box("demo"), hung=2, interrupt_after=3)
    result = run_cli(source, "query", "--query-gpu=index", "-lms", "100", "-i", "2")
    assert result.rc == 0  # as before: a loop without --count ends by Ctrl-C
    assert result.out.splitlines()[1:] == ["2"] * 3
    assert one_line(result.err) == f"gputop: GPU 2 NOT RESPONDING: {note_for(2, 0.5)}"


# -- dmon ----------------------------------------------------------------------------------------


def test_dmon_prints_a_dash_in_every_column_of_the_silent_gpu(box: Box, run_cli: Cli) -> None:
    source = HungSource(box("demo"), hung=3)
    result = run_cli(source, "dmon", "-c", "2", "-d", "0.1")
    assert result.rc == 3 and source.timeouts == [0.5, 0.5]
    data = [line.split() for line in result.out.splitlines() if not line.startswith("#")]
    assert [row[0] for row in data] == ["0", "1", "2", "3"] * 2
    for row in data:
        if row[0] == "3":
            assert row[1:] == ["-"] * 11  # pwr gtemp mtemp | sm mem enc dec jpg ofa | mclk pclk
        else:
            assert row[1].isdigit() and row[2].isdigit()  # pwr, gtemp
    assert one_line(result.err) == f"gputop: GPU 3 NOT RESPONDING: {note_for(3, 0.5)}"


def test_dmon_without_a_silent_gpu_exits_0(box: Box, run_cli: Cli) -> None:
    source = HungSource(box("demo"), hung=None)
    result = run_cli(source, "dmon", "-c", "2", "-d", "0.1", "--timeout", "0.3")
    assert result.rc == 0 and result.err == "" and source.timeouts == [0.3, 0.3]


# -- the in-process fallback: a driver call that really blocks -----------------------------------


@pytest.fixture
def blocked_call(
    sim_source: Callable[..., Any],
) -> Iterator[tuple[Any, sim.SimLibrary, threading.Event]]:
    """An in-process simulated driver whose CALL blocks until the event is set (after the test:
    the reading threads left waiting in it end before the simulated driver is removed)."""
    source, lib = sim_source(sim.load_scenario("demo"))
    gate = threading.Event()
    yield source, lib, gate
    gate.set()
    for thread in threading.enumerate():
        if thread.name == "gputop-deadline":
            thread.join(10)
            assert not thread.is_alive()


def test_a_blocked_one_shot_returns_within_its_timeout(
    blocked_call: tuple[Any, Any, threading.Event], run_cli: Cli
) -> None:
    source, lib, gate = blocked_call
    lib.blocked[CALL] = gate
    started = time.monotonic()
    result = run_cli(FixedTimeSource(source), "--once", "--timeout", "0.3")
    took = time.monotonic() - started
    assert result.rc == 3 and result.out == ""
    assert one_line(result.err) == "gputop: the NVIDIA driver did not answer within 0.3 s"
    assert 0.3 <= took < 2
    assert any(t.name == "gputop-deadline" and t.is_alive() for t in threading.enumerate())


class BlockAfterFirst(SourceBase):
    """The in-process driver, whose CALL starts blocking after the first reading."""

    def __init__(self, source: Any, lib: Any, gate: threading.Event) -> None:
        self.inner, self.lib, self.gate = source, lib, gate
        self.simulated = True
        self.dev_dir = source.dev_dir
        self.reads = 0

    def snapshot(self) -> Snapshot:
        self.reads += 1
        snap: Snapshot = self.inner.snapshot()
        self.lib.blocked[CALL] = self.gate
        return snap

    def close(self) -> None:
        self.inner.close()


def test_a_blocked_loop_prints_its_rows_from_the_gpus_it_knows(
    blocked_call: tuple[Any, Any, threading.Event], run_cli: Cli
) -> None:
    source, lib, gate = blocked_call
    wrapped = BlockAfterFirst(source, lib, gate)
    started = time.monotonic()
    result = run_cli(wrapped, "dmon", "-c", "3", "-d", "0.1", "-s", "u")
    took = time.monotonic() - started
    assert result.rc == 3
    data = [line.split() for line in result.out.splitlines() if not line.startswith("#")]
    assert [row[0] for row in data] == ["0", "1", "2", "3"] * 3
    assert all(row[1].isdigit() for row in data[:4])
    assert all(row[1:] == ["-"] * 6 for row in data[4:])  # sm mem enc dec jpg ofa
    # One reading thread waits in the blocked call; later rows wait on it, not on a new one.
    assert wrapped.reads == 2
    assert 1.0 <= took < 4  # two rows of 0.5 s each
    assert one_line(result.err) == (
        "gputop: GPUs 0, 1, 2, 3 NOT RESPONDING: the NVIDIA driver did not answer within 0.5 s"
    )


def test_a_late_reading_is_not_handed_out_after_its_row() -> None:
    """read_within's fallback: a reading that came in after its row was printed is old; the
    next row reads anew (as the driver-process source does)."""
    gate = threading.Event()
    taken: list[int] = []

    class Slow(SourceBase):
        simulated, dev_dir = True, os.devnull

        def snapshot(self) -> Snapshot:
            gate.wait()
            taken.append(len(taken) + 1)
            system = SystemInfo(hostname="box")
            return Snapshot(
                seq=len(taken), taken_at_wall=0, taken_at_mono=0, system=system, gpus=()
            )

        def close(self) -> None:
            pass

    readings = Readings(Slow())
    with pytest.raises(DriverTimeout):
        readings.read(0.05)
    gate.set()
    deadline = time.monotonic() + 5
    while not taken and time.monotonic() < deadline:
        time.sleep(0.01)
    assert readings.read(5).seq == 2  # not the first one, which came in late


# -- the driver process, stuck in a scenario's hung call -----------------------------------------


@pytest.fixture
def hung_scenario(tmp_path: Path) -> Path:
    path = tmp_path / "hung.toml"
    path.write_text(
        'name = "hung"\n[[gpu]]\nname = "Hung GPU"\ncount = 3\n'
        f'[[fault]]\ncall = "{CALL}"\nkind = "hang"\ngpu = 1\n'
    )
    return path


def gputop(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP", "TEXTUAL"))}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200")
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    return result, time.monotonic() - started


def test_a_hung_driver_process_once(hung_scenario: Path) -> None:
    result, took = gputop("--scenario", str(hung_scenario), "--once", "--timeout", "2")
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert "°C" in lines[1]  # GPU 0 answered before GPU 1's call hung
    assert "NOT RESPONDING" in lines[2] and f"({CALL} did not return)" in lines[2]
    assert "NOT RESPONDING" in lines[3]  # not read: the driver is stuck on GPU 1
    assert result.stderr == f"gputop: GPUs 1, 2 NOT RESPONDING: {note_for(1, 2)}\n"
    assert took < 10  # the stuck driver process is killed, never waited for


def test_a_hung_driver_process_query_loop(hung_scenario: Path) -> None:
    result, took = gputop(
        "--scenario", str(hung_scenario), "query", "--query-gpu=index,temperature.gpu",
        "-l", "1", "--count", "3", "--format=csv,noheader",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    rows = csv_rows(result.stdout)
    assert [r[0] for r in rows] == ["0", "1", "2"] * 3  # every row, on schedule
    assert all(r[1] == UNKNOWN_ERROR for r in rows if r[0] == "1")
    # GPU 0 answers in every row: after the first, the driver process reads it (and GPU 2,
    # not read behind the stuck call in the first row) beside the reading stuck on GPU 1.
    assert all(r[1].isdigit() for r in rows if r[0] == "0")
    assert all(r[1].isdigit() for r in rows[3:] if r[0] == "2")
    line = one_line(result.stderr)
    assert line.startswith("gputop: GPU 1 NOT RESPONDING: ") and f"{CALL} (GPU 1)" in line
    assert took < 10


# -- the option ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "-inf", "abc", "", "1e9", "3601"])
@pytest.mark.parametrize(
    "argv",
    [("--once",), ("--json",), ("doctor",), ("query", "--query-gpu=index"), ("dmon",)],
    ids=["once", "json", "doctor", "query", "dmon"],
)
def test_a_bad_timeout_is_one_line_and_exit_2(
    argv: tuple[str, ...], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, f"--timeout={value}"])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = captured.err.rstrip("\n")
    assert "\n" not in line and "Traceback" not in line
    assert "argument --timeout" in line
    assert ("not a number" in line) if value in ("abc", "") else ("0.1 s to 3600 s" in line)


def test_a_negative_timeout_after_a_space_is_refused_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["doctor", "--timeout", "-1"])
    assert exit_.value.code == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_timeout_bounds() -> None:
    assert timeout_seconds("0.1") == MIN_TIMEOUT_S
    assert timeout_seconds("3600") == MAX_TIMEOUT_S
    assert timeout_seconds(" 2.5 ") == 2.5
    assert all(math.isfinite(timeout_seconds(v)) for v in ("1", "1e3", "0.25"))


def test_row_timeout() -> None:
    assert row_timeout(None, 5.0) == 5.0  # back to back: the whole timeout
    assert row_timeout(1.0, 5.0) == 0.9  # until the row is due
    assert row_timeout(0.1, 5.0) == 0.5  # never less than half a second
    assert row_timeout(60.0, 5.0) == 5.0  # the timeout caps it
    assert row_timeout(0.1, 0.2) == 0.2


def test_read_within_and_timeout_message(box: Box) -> None:
    source = HungSource(box("demo"), hung=0)
    snapshot = read_within(source, 0.7)
    assert source.timeouts == [0.7]
    assert timeout_message(snapshot) == f"GPU 0 NOT RESPONDING: {note_for(0, 0.7)}"
    whole = read_within(HungSource(box("demo"), hung=None), 1)
    assert timeout_message(whole) is None


def test_a_schedule_start_in_the_future_or_long_ago_is_now() -> None:
    now = [100.0]
    started: list[float] = []

    def sleep(seconds: float) -> None:
        now[0] += seconds

    for start in (1e9, 10.0):
        started.clear()
        run_on_schedule(
            lambda k: started.append(now[0]),
            interval_s=1.0,
            count=3,
            start=start,
            clock=lambda: now[0],
            sleep=sleep,
        )
        assert [s - started[0] for s in started] == [0.0, 1.0, 2.0]


def test_a_driver_that_crashes_in_a_call_ends_a_one_shot_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "crash.toml"
    path.write_text(
        '[[gpu]]\nname = "NVIDIA T4"\ncount = 2\n'
        '[[fault]]\ncall = "nvmlDeviceGetPowerUsage"\nkind = "crash"\ngpu = 1\n',
        encoding="utf-8",
    )
    result, took = gputop("--scenario", str(path), "--once", "--timeout", "5")
    assert result.returncode == 3, result.stderr
    crashed = "DRIVER CRASHED (SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage)"
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    # GPU 0 was read before the crash: its reading is kept, said to be old; GPU 1 crashed it.
    assert "STALE" in lines[1] and "°C" in lines[1] and "NOT RESPONDING" not in lines[1]
    assert "NOT RESPONDING" in lines[2] and crashed in lines[2]
    assert result.stderr == f"gputop: GPU 1 NOT RESPONDING: {crashed}\n"
    assert "Traceback" not in result.stderr and "Fatal Python error" not in result.stderr
    assert took < 5  # a crash is known at once: no waiting for the timeout
