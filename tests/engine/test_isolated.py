"""The driver in its own process: real driver processes on simulated boxes that crash and hang.

Every test here starts real processes: gputop's driver process (gputop.engine.child) serving a
scenario file whose [[fault]] tables make a call SIGSEGV the process or block inside it.
Scenario time counts from the source's start; mid-session trouble begins at 2 s, well after the
first reading even on a loaded 2-core machine, and the tests wait for it rather than sleep.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gputop.engine.isolated import DriverConfig, DriverCrashed, IsolatedSource
from gputop.engine.model import GpuState, Snapshot
from gputop.engine.ourselves import is_ourselves
from gputop.engine.sampler import Sampler
from gputop.errors import DriverTimeout, UsageError
from gputop.sources import open_source
from tests.processes import gone, gone_within

ROOT = Path(__file__).resolve().parents[2]

BOX = """
name = "isolation"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
count = 3
"""


def first_silent(source: IsolatedSource, timeout_s: float) -> tuple[Snapshot, float]:
    """Read with ``snapshot_within(timeout_s)`` until a GPU does not answer (at most 8 s):
    that reading, and how long its call took."""
    end = time.monotonic() + 8
    while True:
        began = time.monotonic()
        snap = source.snapshot_within(timeout_s)
        took = time.monotonic() - began
        if any(g.state is not GpuState.OK for g in snap.gpus) or time.monotonic() > end:
            return snap, took
        time.sleep(0.05)


@pytest.fixture
def scenario_file(tmp_path: Path) -> Callable[[str], str]:
    """scenario_file(faults_toml) -> path of a 3-GPU box with those [[fault]] tables."""

    def write(faults: str) -> str:
        path = tmp_path / "box.toml"
        path.write_text(BOX + textwrap.dedent(faults), encoding="utf-8")
        return str(path)

    return write


@pytest.fixture
def opened() -> Iterator[Callable[..., IsolatedSource]]:
    """opened(scenario=path) -> an IsolatedSource, closed after the test (its process checked)."""
    sources: list[IsolatedSource] = []

    def open_(**config: object) -> IsolatedSource:
        source = IsolatedSource(DriverConfig(**config))  # type: ignore[arg-type]
        sources.append(source)
        return source

    yield open_
    for source in sources:
        pid = source.pid
        source.close()
        if pid is not None:
            assert gone_within(pid, 3), f"driver process {pid} outlived close()"


def test_snapshots_come_from_another_process_that_holds_the_driver(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    source = opened(scenario=scenario_file(""))
    first = source.snapshot()
    second = source.snapshot()
    assert [g.name for g in first.gpus] == ["NVIDIA A100-SXM4-80GB"] * 3
    assert all(g.state is GpuState.OK and g.memory_total_bytes for g in first.gpus)
    assert second.seq > first.seq
    assert source.simulated is True
    assert source.pid is not None and source.pid != os.getpid()
    assert is_ourselves(source.pid)  # never listed as a process holding the GPU


def test_gputop_itself_never_loads_the_driver_module() -> None:
    code = (
        "import sys\n"
        "from gputop.sources import open_source\n"
        "s = open_source(demo='dgx', isolated=True)\n"
        "snap = s.snapshot()\n"
        "s.close()\n"
        "print(len(snap.gpus), 'pynvml' in sys.modules, 'gputop.sim' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.split() == ["8", "False", "False"], out.stderr


def test_a_crash_mid_session_is_named_and_the_driver_comes_back(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlDeviceGetPowerUsage"
        kind = "crash"
        gpu = 1
        after_s = 2.0
        until_s = 3.0
    """)
    source = opened(scenario=path)
    assert len(source.snapshot().gpus) == 3
    first_pid = source.pid
    crashed: DriverCrashed | None = None
    end = time.monotonic() + 8
    while crashed is None and time.monotonic() < end:
        try:
            source.snapshot()
        except DriverCrashed as exc:
            crashed = exc
        time.sleep(0.05)
    assert crashed is not None, "the driver never crashed"
    assert "SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage" in str(crashed)
    note = source.driver_note
    assert note is not None and note.startswith("DRIVER CRASHED (SIGSEGV in libnvidia-ml")
    assert note.endswith("— restarting")
    assert first_pid is not None and gone_within(first_pid, 1)
    # Restarted with backoff until the scenario's driver stops crashing (at 3 s), then fine.
    end = time.monotonic() + 10
    good = None
    while time.monotonic() < end and good is None:
        try:
            good = source.snapshot()
        except DriverCrashed:
            time.sleep(0.1)
    assert good is not None, "the driver process never came back"
    assert len(good.gpus) == 3 and all(g.state is GpuState.OK for g in good.gpus)
    assert source.restarts >= 1
    assert source.pid != first_pid
    assert source.driver_note is None


def read(snapshot: Snapshot) -> bool:
    """True when some GPU of ``snapshot`` was read (not only named)."""
    return any(g.state is GpuState.OK for g in snapshot.gpus)


