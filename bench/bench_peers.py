"""gputop's dashboard against nvitop's, side by side (issue 17): CPU on the same simulated box.

Both run on the dgx scenario (8 GPUs, about 40 GPU processes) of gputop's simulated driver, each
in a 200x60 tmux pane, one at a time and alternately, at 0, 2,000 and 10,000 extra host
processes (real ``sleep`` processes):

* gputop: ``python -m gputop --demo=dgx --interval 1``;
* nvitop (the PyPI package, in its own venv: it pins nvidia-ml-py): ``nvitop -m --interval 1``,
  started by bench/nvitop_on_sim.py, which installs the same SimLibrary as pynvml's loaded
  libnvidia-ml in nvitop's process before nvitop is imported.

CPU is user + system of the pane's whole process tree (gputop's driver process included) over a
window after a warm-up. Printed per size: each tool's share of one core, gputop / nvitop, and
gputop's change against the idle (0 extra processes) run.

GPUTOP_BENCH_PEERS_SECONDS: the window (default 30); GPUTOP_BENCH_PEERS_WARMUP: the warm-up
after the first frame (default 10, long enough for gputop's start-up holder backlog at 10,000);
GPUTOP_BENCH_PEERS_SIZES: extra processes (default "0,2000,10000");
GPUTOP_BENCH_PEERS_ROUNDS: runs of each tool per size (default 1; the median is printed);
GPUTOP_BENCH_NVITOP: the python that has nvitop (default .venv-peers/bin/python, which
``make bench-peers`` creates).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import psutil

from bench.bench_ui import _tmux
from bench.crowd import Crowd, box_processes

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "dgx"
SESSION = f"gputop-peers-{os.getpid()}"
SKIPPED = "peers: skipped (make bench-peers installs nvitop)"
START_TIMEOUT_S = 30.0

GPUTOP = f"{shlex.quote(sys.executable)} -m gputop --demo={SCENARIO} --interval 1"
GPUTOP_READY = ("Processes (", "GPU 7")
NVITOP_READY = ("NVITOP", "Processes:", "No Such Process")  # the dgx PIDs are stand-ins


def _nvitop_command(python: str) -> str:
    launcher = ROOT / "bench" / "nvitop_on_sim.py"
    return (
        f"env PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(python)} "
        f"{shlex.quote(str(launcher))} {SCENARIO} -m --interval 1"
    )


def _nvitop_python() -> str | None:
    python = os.environ.get("GPUTOP_BENCH_NVITOP") or str(ROOT / ".venv-peers" / "bin" / "python")
    return os.path.abspath(python) if Path(python).exists() else None  # not resolved: a venv


def _versions(python: str) -> tuple[str, str] | None:
    """(nvitop's version, its nvidia-ml-py's), or None when nvitop or gputop.sim do not import."""
    probe = (
        "import importlib.metadata as m, nvitop, gputop.sim; "
        "print(nvitop.__version__, m.version('nvidia-ml-py'))"
    )
    done = subprocess.run(
        [python, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    if done.returncode != 0:
        print(f"peers: {python} cannot import nvitop and gputop.sim: {done.stderr.strip()[-300:]}")
        return None
    nvitop, nvml = done.stdout.split()
    return nvitop, nvml


def _tree(root: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [root, *root.children(recursive=True)]
    return []


def _tree_cpu(procs: list[psutil.Process]) -> dict[tuple[int, float], tuple[float, float]]:
    """{(pid, create time): (own user+sys, reaped children's user+sys)} of live processes."""
    out = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            out[(proc.pid, proc.create_time())] = (
                t.user + t.system,
                t.children_user + t.children_system,
            )
    return out


def _spent(
    before: dict[tuple[int, float], tuple[float, float]],
    after: dict[tuple[int, float], tuple[float, float]],
) -> float:
    """CPU seconds the tree spent between two readings (processes born meanwhile count whole)."""
    spent = 0.0
    for key, (own, reaped) in after.items():
        own0, reaped0 = before.get(key, (0.0, 0.0))
        spent += (own - own0) + (reaped - reaped0)
    return spent


def _wait_for(markers: tuple[str, ...], timeout_s: float = START_TIMEOUT_S) -> None:
    started = time.monotonic()
    screen = ""
    while time.monotonic() - started < timeout_s:
        with contextlib.suppress(subprocess.CalledProcessError):
            screen = _tmux("capture-pane", "-p", "-t", SESSION)
            if all(m in screen for m in markers):
                return
        time.sleep(0.1)
    raise RuntimeError(f"no frame with {markers} within {timeout_s:.0f} s; the pane:\n{screen}")


def _stop_session(procs: list[psutil.Process]) -> None:
    subprocess.run(["tmux", "kill-session", "-t", SESSION], check=False, capture_output=True)
    _, alive = psutil.wait_procs(procs, timeout=5)
    for proc in alive:  # ours, started in the pane: killed by PID if the hangup did not end them
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)


def _measure(command: str, ready: tuple[str, ...], warmup_s: float, seconds: float) -> float:
    """Percent of one core the pane's process tree used over ``seconds`` after the warm-up."""
    _tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "60", "-c", str(ROOT), command)
    root: psutil.Process | None = None
    procs: list[psutil.Process] = []
    try:
        root = psutil.Process(int(_tmux("display", "-p", "-t", SESSION, "#{pane_pid}").strip()))
        procs = _tree(root)
        _wait_for(ready)
        time.sleep(warmup_s)
        procs = _tree(root)
        t0, cpu0 = time.monotonic(), _tree_cpu(procs)
        time.sleep(seconds)
        procs = _tree(root)
        t1, cpu1 = time.monotonic(), _tree_cpu(procs)
        _wait_for(ready, timeout_s=2.0)  # still up and drawing
    finally:
        if root is not None:
            procs = list({*procs, *_tree(root)})
        _stop_session(procs)
    return _spent(cpu0, cpu1) / (t1 - t0) * 100


