"""The Source contract (gputop.engine.source): every concrete source answers every member, and
no code in gputop/ asks a source by name whether it has one."""

from __future__ import annotations

import ast
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop import sim
from gputop.engine.deadline import Readings, not_open_within, pid_memory_within
from gputop.engine.model import Snapshot
from gputop.engine.probes import call
from gputop.engine.source import Source, SourceBase
from gputop.errors import DriverError, DriverTimeout
from gputop.sources import open_simulated, open_source
from tests.fakes import GiB, make_snapshot

PACKAGE = Path(__file__).resolve().parent.parent / "gputop"
POWER = call("nvmlDeviceGetPowerUsage")  # a query's extra reading: every simulated GPU has it

# Every member of the contract. A member added to Source without a check here fails
# test_every_member_is_checked.
MEMBERS = {
    "simulated",
    "dev_dir",
    "driver_note",
    "restarts",
    "partial_readings",
    "wait_ready",
    "snapshot",
    "snapshot_within",
    "pid_memory",
    "request_probes",
    "close",
}


class Prepared(SourceBase):
    """A user's own source: only ``snapshot()`` written."""

    def __init__(self) -> None:
        self.simulated = True
        self.dev_dir = os.devnull  # prepared snapshots: no device files to read
        self.reads = 0

    def snapshot(self) -> Snapshot:
        self.reads += 1
        return make_snapshot(seq=self.reads)


def test_every_member_is_checked() -> None:
    declared = {name for name in vars(Source) if not name.startswith("_")}
    assert declared == MEMBERS


def answers(source: Source) -> dict[str, object]:
    """Call every member of the contract once (close last), and what each gave."""
    got: dict[str, object] = {
        "simulated": source.simulated,
        "dev_dir": source.dev_dir,
        "wait_ready": source.wait_ready(30.0),
        "driver_note": source.driver_note,
        "restarts": source.restarts,
        "partial_readings": source.partial_readings,
    }
    first = source.snapshot()
    pid = next(p.pid for g in first.gpus for p in g.processes)
    source.request_probes([POWER], explain=["power_draw_mw"])
    got["snapshot"] = first
    got["snapshot_within"] = source.snapshot_within(30.0)
    got["pid"] = pid
    got["pid_memory"] = source.pid_memory([pid])
    got["request_probes"] = source.snapshot().gpus[0].extra_value(POWER.key)
    source.close()
    got["close"] = True
    assert set(got) - {"pid"} == MEMBERS
    return got


def held_by(snapshot: Snapshot, pid: int) -> dict[int, int]:
    return {
        g.index: sum(p.used_memory_bytes or 0 for p in g.processes if p.pid == pid)
        for g in snapshot.gpus
    }


def test_nvml_source_in_process_on_the_simulator() -> None:
    source = open_simulated("dgx", sim.ManualClock(30.0))  # still: memory read twice agrees
    got = answers(source)
    assert got["simulated"] is True and got["wait_ready"] is True
    dev_dir = got["dev_dir"]
    assert isinstance(dev_dir, str) and dev_dir != "/dev" and os.path.isdir(dev_dir)
    assert (got["driver_note"], got["restarts"], got["partial_readings"]) == (None, 0, False)
    first, within = got["snapshot"], got["snapshot_within"]
    assert isinstance(first, Snapshot) and isinstance(within, Snapshot)
    assert len(first.gpus) == len(within.gpus) == 8 and within.seq > first.seq
    memory = dict(got["pid_memory"].by_gpu_bytes)  # type: ignore[attr-defined]
    wanted = {i: n for i, n in held_by(within, int(got["pid"])).items() if n}  # type: ignore[call-overload]
    assert wanted and memory == {g.index: wanted.get(g.index, 0) for g in within.gpus}
    power = got["request_probes"]  # asked for: read into the next snapshot
    assert isinstance(power, int) and power > 0


@pytest.fixture
def isolated() -> Iterator[Callable[[str], Source]]:
    opened: list[Source] = []

    def make(demo: str) -> Source:
        source = open_source(demo=demo, isolated=True, environ={})
        opened.append(source)
        return source

    yield make
    for source in opened:
        source.close()


def test_isolated_source_on_a_simulated_box(isolated: Callable[[str], Source]) -> None:
    source = isolated("dgx")
    assert type(source).__name__ == "IsolatedSource"
    got = answers(source)
    assert got["simulated"] is True and got["wait_ready"] is True
    dev_dir = got["dev_dir"]
    assert isinstance(dev_dir, str) and dev_dir != "/dev"
    assert (got["driver_note"], got["restarts"], got["partial_readings"]) == (None, 0, True)
    within = got["snapshot_within"]
    assert isinstance(within, Snapshot) and len(within.gpus) == 8
    memory = dict(got["pid_memory"].by_gpu_bytes)  # type: ignore[attr-defined]
    held = {i for i, n in held_by(within, int(got["pid"])).items() if n}  # type: ignore[call-overload]
    # the driver process's box runs on real time: the amounts move between reads, not where
    assert held and {i for i, n in memory.items() if n} == held
    power = got["request_probes"]
    assert isinstance(power, int) and power > 0
    with pytest.raises(DriverError, match="closed"):  # close() stopped it
        source.snapshot()