def test_a_crash_at_start_says_so_and_the_sampler_carries_it(
    scenario_file: Callable[[str], str],
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlInitWithFlags"
        kind = "crash"
        until_s = 1.5
    """)
    source = IsolatedSource(DriverConfig(scenario=path))
    seen = []
    sampler = Sampler(source, on_snapshot=seen.append, interval_s=0.2)
    sampler.start()
    try:
        end = time.monotonic() + 10
        while time.monotonic() < end and not any(read(s) for s in seen):
            time.sleep(0.05)
    finally:
        sampler.stop()
        source.close()
    crashed = [s for s in seen if s.driver_note and "DRIVER CRASHED" in s.driver_note]
    assert crashed, "no snapshot said the driver crashed"
    assert "SIGSEGV in libnvidia-ml: nvmlInit" in (crashed[0].driver_note or "")
    assert crashed[0].gpus == ()  # nothing was ever read: no made-up GPUs
    # (A restarted driver process that names its GPUs before its first reading is in shows
    # them NOT_RESPONDING, still "restarting": the first real reading ends that.)
    fresh = [s for s in seen if read(s)]
    assert fresh, "the sampler never recovered"
    assert fresh[0].sampler_restarts >= 1 and fresh[0].driver_note is None


def test_a_hang_at_start_ends_a_one_shot_within_its_timeout(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlInitWithFlags"
        kind = "hang"
    """)
    source = opened(scenario=path)
    began = time.monotonic()
    with pytest.raises(DriverTimeout) as timed_out:
        source.snapshot_within(1.0)
    assert time.monotonic() - began < 3.0  # the call hangs for ever: a bound at all is the point
    assert "did not answer within 1 s (nvmlInitWithFlags did not return)" in str(timed_out.value)
    assert source.driver_note is not None
    assert "waiting for the driver: nvmlInitWithFlags not answering" in source.driver_note


def test_a_hang_mid_reading_gives_what_answered_and_marks_the_rest(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlDeviceGetTemperature"
        kind = "hang"
        gpu = 1
        after_s = 2.0
        until_s = 5.0
    """)
    source = opened(scenario=path)
    assert all(g.state is GpuState.OK for g in source.snapshot_within(5).gpus)
    snap, took = first_silent(source, 1.0)
    assert took < 2.5  # the call hangs for 3 s: the deadline, not the driver, ended it
    states = [g.state for g in snap.gpus]
    assert states == [GpuState.OK, GpuState.NOT_RESPONDING, GpuState.NOT_RESPONDING]
    stuck, behind = snap.gpus[1], snap.gpus[2]
    assert stuck.error == "nvmlDeviceGetTemperature did not return"
    assert behind.error == "not read: the driver is stuck on GPU 1"
    assert stuck.name == "NVIDIA A100-SXM4-80GB" and stuck.uuid  # identity from the start
    assert stuck.temperature_c is None and stuck.stale_s is not None and stuck.stale_s > 0.3
    assert snap.driver_note == "nvmlDeviceGetTemperature (GPU 1) did not return within 1 s"
    # The stuck reading is left in flight: the next call reads the other GPUs beside it.
    beside = source.snapshot_within(1.0)
    assert beside.seq > snap.seq
    assert [g.state for g in beside.gpus] == [GpuState.OK, GpuState.NOT_RESPONDING, GpuState.OK]
    assert beside.gpus[1].error == "nvmlDeviceGetTemperature did not return"
    # Once the hang ends (at 5 s) GPU 1 is read again.
    end = time.monotonic() + 8
    while time.monotonic() < end:
        later = source.snapshot_within(1.0)
        if all(g.state is GpuState.OK for g in later.gpus):
            break
        time.sleep(0.1)
    assert all(g.state is GpuState.OK for g in later.gpus)


def test_close_never_waits_for_a_driver_process_stuck_in_a_call(
    scenario_file: Callable[[str], str],
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlDeviceGetTemperature"
        kind = "hang"
        after_s = 2.0
    """)
    source = IsolatedSource(DriverConfig(scenario=path))
    source.snapshot()
    pid = source.pid
    assert pid is not None
    first_silent(source, 0.3)  # a reading is now stuck in the driver for good
    began = time.monotonic()
    source.close()
    assert time.monotonic() - began < 2.0  # never waits for the process (stuck for ever)
    assert gone_within(pid, 2)


def test_the_demo_processes_end_with_the_driver_process(
    opened: Callable[..., IsolatedSource],
) -> None:
    source = opened(demo="demo")
    snap = source.snapshot()
    dev_dir = Path(source.dev_dir)
    assert dev_dir.is_dir() and dev_dir.name == "dev"
    actors = {p.pid for g in snap.gpus for p in g.processes if not gone(p.pid)}
    assert actors, "the demo's real processes are listed"
    source.close()
    for pid in actors:
        assert gone_within(pid, 3), f"demo process {pid} outlived gputop"
    assert not dev_dir.parent.exists()


