"""The Python API: cheap import, devices/processes/snapshot/show, use_demo, and track()."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gputop
from gputop import sim
from gputop.engine.model import Snapshot
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
MiB = 1024**2


def loaded_modules(code: str) -> set[str]:
    run = subprocess.run(
        [sys.executable, "-c", code + "; import sys; print(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(run.stdout.split())


def test_import_gputop_loads_neither_the_api_nor_pynvml_nor_textual() -> None:
    loaded = loaded_modules("import gputop; gputop.__version__")
    assert not {"gputop.api", "pynvml", "textual", "psutil"} & loaded


def test_touching_the_api_still_loads_no_textual_or_pynvml() -> None:
    loaded = loaded_modules("import gputop; gputop.track; gputop.devices")
    assert "gputop.api" in loaded
    assert not {"pynvml", "textual"} & loaded


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = gputop.no_such_thing  # type: ignore[attr-defined]


def test_devices_are_json_view_dicts(box: Box) -> None:
    devices = gputop.devices(source=box("demo"))
    assert [d["index"] for d in devices] == [0, 1, 2, 3]
    assert devices[2]["name"] == "NVIDIA L40S"
    assert devices[2]["memory_total_bytes"] == 46068 * MiB
    assert devices[2]["fan_speed_percent"] == 41
    assert devices[0]["processes"][0]["pid"] == 5048213


def test_snapshot_is_typed_and_enriched(box: Box) -> None:
    snap = gputop.snapshot(source=box("demo"))
    assert isinstance(snap, Snapshot)
    assert {5048213, 5048214, 5049001, 5051377, 5051502} <= {row.pid for row in snap.processes}
    assert dict(snap.unattributed_memory_bytes)[3] == 23552 * MiB  # the orphan's memory


def test_processes_are_dicts_with_states(box: Box) -> None:
    rows = {p["pid"]: p for p in gputop.processes(source=box("demo"))}
    assert rows[5051377]["gpu_indices"] == [2]
    assert rows[5051377]["used_memory_bytes"] == 17800 * MiB
    assert "state" in rows[5051377] and "command" in rows[5051377]["info"]


def test_show_prints_a_gputil_style_table(box: Box) -> None:
    out = io.StringIO()
    gputop.show(file=out, source=box("demo"))
    lines = out.getvalue().splitlines()
    assert lines[0] == "| ID |  GPU |  MEM |"
    assert lines[1] == "-" * 20
    assert lines[5] == "|  3 |   0% |  36% |"  # (6144 + 23552) / 81920 MiB used
    assert len(lines) == 6


def test_show_on_a_lost_gpu_says_na(box: Box) -> None:
    out = io.StringIO()
    gputop.show(file=out, source=box("faults", 6.0))
    assert out.getvalue().splitlines()[3] == "|  1 |  N/A |  N/A |"


def test_use_demo_selects_the_simulated_driver() -> None:
    gputop.use_demo("dgx")
    assert len(gputop.devices()) == 8
    gputop.use_demo(None)


def test_use_demo_accepts_a_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "one.toml"
    path.write_text('name = "one"\n[[gpu]]\nname = "NVIDIA T1000"\n')
    gputop.use_demo(str(path))
    assert [d["name"] for d in gputop.devices()] == ["NVIDIA T1000"]


def test_environment_variable_selects_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTOP_DEMO", "dgx")
    gputop.use_demo(None)  # back to "the default", which honours GPUTOP_DEMO
    assert gputop.devices()[0]["name"] == "NVIDIA H100 80GB HBM3"


def spike_scenario(start: float, end: float) -> dict[str, Any]:
    """This process holds 1000 MiB on GPU 0, 5000 MiB while start <= t < end; joins GPU 1 at 10."""
    memory = {"base": 1000, "step_at": start, "step_to": 5000, "until": end, "after": 1000}
    me = os.getpid()
    return {
        "name": "spike",
        "gpu": [
            {
                "processes": [
                    {"pid": me, "used_memory_mib": memory},
                    {"pid": 1, "used_memory_mib": 7},
                ]
            },
            {"processes": [{"pid": me, "used_memory_mib": 300, "start_s": 10}]},
        ],
    }


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def test_track_catches_a_peak_between_ticks(box: Box, sim_clock: sim.ManualClock) -> None:
    source = box(spike_scenario(10.0, 20.0))
    with gputop.track("spike", interval_s=0.01, source=source) as t:
        before = t.samples
        sim_clock.set(10.0)  # the spike: gone again before the block ends
        wait_for(lambda: t.samples >= before + 2)
        during = t.samples
        sim_clock.set(20.0)
        wait_for(lambda: t.samples >= during + 2)
    r = t.report
    assert r.label == "spike" and r.pids == (os.getpid(),)
    assert r.process is not None
    assert (r.process.start_bytes, r.process.peak_bytes) == (1000 * MiB, 5300 * MiB)
    assert r.process.end_bytes == 1300 * MiB and r.process.delta_bytes == 300 * MiB
    gpu0 = r.devices[0]
    assert (gpu0.start_bytes, gpu0.peak_bytes, gpu0.end_bytes) == (
        1007 * MiB,
        5007 * MiB,
        1007 * MiB,
    )
    assert gpu0.delta_bytes == 0
    # GPU 1 was first used inside the block: it starts from nothing.
    assert r.process_by_device[1].start_bytes == 0
    assert r.process_by_device[1].end_bytes == 300 * MiB
    assert r.samples == t.samples >= 5


class OffsetClock:
    """Scenario time = real seconds since start() (before that: 0)."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def start(self) -> None:
        self.t0 = time.monotonic()

    def now(self) -> float:
        return 0.0 if self.t0 is None else time.monotonic() - self.t0