def test_a_source_base_subclass_gets_the_in_process_answers() -> None:
    source = Prepared()
    got = answers(source)
    assert (got["driver_note"], got["restarts"], got["partial_readings"]) == (None, 0, False)
    assert got["wait_ready"] is True
    assert got["pid"] == 4242
    assert got["pid_memory"].by_gpu_bytes == ((0, 18 * GiB), (1, 18 * GiB))  # type: ignore[attr-defined]
    assert got["request_probes"] is None  # no extra readings: the query's column stays N/A
    assert source.reads == 4  # snapshot, snapshot_within, pid_memory and the last snapshot


def test_a_source_base_subclass_must_write_snapshot() -> None:
    class Unfinished(SourceBase):
        simulated, dev_dir = True, os.devnull

    with pytest.raises(TypeError, match="snapshot"):
        Unfinished()  # type: ignore[abstract]


class Stuck(Prepared):
    """An in-process source whose driver call never returns (until released)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def snapshot(self) -> Snapshot:
        self.release.wait(5.0)  # bounded: a reader that waits here without a deadline fails
        return super().snapshot()


def test_an_in_process_source_is_read_on_a_thread_within_the_deadline() -> None:
    source = Stuck()
    try:
        with pytest.raises(DriverTimeout, match=r"within 0\.2 s"):
            Readings(source).read(0.2)
        with pytest.raises(DriverTimeout, match=r"within 0\.2 s"):
            pid_memory_within(source, [4242], 0.2)
        source.release.set()
        assert pid_memory_within(source, [4242], 5.0).by_gpu_bytes[0] == (0, 18 * GiB)
    finally:
        source.release.set()


class Opening(Prepared):
    """A driver process whose driver has not opened yet: it says why, and cannot be read."""

    partial_readings = True

    def __init__(self) -> None:
        super().__init__()
        self.driver_note: str | None = "nvmlInitWithFlags did not return"
        self.waited: list[float] = []

    def wait_ready(self, timeout_s: float) -> bool:
        self.waited.append(timeout_s)
        return False

    def snapshot_within(self, timeout_s: float) -> Snapshot:
        raise AssertionError("read before the driver opened")


def test_a_driver_still_opening_is_waited_for_and_named_never_read() -> None:
    source = Opening()
    with pytest.raises(DriverTimeout, match=r"within 0\.3 s \(nvmlInitWithFlags did not return\)$"):
        Readings(source).first(0.3, 0.1)
    assert not_open_within(source, 0.2) == "nvmlInitWithFlags did not return"
    source.driver_note = None
    assert not_open_within(source, 0.2) == "the NVIDIA driver did not open within 0.2 s"
    assert source.waited == [0.3, 0.2, 0.2]
    assert not_open_within(Prepared(), 0.2) is None  # in process: opened when it was made


# -- no capability probing by name ------------------------------------------------------------
# Attribute names that belong to the contract only (``dev_dir`` and ``restarts`` also name
# argparse options and the exporter's sampler: those are checked by the object's name below).
CONTRACT_ONLY = MEMBERS - {"dev_dir", "restarts", "simulated", "close", "snapshot"}


def probes_of_a_source(path: Path) -> list[str]:
    """``file:line: call`` for each getattr/hasattr in ``path`` that asks a source by name."""
    where = os.path.relpath(path, PACKAGE.parent)
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
        ):
            continue
        target, name = ast.unparse(node.args[0]), node.args[1]
        named = name.value if isinstance(name, ast.Constant) else None
        on_a_source = "source" in target.lower() or target in ("src", "self._src")
        if named in CONTRACT_ONLY or on_a_source:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_code_asks_a_source_by_name_what_it_has() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in probes_of_a_source(path)]
    assert found == []


def test_the_probe_finder_finds_a_probe(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "def f(source, x):\n"
        "    a = getattr(source, 'wait_ready', None)\n"
        "    b = hasattr(x, 'snapshot_within')\n"
        "    c = getattr(self_source := x, 'close')\n"
    )
    found = probes_of_a_source(planted)
    assert [hit.split(": ", 1)[0].rsplit(":", 1)[1] for hit in found] == ["2", "3", "4"]