def test_when_gputop_is_killed_its_driver_process_and_demo_go_too(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from gputop.sources import open_source\n"
        "s = open_source(demo='demo', isolated=True)\n"
        "snap = s.snapshot()\n"
        "pids = sorted({p.pid for g in snap.gpus for p in g.processes})\n"
        "print(s.pid, s.dev_dir, *pids, flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    words = proc.stdout.readline().split()
    child, dev_dir, listed = int(words[0]), Path(words[1]), [int(w) for w in words[2:]]
    proc.kill()
    proc.wait()
    assert gone_within(child, 3)
    for pid in listed:
        assert gone_within(pid, 3)
    end = time.monotonic() + 3
    while dev_dir.parent.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert not dev_dir.parent.exists()


def test_a_bad_scenario_is_the_same_one_line_error(opened: Callable[..., IsolatedSource]) -> None:
    source = opened(demo="no-such-box")
    with pytest.raises(UsageError, match="no scenario 'no-such-box'"):
        source.wait_ready(10)


def test_in_process_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTOP_IN_PROCESS", "1")
    source = open_source(demo="dgx", isolated=True)
    try:
        assert not isinstance(source, IsolatedSource)
    finally:
        source.close()


def test_restart_backoff_grows(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlInitWithFlags"
        kind = "crash"
    """)
    source = opened(scenario=path)
    attempts: list[float] = []
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        with contextlib.suppress(DriverCrashed):
            source.wait_ready(2)
        if not attempts or source.restarts > len(attempts) - 1:
            attempts.append(time.monotonic())
        time.sleep(0.05)
    gaps = [b - a for a, b in itertools.pairwise(attempts)]
    # 0.5 s, 1 s, 2 s ...: within 4 s at most four starts, and they get further apart.
    assert 2 <= len(attempts) <= 4, attempts
    assert all(later > earlier for earlier, later in itertools.pairwise(gaps))
    assert "SIGSEGV in libnvidia-ml: nvmlInit" in (source.driver_note or "")


def test_a_short_timeout_still_gets_the_gpus_that_answered(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlDeviceGetTemperature"
        kind = "hang"
        gpu = 2
        after_s = 2.0
    """)
    source = opened(scenario=path)
    source.snapshot()
    # 0.3 s: shorter than the driver process's watchdog takes to speak up by itself.
    snap, _ = first_silent(source, 0.3)
    states = [g.state for g in snap.gpus]
    assert states == [GpuState.OK, GpuState.OK, GpuState.NOT_RESPONDING]
    assert snap.driver_note == "nvmlDeviceGetTemperature (GPU 2) did not return within 0.3 s"


def test_a_reading_that_comes_too_late_is_dropped_not_kept(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    path = scenario_file("""
        [[fault]]
        call = "nvmlDeviceGetTemperature"
        kind = "hang"
        after_s = 2.0
        until_s = 3.0
    """)
    source = opened(scenario=path)
    source.snapshot()
    silent, _ = first_silent(source, 0.3)
    assert any(g.state is GpuState.NOT_RESPONDING for g in silent.gpus)
    late = silent.seq
    time.sleep(1.5)  # the hang ends; the late reading arrives with nobody waiting for it
    fresh = source.snapshot_within(5)
    assert fresh.seq > late and all(g.state is GpuState.OK for g in fresh.gpus)
    proc = source._proc
    assert proc is not None and late not in proc.results and not proc.gpus


def test_closing_while_the_demo_is_still_starting_leaves_nothing_behind() -> None:
    source = IsolatedSource(DriverConfig(demo="demo"))
    owner = str(source.pid)
    first: psutil.Process | None = None
    end = time.monotonic() + 20
    while first is None and time.monotonic() < end:  # the first actor is up, others are not
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if proc.environ().get("GPUTOP_ACTOR_OWNER") == owner:
                    first = proc
                    break
    assert first is not None, "the demo never started"
    folder = Path(first.cwd())
    source.close()
    end = time.monotonic() + 5
    while folder.exists() and time.monotonic() < end:
        time.sleep(0.05)
    assert not folder.exists(), f"{folder} left behind"
    left = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.environ().get("GPUTOP_ACTOR_OWNER") == owner and not gone(proc.pid):
                left.append(proc.pid)
    assert all(gone_within(pid, 3) for pid in left), f"demo processes left running: {left}"


def test_a_reading_cut_short_keeps_the_counters_of_the_gpus_that_answered(
    opened: Callable[..., IsolatedSource], scenario_file: Callable[[str], str]
) -> None:
    """The exporter's counter series must not blink out whenever one GPU is slow: the GPUs that
    answered keep the counters of the last whole reading; the silent one has none."""
    path = scenario_file("""
        [[fault]]
        call = "nvmlDeviceGetTemperature"
        kind = "hang"
        gpu = 1
        after_s = 2.0
        until_s = 6.0
    """)
    source = opened(scenario=path, counters=True)
    whole = source.snapshot_within(5)
    assert [c.index for c in whole.counters] == [0, 1, 2]
    snap, _ = first_silent(source, 1.0)
    assert [g.state for g in snap.gpus][:2] == [GpuState.OK, GpuState.NOT_RESPONDING]
    assert [c.index for c in snap.counters] == [0]
