"""gputop against the floor of its own stack (issue 42): CPU and memory at rest on the dgx box.

Three programs, each alone in a 200x60 tmux pane, one after the other and in alternating order,
in one run on the same box, all on the dgx scenario of gputop's simulated driver (8 GPUs, about
40 GPU processes; it has no actor processes, so ``--demo=dgx`` starts none):

* textual: bench/floor_textual.py, a bare Textual app updating one Static of 8 lines every second;
* pynvml: bench/floor_pynvml.py, a plain pynvml loop reading utilisation, memory, temperature,
  power, clocks and the process lists of the 8 GPUs every second on the simulated library;
* gputop: ``python -m gputop --demo=dgx --interval 1`` (the dashboard and its driver process).

Each pane runs its program with ``exec``, so the pane's process tree is the program's alone (no
shell). Counted, over a window after a warm-up: CPU, user + system of the tree (reaped children
included) as % of one core; memory at the window's end, RSS summed over the tree and USS (pages
no other process shares, from /proc/PID/smaps) where psutil reads it. The floor is textual +
pynvml: the two halves gputop is made of (its dashboard and its driver process).

Printed: one line per program (medians over the rounds, each process of the tree), then the
ratios gputop CPU / (textual + pynvml) CPU (issue 42's target: at most 1.5) and gputop's total
RSS against 55 MiB and against the floor's.

GPUTOP_BENCH_FLOOR_SECONDS: the window (default 30); GPUTOP_BENCH_FLOOR_WARMUP: the warm-up after
the first frame (default 10); GPUTOP_BENCH_FLOOR_ROUNDS: runs of each program (default 2).
GPUTOP_BENCH_FLOOR_VS=DIR adds gputop as another tree has it (a worktree of an older commit, run
from DIR: `git worktree add /tmp/base HEAD~1`), alternated in the same run, and prints new/old.
GPUTOP_BENCH_FLOOR_WIDE=1 adds a fourth program, outside the ratios: textual_wide, the bare app
painting 51 lines of 196 cells, all changed every second (about what gputop's dgx screen changes
a tick), to tell Textual's cost per changed row from gputop's own; its ratio is printed apart.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import psutil

from bench.bench_peers import SESSION, _spent, _stop_session, _tree, _tree_cpu, _wait_for
from bench.bench_ui import _tmux

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "dgx"
RSS_TARGET_MIB = 55.0
CPU_TARGET = 1.5
MIB = 1024 * 1024

_PY = shlex.quote(sys.executable)
_ENV = f"env PYTHONPATH={shlex.quote(str(ROOT))}"
PROGRAMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "textual": (f"exec {_ENV} {_PY} -m bench.floor_textual", ("GPU 7",)),
    "pynvml": (f"exec {_ENV} {_PY} -m bench.floor_pynvml {SCENARIO}", ("GPU 7 read",)),
    "gputop": (f"exec {_PY} -m gputop --demo={SCENARIO} --interval 1", ("Processes (", "GPU 7")),
}
WIDE = ("textual_wide", (f"exec {_ENV} {_PY} -m bench.floor_textual 51 196", ("GPU 50",)))


@dataclass(frozen=True, slots=True)
class Run:
    cpu: float  # % of one core, the tree
    rss_mib: float  # summed over the tree
    uss_mib: float | None  # summed over the tree, None where psutil cannot read it
    procs: tuple[tuple[str, float, float], ...]  # (what, RSS MiB, CPU %) per process of the tree


def _what(proc: psutil.Process) -> str:
    with contextlib.suppress(psutil.Error):
        cmd = proc.cmdline()
        if "-c" in cmd:  # gputop's driver process: python -P -c BOOT ...
            return "driver process"
        if "-m" in cmd:
            return cmd[cmd.index("-m") + 1]
        return " ".join(cmd)[:40]
    return "?"


def _memory(
    procs: list[psutil.Process], cpu: dict[int, float]
) -> tuple[float, float | None, tuple[tuple[str, float, float], ...]]:
    rss, uss, each = 0.0, 0.0, []
    uss_known = True
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            try:
                full = proc.memory_full_info()
                one_rss, uss = full.rss, uss + full.uss
            except psutil.AccessDenied:
                one_rss, uss_known = proc.memory_info().rss, False
            rss += one_rss
            each.append((_what(proc), one_rss / MIB, cpu.get(proc.pid, 0.0)))
    return rss / MIB, (uss / MIB if uss_known else None), tuple(each)


def _measure(
    command: str, ready: tuple[str, ...], warmup_s: float, seconds: float, cwd: Path = ROOT
) -> Run:
    # The pane starts in cwd: `python -m gputop` imports the gputop found there first.
    _tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "60", "-c", str(cwd), command)
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
        per_pid = {  # each process's share: the UI's and the driver process's apart
            key[0]: _spent({k: v for k, v in cpu0.items() if k == key}, {key: val})
            / (t1 - t0)
            * 100
            for key, val in cpu1.items()
        }
        rss, uss, each = _memory(procs, per_pid)
        _wait_for(ready, timeout_s=2.0)  # still up and drawing
    finally:
        if root is not None:
            procs = list({*procs, *_tree(root)})
        _stop_session(procs)
    return Run(_spent(cpu0, cpu1) / (t1 - t0) * 100, rss, uss, each)


def _line(name: str, runs: list[Run]) -> str:
    cpu = median(r.cpu for r in runs)
    rss = median(r.rss_mib for r in runs)
    usses = [r.uss_mib for r in runs if r.uss_mib is not None]
    uss = f"{median(usses):.1f} MiB" if usses else "n/a"
    each = " + ".join(f"{what} {mib:.1f}" for what, mib, _ in runs[-1].procs)
    split = " + ".join(f"{what} {c:.2f}" for what, _, c in runs[-1].procs)
    rounds = ", ".join(f"{r.cpu:.2f}" for r in runs)
    return (
        f"floor_{name}: {cpu:.2f} % | RSS {rss:.1f} MiB ({each}) | USS {uss} | rounds CPU {rounds}"
        + (f" (last round: {split})" if len(runs[-1].procs) > 1 else "")
    )


def main() -> None:
    if shutil.which("tmux") is None:
        print("floor: skipped (tmux not installed)")
        return
    seconds = float(os.environ.get("GPUTOP_BENCH_FLOOR_SECONDS", "30"))
    warmup_s = float(os.environ.get("GPUTOP_BENCH_FLOOR_WARMUP", "10"))
    rounds = max(1, int(os.environ.get("GPUTOP_BENCH_FLOOR_ROUNDS", "2")))
    programs = dict(PROGRAMS)
    if os.environ.get("GPUTOP_BENCH_FLOOR_WIDE") == "1":
        programs[WIDE[0]] = WIDE[1]
    cwds = dict.fromkeys(programs, ROOT)
    vs = os.environ.get("GPUTOP_BENCH_FLOOR_VS")
    if vs:
        programs["gputop_vs"] = PROGRAMS["gputop"]
        cwds["gputop_vs"] = Path(vs).resolve()
        print(f"gputop_vs: gputop from {cwds['gputop_vs']}", flush=True)
    names = list(programs)
    print(
        f"floor: bare Textual app + pynvml loop vs `gputop --demo={SCENARIO} --interval 1`, "
        f"simulated {SCENARIO} driver, 200x60 tmux, whole process trees (exec'd, no shell), "
        f"{seconds:.0f} s windows after {warmup_s:.0f} s, {rounds} round(s), alternating; "
        f"{psutil.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
        f"{time.strftime('%H:%M UTC', time.gmtime())}",
        flush=True,
    )
    print("program: CPU % of a core | RSS (per process, MiB) | USS | each round's CPU", flush=True)
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            command, ready = programs[name]
            runs[name].append(_measure(command, ready, warmup_s, seconds, cwds[name]))
    for name in names:
        print(_line(name, runs[name]), flush=True)
    cpu = {name: median(r.cpu for r in runs[name]) for name in names}
    rss = {name: median(r.rss_mib for r in runs[name]) for name in names}
    floor_cpu = cpu["textual"] + cpu["pynvml"]
    if "textual_wide" in cpu:
        wide = cpu["textual_wide"] + cpu["pynvml"]
        print(
            f"floor_wide_ratio (information, not the target): gputop {cpu['gputop']:.2f} % / "
            f"(textual_wide + pynvml) {wide:.2f} % = {cpu['gputop'] / wide if wide else 0:.2f}x",
            flush=True,
        )
    if "gputop_vs" in cpu:
        old_cpu, old_rss = cpu["gputop_vs"], rss["gputop_vs"]
        print(
            f"floor_vs: gputop {cpu['gputop']:.2f} % / gputop_vs {old_cpu:.2f} % = "
            f"{cpu['gputop'] / old_cpu if old_cpu else 0:.2f}x CPU; RSS {rss['gputop']:.1f} / "
            f"{old_rss:.1f} MiB ({rss['gputop'] - old_rss:+.1f} MiB)",
            flush=True,
        )
    floor_rss = rss["textual"] + rss["pynvml"]
    ratio = cpu["gputop"] / floor_cpu if floor_cpu > 0 else float("inf")
    cpu_met = "met" if ratio <= CPU_TARGET else "not met"
    rss_met = "met" if rss["gputop"] <= RSS_TARGET_MIB else "not met"
    print(
        f"floor_cpu_ratio: gputop {cpu['gputop']:.2f} % / (textual + pynvml) {floor_cpu:.2f} % "
        f"= {ratio:.2f}x (target <= {CPU_TARGET:.1f}x: {cpu_met})",
        flush=True,
    )
    print(
        f"floor_rss: gputop {rss['gputop']:.1f} MiB vs {RSS_TARGET_MIB:.0f} MiB "
        f"({rss['gputop'] / RSS_TARGET_MIB:.2f}x; {rss_met}); "
        f"vs textual + pynvml {floor_rss:.1f} MiB ({rss['gputop'] - floor_rss:+.1f} MiB)",
        flush=True,
    )


if __name__ == "__main__":
    main()
