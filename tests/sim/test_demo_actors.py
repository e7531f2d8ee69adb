"""`gputop --demo` plays its GPU users with real processes, as the scenario says."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator

import psutil
import pytest

from gputop import sim
from gputop.sim.actors import Cast


@pytest.fixture
def demo() -> Iterator[tuple[sim.SimLibrary, Cast]]:
    lib = sim.install("demo", sim.ManualClock(1.0), actors=True)
    assert lib.cast is not None
    yield lib, lib.cast
    lib.cast.stop()


def test_demo_actors_are_real_processes(demo: tuple[sim.SimLibrary, Cast]) -> None:
    lib, cast = demo
    listed = {p.pid for g in lib.scenario.gpus for p in g.processes}
    assert cast.pids["rank0"] in listed and cast.pids["zombie"] in listed
    assert cast.pids["dataloader"] not in listed  # the stuck holder NVML no longer lists
    rank0 = psutil.Process(cast.pids["rank0"])
    assert rank0.cmdline()[1:4] == ["train.py", "--model", "llama-7b"]
    held = {os.path.basename(f.path) for f in rank0.open_files()}
    assert {"nvidia0", "nvidiactl"} <= held
    assert psutil.Process(cast.pids["finetune"]).status() == psutil.STATUS_STOPPED
    assert psutil.Process(cast.pids["zombie"]).status() == psutil.STATUS_ZOMBIE
    orphan = psutil.Process(cast.pids["dataloader"])
    assert orphan.ppid() != os.getpid()
    assert lib.dev_dir == cast.dev_dir and os.path.isdir(lib.dev_dir)


def test_stop_removes_every_actor_and_the_folder(demo: tuple[sim.SimLibrary, Cast]) -> None:
    _, cast = demo
    pids = list(cast.pids.values())
    cast.stop()
    # SIGKILL is delivered asynchronously: on a busy box a killed actor can still show R for a
    # moment. Each must be dead (a zombie init reaps soon, or gone) within a few seconds.
    deadline = time.monotonic() + 5
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            while (status := psutil.Process(pid).status()) != psutil.STATUS_ZOMBIE:
                assert time.monotonic() < deadline, f"actor {pid} still {status} after SIGKILL"
                time.sleep(0.05)
    assert not os.path.exists(cast.root)


def test_without_actors_the_stand_in_pids_stay() -> None:
    lib = sim.install("demo", sim.ManualClock(1.0))
    assert lib.cast is None
    assert 5048213 in {p.pid for g in lib.scenario.gpus for p in g.processes}


def test_without_actors_the_box_has_a_private_device_folder_of_its_own() -> None:
    lib = sim.install("dgx", sim.ManualClock(0.0))
    dev = lib.dev_dir
    assert os.path.realpath(dev) != "/dev" and not dev.startswith("/dev/")
    assert os.stat(os.path.dirname(dev)).st_mode & 0o777 == 0o700
    assert sorted(os.listdir(dev)) == sorted(
        [f"nvidia{i}" for i in range(len(lib.scenario.gpus))] + ["nvidiactl", "nvidia-uvm"]
    )
    assert lib.dev_dir == dev  # one folder for the library's life
    sim.uninstall()
    assert not os.path.exists(os.path.dirname(dev))


def test_demo_end_to_end_classification(demo: tuple[sim.SimLibrary, Cast]) -> None:
    """Driver layer + holder scan + enrichment on the demo's real processes."""
    from gputop.engine.enrich import enrich
    from gputop.engine.holders import scan_holders
    from gputop.engine.model import ProcState
    from gputop.engine.nvml import NvmlSource

    lib, cast = demo
    assert lib.dev_dir == cast.dev_dir  # the actors hold the box's own device files
    source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
    try:
        snap = enrich(source.snapshot(), holders=scan_holders(source.dev_dir))
    finally:
        source.close()
    rows = {r.pid: r for r in snap.processes}
    states = {name: rows[pid].states for name, pid in cast.pids.items()}
    assert states["rank0"] == (ProcState.ACTIVE,)
    assert ProcState.STOPPED in states["finetune"]
    assert ProcState.DEFUNCT in states["zombie"]
    assert ProcState.ORPHAN in states["dataloader"] and ProcState.HOLDER in states["dataloader"]
    # /dev/nvidia3 held -> GPU 3, through the GPU's minor number
    assert rows[cast.pids["dataloader"]].gpu_indices == (3,)
    assert rows[cast.pids["rank0"]].info.user is not None
    assert dict(snap.unattributed_memory_bytes).get(3, 0) >= 23552 * 1024 * 1024


def test_a_dead_actor_frees_its_context_and_memory(demo: tuple[sim.SimLibrary, Cast]) -> None:
    """Killing the demo's stuck processes frees what the driver shows, as on a real box."""
    import signal
    import time

    from gputop.engine.nvml import NvmlSource

    lib, cast = demo
    source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
    try:
        before = source.snapshot()
        for name in ("dataloader", "rank0"):
            os.kill(cast.pids[name], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and psutil.pid_exists(cast.pids["rank0"]):
            with contextlib.suppress(psutil.NoSuchProcess):
                if psutil.Process(cast.pids["rank0"]).status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(cast.pids["rank0"], os.WNOHANG)  # ours to reap
            time.sleep(0.05)
        after = source.snapshot()
    finally:
        source.close()
    assert [p.pid for p in before.gpus[0].processes] == [cast.pids["rank0"]]
    assert after.gpus[0].processes == ()
    used_before = before.gpus[3].memory_used_bytes or 0
    used_after = after.gpus[3].memory_used_bytes or 0
    assert used_before - used_after == 23552 * 1024 * 1024


def test_the_sick_demo_plays_an_unkillable_holder_and_frees_it_on_stop() -> None:
    """The `unkillable` role: in state D (posix_spawn's vfork wait on a FIFO), holding GPU 2's
    device file; its blocked child holds none; stop() releases the child, so nothing is left."""
    lib = sim.install("sick", sim.ManualClock(1.0), actors=True)
    assert lib.cast is not None
    cast = lib.cast
    try:
        hung = psutil.Process(cast.pids["hung"])
        deadline = time.monotonic() + 10
        while hung.status() != psutil.STATUS_DISK_SLEEP:  # the spawn comes after "ready"
            assert time.monotonic() < deadline, hung.status()
            time.sleep(0.05)
        assert "nvidia2" in {os.path.basename(f.path) for f in hung.open_files()}
        children = hung.children()  # its watchdog and the blocked spawn
        assert len(children) == 2
        assert not [f for c in children for f in c.open_files() if "nvidia" in f.path]
    finally:
        cast.stop()
        sim.uninstall()
    # released: the spawn ran `true` and the watchdog saw its FIFO gone; both exit
    _, alive = psutil.wait_procs(children, timeout=5)
    assert all(c.status() == psutil.STATUS_ZOMBIE for c in alive), alive
