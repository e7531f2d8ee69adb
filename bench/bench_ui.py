"""Dashboard costs: time to the first frame, CPU and RSS of the real TUI in a 200x60 tmux
terminal (dgx scenario), and the UI thread's time per snapshot (headless).

First frame: `gputop --demo` and `gputop --demo=dgx` are started GPUTOP_BENCH_FIRST_FRAME_RUNS
times each (default 7, alternately) in a fresh 200x60 tmux pane; the time from starting the
pane to the first paint (anything on screen) and to the first frame with data (every GPU panel
with its readings, the process table with rows), median and range.
GPUTOP_BENCH_UI_SECONDS sets the CPU measuring window (default 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from statistics import median

import psutil

from gputop.ui.paint import PLAIN_TEXTUAL_ENV

SESSION = f"gputop-bench-{os.getpid()}"
WARMUP_S = 5.0
FIRST_FRAME_SCENARIOS = {"demo": 4, "dgx": 8}  # scenario -> its GPUs
FIRST_FRAME_POLL_S = 0.01


def gputop_command(*args: str) -> str:
    """The shell command that runs this Python's gputop with ``args`` in a tmux pane.

    PYTHONPATH is passed on explicitly (`PYTHONPATH=TREE python -m bench` measures TREE): a tmux
    server started before this bench has its own environment, not ours.
    """
    path = os.environ.get("PYTHONPATH")
    env = f"env PYTHONPATH={shlex.quote(path)} " if path else ""
    # The on/off switch of the fast paths (GPUTOP_PLAIN_TEXTUAL=1: Textual's own paths), for
    # the same reason: `GPUTOP_PLAIN_TEXTUAL=1 python -m bench ui` measures Textual's.
    plain = os.environ.get(PLAIN_TEXTUAL_ENV)
    env += f"env {PLAIN_TEXTUAL_ENV}={shlex.quote(plain)} " if plain else ""
    return f"{env}{shlex.quote(sys.executable)} -m gputop {' '.join(args)}"


COMMAND = gputop_command("--demo=dgx", "--interval", "1")


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


_PANEL_READING = re.compile(r"UTIL[^│%]*?\d+%")  # a GPU's utilisation, in any panel density
_TABLE_ROW = re.compile(r"^│\s*\d+\s+\d+\s", re.MULTILINE)  # GPU index, PID, ...


def has_data(screen: str, gpus: int) -> bool:
    """The dashboard's frame with data: the full panel of the last GPU (not the interim compact
    rows), a reading in every GPU's panel, and the process table with rows."""
    return (
        f"GPU {gpus - 1} " in screen
        and len(_PANEL_READING.findall(screen)) >= gpus
        and "Processes (" in screen
        and _TABLE_ROW.search(screen) is not None
    )


@contextlib.contextmanager
def tmux_server() -> Iterator[None]:
    """Keep a tmux server up (a session of its own) so that no run pays for starting one."""
    keeper = f"{SESSION}-keep"
    _tmux("new-session", "-d", "-s", keeper, "-x", "20", "-y", "5", "sleep 3600")
    try:
        yield
    finally:
        subprocess.run(["tmux", "kill-session", "-t", keeper], check=False, capture_output=True)


def first_frame(command: str, gpus: int, timeout_s: float = 20.0) -> tuple[float, float]:
    """(first paint, first frame with data): seconds from starting ``command`` in a new 200x60
    tmux pane to anything on its screen, and to :func:`has_data`. Quits the pane after."""
    session = f"{SESSION}-first"
    started = time.monotonic()
    size = ("-x", "200", "-y", "60")
    # The pane stays when gputop ends (a crash): its last words are then in the error.
    keep = (";", "set-option", "-t", session, "remain-on-exit", "on")
    _tmux("new-session", "-d", "-s", session, *size, "-c", os.getcwd(), command, *keep)
    painted: float | None = None
    polls = 0
    try:
        while (now := time.monotonic()) - started < timeout_s:
            screen = _tmux("capture-pane", "-p", "-t", session)
            if painted is None and screen.strip():
                painted = now - started
            if has_data(screen, gpus):
                return (painted if painted is not None else now - started), now - started
            polls += 1
            if polls % 10 == 0 and _tmux("display", "-p", "-t", session, "#{pane_dead}")[:1] == "1":
                said = " / ".join(line.strip() for line in screen.splitlines() if line.strip())
                raise RuntimeError(f"gputop ended before its first frame: {said[-600:]}")
            time.sleep(FIRST_FRAME_POLL_S)
    finally:
        _quit(session)
    raise RuntimeError(f"no first frame within {timeout_s:g} s: {command}")


def _quit(session: str, timeout_s: float = 5.0) -> None:
    """Quit gputop with its q key, as a user does, then close the pane.

    Closing the pane instead (SIGHUP) has now and then left a gputop behind: its app ended, but
    Textual's input and output threads did not, and the interpreter waits for them for ever.
    """
    with contextlib.suppress(subprocess.CalledProcessError):
        _tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if _tmux("display", "-p", "-t", session, "#{pane_dead}")[:1] == "1":
                break
            time.sleep(0.05)
    subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)
    time.sleep(0.2)  # the demo's processes leave


def first_frames(runs: int) -> dict[str, list[tuple[float, float]]]:
    """:func:`first_frame` ``runs`` times for each scenario, one after the other in turn."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in FIRST_FRAME_SCENARIOS}
    with tmux_server():
        for _ in range(runs):
            for name, gpus in FIRST_FRAME_SCENARIOS.items():
                command = gputop_command(f"--demo={name}", "--interval", "1")
                times[name].append(first_frame(command, gpus))
    return times


def report_first_frames(times: dict[str, list[tuple[float, float]]]) -> None:
    for name, runs in times.items():
        paint = [p for p, _ in runs]
        data = [d for _, d in runs]
        print(
            f"ui_first_frame_{name}: {median(data):.2f} s with data "
            f"(median of {len(data)}, {min(data):.2f} to {max(data):.2f}); "
            f"first paint {median(paint):.2f} s ({min(paint):.2f} to {max(paint):.2f})"
        )


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
        if has_data(screen, FIRST_FRAME_SCENARIOS["dgx"]):
            return time.monotonic() - started
        time.sleep(0.02)
    raise RuntimeError("no first frame within 20 s")


def tmux_run(seconds: float) -> None:
    """Run the real app in tmux and print CPU, RSS and time to first frame."""
    started = time.monotonic()
    _tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "60", "-c", os.getcwd(), COMMAND)
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
        _quit(SESSION)
    own = cpu1 - cpu0
    in_driver = drv1 - drv0
    used = own + in_driver
    wall = t1 - t0
    print(f"ui_cpu_run_first_frame: {first:.2f} s (dgx; the start of this CPU run alone)")
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
    from gputop.demo_frames import demo_frames
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
    report_first_frames(first_frames(int(os.environ.get("GPUTOP_BENCH_FIRST_FRAME_RUNS", "7"))))
    tmux_run(float(os.environ.get("GPUTOP_BENCH_UI_SECONDS", "30")))


if __name__ == "__main__":
    main()