def test_track_in_real_time_sees_a_spike_a_1s_sampler_misses(
    sim_source: Callable[..., Any],
) -> None:
    clock = OffsetClock()
    source, _ = sim_source(spike_scenario(0.3, 0.7), clock)
    with gputop.track("real time", interval_s=0.02, source=source) as t:
        clock.start()  # a dashboard ticking each second reads at 0 s and 1 s: both 1000 MiB
        while clock.now() < 1.0:
            sum(range(1000))  # busy Python work while the tracker samples
    r = t.report
    assert r.process is not None
    assert r.process.start_bytes == r.process.end_bytes == 1000 * MiB
    assert r.process.peak_bytes == 5000 * MiB
    assert 0.25 <= r.process.peak_at_s <= 0.9
    assert r.duration_s >= 1.0


def test_track_summary_is_a_readable_table(box: Box) -> None:
    with gputop.track("stage 1", pids=[5048213], source=box("demo")) as t:
        pass
    text = str(t)
    assert text == t.summary() and text.startswith("gputop.track 'stage 1': ")
    assert "GPU 3 (all processes)" in text and "pid 5048213 (all GPUs)" in text
    assert "61000 MiB" in text and "+0 MiB" in text


class FailingSource(FixedTimeSource):
    """Fails every snapshot after the first, like a driver going away mid-block."""

    def snapshot(self) -> Snapshot:
        if self.calls >= 1:
            self.calls += 1
            raise RuntimeError("driver went away")
        return super().snapshot()


def test_track_never_disturbs_the_tracked_code(box: Box) -> None:
    source = FailingSource(box("demo").inner)
    with gputop.track("x", interval_s=0.005, source=source) as t:
        wait_for(lambda: source.calls >= 3)
    assert t.errors >= 2 and t.samples == 1
    assert not any(th.name == "gputop-track" and th.is_alive() for th in threading.enumerate())


def test_use_demo_and_use_driver_bump_the_generation() -> None:
    from gputop import api

    before = api.generation()
    gputop.use_demo("dgx")
    assert api.generation() == before + 1
    gputop.use_driver(in_process=True)
    gputop.use_driver()
    assert api.generation() == before + 3
    assert api.generation() == before + 3  # reading it changes nothing


def test_use_demo_takes_effect_after_earlier_reads() -> None:
    gputop.use_demo("demo")
    assert len(gputop.devices()) == 4
    gputop.use_demo("dgx")  # called late: the next read is on the new box all the same
    assert len(gputop.devices()) == 8


def test_gputop_demo_set_after_a_read_takes_effect(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputop import api

    monkeypatch.setenv("GPUTOP_DEMO", "demo")
    gputop.use_demo(None)
    assert len(gputop.devices()) == 4
    before = api.generation()
    monkeypatch.setenv("GPUTOP_DEMO", "dgx")
    assert api.generation() == before + 1  # a notebook that cached a probe reads again
    assert len(gputop.devices()) == 8


def test_every_gputop_error_is_importable_from_gputop() -> None:
    from gputop import errors

    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.GputopError)
    }
    assert defined <= set(gputop.__all__)
    for name in defined:
        assert getattr(gputop, name) is getattr(errors, name)
    assert issubclass(gputop.DeviceNotFound, LookupError)


# pynvml's CDLL("libnvidia-ml.so.1") fails as on a machine without the driver (even on a GPU box);
# the driver is read in this process so that the failure is this one's.
NO_DRIVER = """
import pynvml
real = pynvml.CDLL
def fake(name, *a, **k):
    if "nvidia-ml" in str(name):
        raise OSError(name + ": cannot open shared object file")
    return real(name, *a, **k)
pynvml.CDLL = fake
import gputop
gputop.use_driver(in_process=True)
for call in (gputop.show, gputop.devices, lambda: gputop.Device(0), gputop.Collector().sample):
    try:
        call()
        print("no error")
    except gputop.DriverMissing as exc:
        print(type(exc).__name__, exc)
gputop.use_demo("demo")
print(len(gputop.devices()), "after use_demo")
"""
PYTHON_MISSING = (
    "DriverMissing NVIDIA driver not found (libnvidia-ml.so.1): "
    "call gputop.use_demo() to try gputop on simulated GPUs"
)


def test_no_driver_is_driver_missing_worded_for_python_code() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GPUTOP_DEMO"}
    run = subprocess.run(
        [sys.executable, "-c", NO_DRIVER],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    # The Collector counts a failed read (it never raises into a training loop).
    assert lines == [PYTHON_MISSING] * 3 + ["no error", "4 after use_demo"]
