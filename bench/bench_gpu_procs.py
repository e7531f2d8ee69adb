"""Scaling (issue 17): the dashboard with 40, 500 and 5,000 GPU processes (MPS, many small
inference workers), each a real process (``sleep``) that the simulated 8-GPU box lists.

For each size, a scenario file like ``dgx`` whose process lists name those real PIDs is written to
a temporary folder, and measured:

* a sampler tick in gputop's process (driver read + enrich + history + holders), CPU ms, and of
  it the simulated NVML's own (what libnvidia-ml's C code and the kernel take on a real box);
* the real dashboard in a 200x60 tmux pane on it: time to the first frame, and CPU (gputop and
  its driver process) over GPUTOP_BENCH_GPU_PROCS_SECONDS (default 20 s) after a warm-up.

GPUTOP_BENCH_GPU_PROCS_SIZES overrides the sizes (comma separated; 0 skips this bench); a size
ending in ``s`` (``5000s``) is the steady load of :func:`write_scenario`.

Then two dashboards side by side, 40 and 5,000 steady processes (GPUTOP_BENCH_GPU_PROCS_PAIR,
``small,big``; empty skips it), measured over the same window: the ratio of their CPU is what
issue 17 asks to keep within 2x, and two dashboards at once feel the same VM speed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import tomllib
from importlib import resources
from pathlib import Path
from statistics import median
from typing import Any

from bench import bench_ui
from bench.crowd import Crowd
from gputop.engine.enrich import RowMemo, enrich
from gputop.engine.history import History
from gputop.engine.holder_watch import HolderWatch
from gputop.engine.procs import ProcReader
from gputop.sim.library import _Fn
from gputop.sources import open_source

WARMUP_S = 10.0
TICKS = 25


def write_scenario(pids: list[int], path: Path, *, steady: bool = False) -> Path:
    """The dgx scenario with its processes replaced by ``pids``, spread over its 8 GPUs.

    Every process's memory and utilisation move each second (the worst case: every row changes
    every tick), or with ``steady`` as inference workers' do: memory flat once loaded (the
    caching allocator keeps it), one worker in ten busy at a time.
    """
    text = resources.files("gputop.sim").joinpath("scenarios", "dgx.toml").read_text("utf-8")
    data: dict[str, Any] = tomllib.loads(text)
    data.pop("actor", None)
    gpus = data["gpu"]
    for gpu in gpus:
        gpu["processes"] = []
    for i, pid in enumerate(pids):
        busy = not steady or i % 10 == 0
        gpus[i % len(gpus)]["processes"].append(
            {
                "pid": pid,
                "name": "python3",
                "used_memory_mib": (
                    200 + i % 700
                    if steady
                    else {"base": 200 + i % 700, "amp": 20, "period": 10 + i % 30}
                ),
                "sm_util": {"base": i % 50, "amp": 5, "period": 11} if busy else 0,
                "mem_util": {"base": 5, "amp": 3, "period": 13} if busy else 0,
            }
        )
    data["name"] = f"gpu-procs-{len(pids)}{'-steady' if steady else ''}"
    path.write_text(json.dumps(data))
    return path


class _SimClock:
    """CPU time spent inside the simulated driver's NVML calls (what a real box spends in
    libnvidia-ml's C code and the kernel), counted while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0
        self._call = _Fn.__call__

    def __enter__(self) -> _SimClock:
        clock, call = self, self._call

        def timed(fn: _Fn, *args: Any) -> Any:
            clock._depth += 1
            t0 = time.thread_time()
            try:
                return call(fn, *args)
            finally:
                clock._depth -= 1
                if not clock._depth:
                    clock.seconds += time.thread_time() - t0

        _Fn.__call__ = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        _Fn.__call__ = self._call  # type: ignore[method-assign]


def _sampler_tick_ms(scenario: Path) -> tuple[float, float]:
    """Median CPU ms of a sampler tick in one process (driver read, holders, enrich, history),
    and of it the simulated driver's own."""
    source = open_source(scenario=str(scenario))
    try:
        history, reader, watch, memo = (
            History(),
            ProcReader(),
            HolderWatch(source.dev_dir),
            RowMemo(),
        )
        times, sim = [], []
        for _ in range(TICKS):
            with _SimClock() as clock:
                t0 = time.thread_time()
                snap = source.snapshot()
                listed = {p.pid for g in snap.gpus for p in g.processes}
                scan = watch.tick(1.0, listed)
                history.append(
                    enrich(snap, holders=scan, history=history, reader=reader, memo=memo)
                )
                times.append(time.thread_time() - t0)
            sim.append(clock.seconds)
        # past the first ticks' new processes
        return median(times[8:]) * 1000, median(sim[8:]) * 1000
    finally:
        source.close()


