"""Shared fixtures: the simulated driver, installed per test and always removed afterwards.

``box`` is a fixed-time Source on it, for tests that compare printed output.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gputop import api, sim
from gputop.engine.model import Snapshot
from gputop.engine.source import Source, SourceBase
from gputop.sim.scenario import Scenario

SimFactory = Callable[..., tuple[Any, sim.SimLibrary]]
FIXED_WALL = 1706704496.789  # 2024-01-31 12:34:56.789 UTC


class FixedTimeSource(SourceBase):
    """A Source whose snapshots all carry the same wall-clock time (stable timestamps)."""

    def __init__(self, source: Source, wall: float | None = FIXED_WALL) -> None:
        self.inner = source
        self.wall = wall
        self.simulated = True
        self.dev_dir = source.dev_dir  # the simulated box's own folder, never the real /dev
        self.calls = 0

    def snapshot(self) -> Snapshot:
        self.calls += 1
        snap = self.inner.snapshot()
        return snap if self.wall is None else replace(snap, taken_at_wall=self.wall)

    def close(self) -> None:
        self.inner.close()

    def request_probes(self, probes: Any, explain: Any = ()) -> None:
        """Pass a query's extra readings on to the driver (gputop.commands.query.ask_driver)."""
        self.inner.request_probes(probes, explain)


def shipped(name: str) -> Scenario:
    """A shipped scenario, without slow calls (faults has a 1.5 s one) so tests stay fast."""
    scenario = sim.load_scenario(name)
    return replace(scenario, gpus=tuple(replace(g, slow_calls={}) for g in scenario.gpus))


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times are shown in local time (golden files, the header): one zone everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def _sim_never_leaks() -> Iterator[None]:
    """pynvml keeps the loaded library in a global: one test's sim must never reach another."""
    yield
    sim.uninstall()


@pytest.fixture
def sim_clock() -> sim.ManualClock:
    """A scenario clock that only moves when the test says so."""
    return sim.ManualClock(0.0)


@pytest.fixture
def sim_source(sim_clock: sim.ManualClock) -> Iterator[SimFactory]:
    """Factory: sim_source("demo") or sim_source({...}) -> (NvmlSource, SimLibrary)."""
    from gputop.engine.nvml import NvmlSource

    opened: list[NvmlSource] = []

    def make(
        scenario: str | dict[str, Any] | Scenario, clock: sim.Clock | None = None, **env: str
    ) -> tuple[NvmlSource, sim.SimLibrary]:
        if isinstance(scenario, dict):
            scenario = Scenario.from_dict(scenario)
        lib = sim.install(scenario, clock or sim_clock)
        source = NvmlSource(  # never /dev; slow readings on the simulated clock
            simulated=True, environ=env, dev_dir=lib.dev_dir, clock=lib.clock.now
        )
        opened.append(source)
        return source, lib

    yield make
    for source in opened:
        source.close()


@pytest.fixture(autouse=True)
def _api_reset() -> Iterator[None]:
    """The API's shared source must not outlive a test (the sim is uninstalled after each)."""
    yield
    api.use_demo(None)


@pytest.fixture
def box(
    sim_source: Callable[..., tuple[Any, sim.SimLibrary]], sim_clock: sim.ManualClock
) -> Callable[..., FixedTimeSource]:
    """box("demo") or box({...}): a fixed-time Source on the simulated driver at scenario t."""

    def make(
        scenario: str | dict[str, Any] | Scenario, t: float = 0.0, wall: float | None = FIXED_WALL
    ) -> FixedTimeSource:
        source, _ = sim_source(shipped(scenario) if isinstance(scenario, str) else scenario)
        sim_clock.set(t)  # after opening: a GPU lost at t still has its identity read at 0
        return FixedTimeSource(source, wall)

    return make


def _cgroup2_root() -> Path | None:
    """Where cgroup v2 is mounted, if this test may create groups there."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].startswith("cgroup2 "):
            root = Path(fields[0].split()[4])
            return root if os.access(root, os.W_OK) else None
    return None


@pytest.fixture
def make_cgroup() -> Iterator[Callable[[str], Path]]:
    """Creates cgroup v2 groups by path (removed afterwards); skips without root or cgroup v2."""
    root = _cgroup2_root()
    if root is None or os.geteuid() != 0:
        pytest.skip("needs root and a writable cgroup v2 mount")
    made: set[Path] = set()

    def make(relative: str) -> Path:
        path = root / relative
        try:
            path.mkdir(parents=True)
        except OSError as e:
            pytest.skip(f"cannot create a cgroup here: {e}")
        made.update(root / p for p in [Path(relative), *Path(relative).parents] if p != Path("."))
        return path

    yield make
    for path in sorted(made, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            path.rmdir()


def snapshot_of(box: Callable[..., FixedTimeSource], scenario: Any = "mig") -> Snapshot:
    """One snapshot of a scenario opened by the ``box`` fixture (closed afterwards)."""
    source = box(scenario)
    try:
        return source.snapshot()
    finally:
        source.close()


# Holds the files named on its command line open, as a CUDA job holds its GPU's device files. Its
# name and command line carry HOST_JOB_MARK: a view that listed it would print that.
HOST_JOB_MARK = "hostgpujob"
HOLD_DEVICE_FILES = """
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode())  # PR_SET_NAME: the name views show
files = [open(path, "rb") for path in sys.argv[2:]]
print("ready", flush=True)
time.sleep(600)
"""


@dataclass(frozen=True)
class HostHolder:
    """A real process of this box holding its GPU device files: no simulated view may show it."""

    pid: int
    mark: str = HOST_JOB_MARK  # in its name and command line

    def named_in(self, text: str) -> bool:
        """``text`` shows this process (its name or command line)."""
        return self.mark in text


@pytest.fixture(scope="module")
def host_gpu_holder() -> Iterator[HostHolder]:
    """A real process holding /dev/nvidia0 and /dev/nvidiactl open, as a GPU job on this box
    would, for the tests that check no simulated view reads the real box.

    On a GPU box it opens the real files read-only. Elsewhere (tests run as root) empty stand-ins
    are made there and removed afterwards, even when the test fails; only those made here.
    """
    from gputop.engine.holders import scan_holders

    paths = [Path("/dev/nvidia0"), Path("/dev/nvidiactl")]
    made: list[Path] = []
    try:
        for path in paths:
            if not path.exists():
                try:
                    path.touch(exist_ok=False)  # O_EXCL: never one someone else just made
                except OSError as exc:
                    pytest.skip(f"no {path} on this box and no stand-in can be made there: {exc}")
                made.append(path)
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD_DEVICE_FILES, HOST_JOB_MARK, *map(str, paths)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                pytest.skip(f"cannot hold {paths[0]} open on this box")
            # The box's own scan sees it: a view that read /dev would show it.
            assert proc.pid in scan_holders("/dev").holders
            yield HostHolder(proc.pid)
        finally:
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    finally:
        for path in made:
            path.unlink(missing_ok=True)


# -- kinds of test: unit, pty, real_process, prometheus; and slow (tests/markers.py) ----------
@pytest.hookimpl(tryfirst=True)  # before `-m` selects by them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its kinds, found from what it uses, and ``slow`` when listed."""
    from tests import markers  # here: the rest of this file is other fixtures' business

    for item in items:
        if isinstance(item, pytest.Function):
            kinds = markers.kinds_of(item.function, item.path, item.fixturenames)
        else:
            kinds = {"unit"}
        for kind in sorted(kinds):
            item.add_marker(kind)
        if markers.is_slow(item.nodeid):
            item.add_marker("slow")