def main() -> None:
    python = _nvitop_python()
    if python is None or shutil.which("tmux") is None:
        print(SKIPPED if python is None else "peers: skipped (tmux not installed)")
        return
    versions = _versions(python)
    if versions is None:
        print(SKIPPED)
        return
    nvitop_version, nvitop_nvml = versions
    gputop_nvml = importlib.metadata.version("nvidia-ml-py")
    seconds = float(os.environ.get("GPUTOP_BENCH_PEERS_SECONDS", "30"))
    warmup_s = float(os.environ.get("GPUTOP_BENCH_PEERS_WARMUP", "10"))
    rounds = max(1, int(os.environ.get("GPUTOP_BENCH_PEERS_ROUNDS", "1")))
    raw = os.environ.get("GPUTOP_BENCH_PEERS_SIZES", "0,2000,10000")
    sizes = sorted({int(s) for s in raw.split(",") if s.strip()})
    crowd = Crowd()
    if not sizes or not crowd.available:
        print("peers: skipped (no sizes, or no sleep)")
        return
    tools = {
        "gputop": (GPUTOP, GPUTOP_READY),
        "nvitop": (_nvitop_command(python), NVITOP_READY),
    }
    print(
        f"peers: nvitop {nvitop_version} (nvidia-ml-py {nvitop_nvml}; gputop's {gputop_nvml}), "
        f"`nvitop -m --interval 1` vs `gputop --demo={SCENARIO} --interval 1`, both on the "
        f"simulated {SCENARIO} driver, 200x60 tmux, whole process trees, {seconds:.0f} s windows "
        f"after {warmup_s:.0f} s, {rounds} round(s) each, alternating",
        flush=True,
    )
    print(
        "extra processes (host total) | gputop % of a core | nvitop % of a core"
        " | gputop/nvitop | gputop vs idle",
        flush=True,
    )
    idle: float | None = None
    with crowd:
        for index, extra in enumerate(sizes):
            crowd.grow(extra)
            time.sleep(2.0)  # let the spawning settle
            host = box_processes()
            runs: dict[str, list[float]] = {"gputop": [], "nvitop": []}
            for r in range(rounds):
                order = ("gputop", "nvitop") if (index + r) % 2 == 0 else ("nvitop", "gputop")
                for name in order:
                    command, ready = tools[name]
                    runs[name].append(_measure(command, ready, warmup_s, seconds))
            g, n = median(runs["gputop"]), median(runs["nvitop"])
            if extra == 0:
                idle = g
            vs_idle = f"{(g / idle - 1) * 100:+.0f} %" if idle else "n/a"
            detail = ""
            if rounds > 1:
                each = {k: ", ".join(f"{v:.2f}" for v in vs) for k, vs in runs.items()}
                detail = f" (rounds: gputop {each['gputop']}; nvitop {each['nvitop']})"
            print(
                f"peers_{extra}: {extra} ({host}) | {g:.2f} % | {n:.2f} % | "
                f"{g / n:.2f}x | {vs_idle}{detail}",
                flush=True,
            )


if __name__ == "__main__":
    main()