def _dashboard(scenario: Path, seconds: float) -> tuple[float, float, float]:
    """(first frame s, CPU % of a core, of which the driver process %) of the real dashboard."""
    command = f"{sys.executable} -m gputop --demo={scenario} --interval 1"
    started = time.monotonic()
    session = f"{bench_ui.SESSION}-procs"
    bench_ui._tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "60", command)
    try:
        while True:
            screen = bench_ui._tmux("capture-pane", "-p", "-t", session)
            if "Processes (" in screen and "GPU 7" in screen:
                first = time.monotonic() - started
                break
            if time.monotonic() - started > 60:
                raise RuntimeError("no first frame within 60 s")
            time.sleep(0.02)
        pane = int(bench_ui._tmux("display", "-p", "-t", session, "#{pane_pid}").strip())
        proc = bench_ui._app_process(pane)
        time.sleep(WARMUP_S)
        driver = bench_ui._driver_process(proc)
        t0, own0, drv0 = time.monotonic(), bench_ui._cpu_s(proc), bench_ui._cpu_s(driver)
        time.sleep(seconds)
        t1, own1, drv1 = time.monotonic(), bench_ui._cpu_s(proc), bench_ui._cpu_s(driver)
    finally:
        bench_ui._quit(session)  # q, as a user: a closed pane has now and then left one behind
    wall = t1 - t0
    return first, (own1 - own0 + drv1 - drv0) / wall * 100, (drv1 - drv0) / wall * 100


def _side_by_side(small: Path, big: Path, seconds: float) -> tuple[float, float]:
    """CPU % of a core (gputop and its driver process) of two dashboards run at once, over the
    same window: their ratio does not move with this VM's speed, which wanders by up to 2x
    within the hour and so blurs runs made one after the other."""
    sessions = {path: f"{bench_ui.SESSION}-pair{i}" for i, path in enumerate((small, big))}
    try:
        for path, session in sessions.items():
            command = f"{sys.executable} -m gputop --demo={path} --interval 1"
            bench_ui._tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "60", command)
        time.sleep(4)  # the panes' processes have started
        procs = []
        for session in sessions.values():
            pane = int(bench_ui._tmux("display", "-p", "-t", session, "#{pane_pid}").strip())
            app = bench_ui._app_process(pane)
            procs.append((app, bench_ui._driver_process(app)))
        time.sleep(WARMUP_S + 4)  # past the 5,000 new processes' first readings

        def cpu() -> list[float]:
            return [bench_ui._cpu_s(app) + bench_ui._cpu_s(driver) for app, driver in procs]

        t0, before = time.monotonic(), cpu()
        time.sleep(seconds)
        wall, after = time.monotonic() - t0, cpu()
    finally:
        for session in sessions.values():
            bench_ui._quit(session)
    low, high = ((b - a) / wall * 100 for a, b in zip(before, after, strict=True))
    return low, high


def main() -> None:
    raw = os.environ.get("GPUTOP_BENCH_GPU_PROCS_SIZES", "40,500,5000,5000s")
    sizes = [s.strip() for s in raw.split(",") if s.strip() and int(s.strip().rstrip("s")) > 0]
    crowd = Crowd(900)
    if not sizes or not crowd.available:
        print("gpu_procs: skipped")
        return
    seconds = float(os.environ.get("GPUTOP_BENCH_GPU_PROCS_SECONDS", "20"))
    print(
        "GPU processes | sampler tick ms (of it simulated NVML) | first frame s"
        " | dashboard % of a core (driver process %)"
    )
    with tempfile.TemporaryDirectory(prefix="gputop-bench-") as tmp, crowd:
        for size in sizes:
            steady = size.endswith("s")
            count = int(size.rstrip("s"))
            crowd.grow(count)
            scenario = write_scenario(crowd.pids[:count], Path(tmp) / f"{size}.json", steady=steady)
            tick_ms, sim_ms = _sampler_tick_ms(scenario)
            label = f"{size.rstrip('s')}_steady" if steady else size
            line = f"gpu_procs_{label}: {tick_ms:.1f} ({sim_ms:.1f})"
            if shutil.which("tmux") is not None:
                first, cpu, driver = _dashboard(scenario, seconds)
                line += f" | {first:.2f} | {cpu:.2f} ({driver:.2f})"
            print(line, flush=True)
        pair = os.environ.get("GPUTOP_BENCH_GPU_PROCS_PAIR", "40,5000s")
        if pair and shutil.which("tmux") is not None:
            small_size, big_size = (p.strip() for p in pair.split(","))
            big = int(big_size.rstrip("s"))
            small = int(small_size.rstrip("s"))
            crowd.grow(big + small)
            # Each its own processes: one process is one row on one dashboard.
            pair_tmp = Path(tmp)
            low_path = write_scenario(
                crowd.pids[:small], pair_tmp / "pair-small.json", steady=small_size.endswith("s")
            )
            high_path = write_scenario(
                crowd.pids[small : small + big],
                pair_tmp / "pair-big.json",
                steady=big_size.endswith("s"),
            )
            low, high = _side_by_side(low_path, high_path, seconds)
            print(
                f"gpu_procs_side_by_side: {small_size} {low:.2f} % | {big_size} {high:.2f} %"
                f" | ratio {high / low:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
