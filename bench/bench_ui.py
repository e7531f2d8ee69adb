"""Dashboard costs: CPU and RSS of the real TUI on the dgx scenario in a 200x60 tmux terminal,
time to first frame, and the UI thread's time per snapshot (headless).

GPUTOP_BENCH_UI_SECONDS sets the measuring window (default 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import time
from statistics import median

import psutil

SESSION = f"gputop-bench-{os.getpid()}"
COMMAND = f"{sys.executable} -m gputop --demo=dgx --interval 1"
WARMUP_S = 5.0


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def _app_process(pane_pid: int) -> psutil.Process:
    """The python process running gputop (the pane's shell may exec it or be its parent)."""
    pane = psutil.Process(pane_pid)
    for proc in [pane, *pane.children(recursive=True)]:
        if "gputop" in " ".join(proc.cmdline()):
            return proc
    raise RuntimeError("gputop did not start in the tmux pane")


def _driver_process(proc: psutil.Process) -> psutil.Process | None:
    """gputop's driver process (gputop.engine.child), if it runs one."""
    for child in proc.children():
        with contextlib.suppress(psutil.Error):
            if "gputop.engine.child" in " ".join(child.cmdline()):
                return child
    return None


def _cpu_s(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    times = proc.cpu_times()
    return times.user + times.system


def _main_thread_s(proc: psutil.Process) -> float:
    """CPU seconds of the process's main thread (Textual's event loop: the UI work)."""
    for thread in proc.threads():
        if thread.id == proc.pid:
            return thread.user_time + thread.system_time
    return 0.0


def _first_frame_s(started: float, timeout_s: float = 20.0) -> float:
    while time.monotonic() - started < timeout_s:
        screen = _tmux("capture-pane", "-p", "-t", SESSION)
        if "Processes (" in screen and "GPU 7" in screen:
            return time.monotonic() - started
        time.sleep(0.02)
    raise RuntimeError("no first frame within 20 s")


def tmux_run(seconds: float) -> None:
    """Run the real app in tmux and print CPU, RSS and time to first frame."""
    started = time.monotonic()
    _tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "60", COMMAND)
    try:
        first = _first_frame_s(started)
        proc = _app_process(int(_tmux("display", "-p", "-t", SESSION, "#{pane_pid}").strip()))
        time.sleep(WARMUP_S)
        driver = _driver_process(proc)
        t0, cpu0, main0, drv0 = time.monotonic(), _cpu_s(proc), _main_thread_s(proc), _cpu_s(driver)
        time.sleep(seconds)
        t1, cpu1, main1, drv1 = time.monotonic(), _cpu_s(proc), _main_thread_s(proc), _cpu_s(driver)
        rss_mb = proc.memory_info().rss / 1024**2
        driver_rss_mb = driver.memory_info().rss / 1024**2 if driver is not None else 0.0
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], check=False, capture_output=True)
    own = cpu1 - cpu0
    in_driver = drv1 - drv0
    used = own + in_driver
    wall = t1 - t0
    print(f"ui_first_frame: {first:.2f} s")
    print(f"ui_cpu_per_minute: {used / wall * 60:.2f} s (gputop and its driver process)")
    print(f"ui_cpu_percent_of_core: {used / wall * 100:.2f} %")
    print(f"ui_cpu_gputop_percent: {own / wall * 100:.2f} % (the dashboard's own process)")
    print(f"ui_cpu_driver_process_percent: {in_driver / wall * 100:.2f} % (NVML reads)")
    main = main1 - main0
    print(f"ui_cpu_ui_thread_percent: {main / wall * 100:.2f} %")
    print(f"ui_cpu_other_threads_percent: {(own - main) / wall * 100:.2f} % (sampler, input)")
    print(f"ui_rss: {rss_mb:.1f} MB (+ {driver_rss_mb:.1f} MB the driver process)")


def headless_tick_ms(ticks: int = 60) -> float:
    """Median CPU time for the app to take and paint one dgx snapshot, headless (no sampler).

    Includes Pilot's forced repaint per step (about 8 ms here even for an unchanged frame).
    """
    from gputop.sim.frames import demo_frames
    from gputop.ui.app import make_app
    from gputop.ui.messages import SnapshotReady

    frames = demo_frames("dgx", ticks=ticks)
    app = make_app(None, start_sampler=False, clock=lambda: frames[-1].taken_at_mono)
    times: list[float] = []

    async def main() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            for frame in frames:
                t = time.process_time()
                app.post_message(SnapshotReady(frame))
                await pilot.pause()
                times.append(time.process_time() - t)

    asyncio.run(main())
    return median(times[5:]) * 1000


def main() -> None:
    print(f"ui_headless_tick_dgx_cpu: {headless_tick_ms():.1f} ms")
    if shutil.which("tmux") is None:
        print("ui_tmux: skipped (tmux not installed)")
        return
    tmux_run(float(os.environ.get("GPUTOP_BENCH_UI_SECONDS", "30")))


if __name__ == "__main__":
    main()
