"""Kill aftermath: after a signal, is the GPU memory released, and if not, who still holds it?

Real processes on the simulated box, followed on a real Sampler's snapshots; and the pure rules
(who is named, what is advised) on made-up snapshots.
"""

from __future__ import annotations

import queue
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from gputop.engine.kill import (
    Killer,
    KillResult,
    MemoryWatch,
    ProcIdentity,
    Release,
    Signal,
)
from gputop.engine.model import GpuProcess, ProcessRow, ProcessType, ProcInfo, ProcState, Snapshot
from gputop.engine.nvml import NvmlSource
from gputop.engine.sampler import Sampler
from gputop.sim.actors import Cast
from gputop.sim.scenario import Scenario
from tests.engine.spawn import HOLD, TREE, Spawner, wait_until
from tests.fakes import make_gpu, make_snapshot

MiB, GiB = 1024**2, 1024**3

# Opens the device, forks a worker that inherits it (as a DataLoader worker or a forked server
# does), prints the worker's PID and sleeps: TERM ends the parent, the worker lives on.
FORKS_A_HOLDER = """
import os, sys, time
f = open(sys.argv[1], "rb")
pid = os.fork()
if pid == 0:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a worker that outlives its parent's TERM
    time.sleep(120)
    os._exit(0)
print(pid, flush=True)
time.sleep(120)
"""


def _scenario(*pids: int) -> Scenario:
    return Scenario.from_dict(
        {
            "name": "aftermath",
            "gpu": [
                {
                    "name": "NVIDIA A100-SXM4-80GB",
                    "memory_total_mib": 81920,
                    "memory_reserved_mib": 0,
                    "processes": [{"pid": p, "used_memory_mib": 2048} for p in pids],
                }
            ],
        }
    )


def _identity(pid: int) -> ProcIdentity:
    return ProcIdentity(pid=pid, create_time=psutil.Process(pid).create_time())


def _follow(source: Any, dev_dir: str, pid: int, ready: Any) -> tuple[Release, ...]:
    """Run a Sampler on ``source``; once ``ready(snapshot)``, TERM ``pid`` and follow its memory
    on the sampler's snapshots until the watch answers."""
    got: queue.Queue[Snapshot] = queue.Queue()
    sampler = Sampler(
        source, on_snapshot=got.put, interval_s=0.1, holder_interval_s=0.1, dev_dir=dev_dir
    )
    sampler.start()
    try:
        before = got.get(timeout=10)
        while not ready(before):
            before = got.get(timeout=10)
        sent_at = time.monotonic()
        result = Killer().send(_identity(pid), Signal.TERM, grace_s=5)
        assert result.ok and result.exited is True
        watch = MemoryWatch(before, [result], sent_at_mono=sent_at, follow_s=1.5)
        assert watch.following
        while (verdict := watch.observe(got.get(timeout=10), time.monotonic())) is None:
            pass
        return verdict
    finally:
        sampler.stop()


def _rows(snap: Snapshot) -> dict[int, ProcessRow]:
    return {r.pid: r for r in snap.processes}


def test_forked_worker_keeps_the_memory_and_is_named(spawner: Spawner, sim_source: Any) -> None:
    source, lib = sim_source(_scenario())
    parent = spawner.start(FORKS_A_HOLDER, str(Path(lib.dev_dir) / "nvidia0"))
    worker = spawner.first_line_pid(parent)
    # The driver keeps the parent's context while its worker holds the device files: the
    # scenario lists the parent's PID however long it lives (no actor ends it).
    lib.scenario = _scenario(parent.pid)

    def ready(snap: Snapshot) -> bool:
        rows = _rows(snap)
        return parent.pid in rows and worker in rows and ProcState.HOLDER in rows[worker].states

    (gpu0,) = _follow(source, lib.dev_dir, parent.pid, ready)
    assert not psutil.pid_exists(parent.pid)
    assert psutil.Process(worker).ppid() != parent.pid  # re-parented: only the watch knows
    assert gpu0.released is False
    assert [(h.pid, h.why) for h in gpu0.holders] == [(worker, f"child of {parent.pid}")]
    assert gpu0.line.startswith("GPU 0: 2.0 GiB not released after 1.5 s: still held by PID ")
    assert f"PID {worker} (python" in gpu0.line
    assert f", child of {parent.pid}); next: signal {worker} (its row, k)" in gpu0.line
    assert "\n" not in gpu0.line


def test_memory_released_when_the_process_exits(
    spawner: Spawner, sim_source: Any, tmp_path: Path
) -> None:
    _, lib = sim_source(_scenario())
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl"):
        (dev / name).write_bytes(b"")
    worker = spawner.ready(HOLD, str(dev / "nvidia0"))
    # An actor of the simulated driver: its context ends when its process is gone.
    lib.set_cast(Cast(root=tmp_path, pids={"worker": worker.pid}))
    lib.scenario = _scenario(worker.pid)
    source = NvmlSource(simulated=True, environ={}, dev_dir=str(dev))
    try:
        (gpu0,) = _follow(source, str(dev), worker.pid, lambda s: worker.pid in _rows(s))
    finally:
        source.close()
    assert gpu0.released is True
    assert gpu0.line == "✓ GPU 0: 2.0 GiB released"
    assert gpu0.holders == ()


# -- the rules, on made-up snapshots --------------------------------------------------------
KILLED, GONE = 2**22 + 11, 2**22 + 12  # never PIDs here: both have exited


def _snap(seq: float, used_gib: float, *rows: ProcessRow, listed: bool = True) -> Snapshot:
    procs = (
        (GpuProcess(pid=KILLED, gpu_index=3, type=ProcessType.COMPUTE, used_memory_bytes=GiB * 23),)
        if listed
        else ()
    )
    gpu = make_gpu(3, memory_used_bytes=int(used_gib * GiB), processes=procs)
    snap = replace(make_snapshot(), gpus=(gpu,), processes=rows)
    return replace(snap, taken_at_mono=seq)


def _row(pid: int, *states: ProcState, name: str = "python3") -> ProcessRow:
    return ProcessRow(
        pid=pid,
        info=ProcInfo(pid=pid, name=name, status="sleeping", visible=True),
        states=states,
        gpu_indices=(3,),
        device_files=("/dev/nvidia3",),
    )


def _watch(*results: KillResult) -> MemoryWatch:
    sent = results or (
        KillResult(ok=True, message="", pid=KILLED, signal=Signal.TERM, signalled=(KILLED,)),
    )
    return MemoryWatch(_snap(100, 30), sent, sent_at_mono=100.0, follow_s=5)


def test_released_early_and_not_before_a_reading_after_the_signal() -> None:
    watch = _watch()
    assert watch.observe(_snap(99, 7, listed=False), 101) is None  # taken before the signal
    (gpu,) = watch.observe(_snap(101, 7, listed=False), 101.5) or ()
    assert gpu.line == "✓ GPU 3: 23.0 GiB released"


def test_not_listed_but_used_memory_stays_is_not_released() -> None:
    watch = _watch()
    assert watch.observe(_snap(102, 30, listed=False), 102) is None  # still following
    (gpu,) = watch.observe(_snap(105.2, 30, listed=False), 105.2) or ()
    assert gpu.released is False
    assert "no process that holds it is visible here" in gpu.line
    assert "next: a GPU reset once nothing else holds it (nvidia-smi --gpu-reset -i 3)" in gpu.line


def test_unkillable_and_other_namespace_holders_get_reset_advice() -> None:
    stuck = _row(4141, ProcState.UNKILLABLE, ProcState.HOLDER)
    hidden = replace(_row(4242, ProcState.NAMESPACE), device_files=())
    active = replace(_row(4343, ProcState.ACTIVE), used_memory_bytes=GiB)  # another job
    (gpu,) = _watch().observe(_snap(106, 30, stuck, hidden, active), 106) or ()
    assert [h.pid for h in gpu.holders] == [4141, 4242]
    assert (
        "still held by PID 4141 (python3, unkillable (state D)), PID 4242 (python3, in" in gpu.line
    )
    assert gpu.line.endswith(
        "next: stop 4242 from its container or the host; then a GPU reset once nothing else "
        "holds it (nvidia-smi --gpu-reset -i 3), or a reboot: kill cannot end 4141"
    )


def test_no_reading_since_the_signal_says_it_cannot_tell() -> None:
    watch = _watch()
    assert watch.observe(None, 104) is None
    (gpu,) = watch.observe(None, 110.1) or ()
    assert gpu.released is None
    assert gpu.line == (
        "GPU 3: cannot tell whether 23.0 GiB was released: no reading of it since the signal"
    )


def test_nothing_to_follow_without_listed_memory() -> None:
    none = KillResult(ok=True, message="", pid=GONE, signal=Signal.TERM, signalled=(GONE,))
    watch = _watch(none)
    assert not watch.following
    assert watch.observe(None, 100) == ()


def test_send_records_the_family_before_the_signal(spawner: Spawner) -> None:
    parent = spawner.start(TREE)
    kid = spawner.first_line_pid(parent)
    assert wait_until(lambda: psutil.Process(kid).ppid() == parent.pid)
    result = Killer().send(_identity(parent.pid), Signal.KILL, grace_s=5)
    assert result.exited is True
    assert [(who.pid, ppid) for who, ppid in result.family] == [(kid, parent.pid)]
