"""Check gputop against nvidia-smi and real GPU processes on a box with an NVIDIA GPU.

Run by ``scripts/real-gpu-check.sh`` (or ``python scripts/real_gpu_check.py``) with the Python
whose gputop is checked: every gputop call is ``sys.executable -m gputop``. It compares

1. every ``--query-gpu`` field both tools know (one call each, split only where a call fails):
   static fields exactly, fields that move by format and a tolerance;
2. ``dmon -c 2`` for a few ``-s`` sets: header lines equal, each row's column ends and ``-``s;
3. where torch is installed: a process that allocates 256 MiB and frees it, and an orphaned
   CUDA worker (its parent exited), as ``--once``, ``--json``, ``doctor`` and the dashboard
   (headless, Textual's Pilot) see them; both are ended afterwards, by PID;

and writes one report (``-o``, default ./gputop-real-gpu-check.txt) with PASS/FAIL/SKIP per
check. Everything has a timeout; the whole run ends within five minutes. Exit 0: all passed
(SKIP included); 1: some check failed; 2: no nvidia-smi or no NVIDIA GPU here, or bad usage.

``--demo NAME`` runs gputop on its simulated driver instead: only for gputop's own tests, whose
fake nvidia-smi answers from the same simulator. Every command is an argv list: nothing the
user types reaches a shell.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import IO, NoReturn, TypeVar

BUDGET_S = 270.0  # the whole run, leaving room under the promised five minutes
DEFAULT_REPORT = "gputop-real-gpu-check.txt"
DMON_SELECTS: tuple[str | None, ...] = (None, "pucvmet", "mu")  # default, all, and an order
WORKER_MARK = "gputop-real-gpu-check-worker"  # in each worker's argv: checked before a kill
WORKER_LIFETIME_S = 240  # a worker ends by itself if the checker dies
ALLOC_MIB = 256
MiB = 1 << 20
A = TypeVar("A")
B = TypeVar("B")


class Budget:
    """The time left for the whole run: each step gets the smaller of its own limit and that."""

    def __init__(self, total_s: float) -> None:
        self.end = time.monotonic() + total_s

    def left(self, step_s: float) -> float:
        return max(0.1, min(step_s, self.end - time.monotonic()))

    def spent(self) -> bool:
        return time.monotonic() >= self.end


@dataclass(frozen=True)
class Ran:
    """What one command did."""

    argv: tuple[str, ...]
    rc: int | None  # None: killed at its timeout, or could not start
    out: str
    err: str
    elapsed_s: float

    def why(self) -> str:
        """One line on how it failed."""
        if self.rc is None:
            return f"{_cmd(self.argv)}: {self.err or 'timed out'}"
        first = next((line for line in self.err.splitlines() if line.strip()), "")
        first = first or next((line for line in self.out.splitlines() if line.strip()), "")
        return f"{_cmd(self.argv)}: exit {self.rc}" + (f": {_quote(first)}" if first else "")


def _cmd(argv: Sequence[str]) -> str:
    """A short name for a command in the report (the gputop or nvidia-smi part)."""
    words = list(argv)
    if len(words) > 2 and words[1] == "-m":
        words = words[2:]
    words[0] = Path(words[0]).name
    text = " ".join(words)
    return text if len(text) <= 90 else text[:87] + "..."


def _quote(text: str) -> str:
    """A value for the report: quoted, control characters escaped (the driver's text too)."""
    return json.dumps(text, ensure_ascii=False)


def run(argv: Sequence[str], timeout_s: float, env: dict[str, str] | None = None) -> Ran:
    """Run ``argv`` (no shell) and keep its output; never raises for the command's failure."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Ran(tuple(argv), None, "", f"timed out after {timeout_s:.0f} s", timeout_s)
    except OSError as exc:
        return Ran(tuple(argv), None, "", f"cannot run: {exc.strerror}", 0.0)
    return Ran(tuple(argv), done.returncode, done.stdout, done.stderr, time.monotonic() - start)


@dataclass(frozen=True)
class Check:
    """One line of the report: a verdict, what was checked, and the evidence."""

    verdict: str  # PASS, FAIL or SKIP
    name: str
    summary: str
    details: tuple[str, ...] = ()


@dataclass
class Tools:
    """How to run each side: nvidia-smi, and the gputop under test."""

    smi: str
    demo: str | None
    budget: Budget
    env: dict[str, str] = field(default_factory=dict)

    def gputop(self, *args: str, command: str | None = None) -> list[str]:
        argv = [sys.executable, "-m", "gputop"]
        if command is not None:
            argv.append(command)
        if self.demo is not None:
            argv.append(f"--demo={self.demo}")
        return [*argv, *args]

    def run_gputop(self, *args: str, command: str | None = None, step_s: float = 30) -> Ran:
        return run(self.gputop(*args, command=command), self.budget.left(step_s), self.env)

    def run_smi(self, *args: str, step_s: float = 30) -> Ran:
        return run([self.smi, *args], self.budget.left(step_s))


# -- 1. query fields ----------------------------------------------------------------------------

_FIELD_LINE = re.compile(r'^"[^"\s]+"(?: or "[^"\s]+")*\s*$')


def help_fields(text: str) -> list[tuple[str, ...]]:
    """The (name, aliases...) groups of a ``--help-query-gpu`` text, in its order."""
    return [
        tuple(re.findall(r'"([^"]+)"', line))
        for line in text.splitlines()
        if _FIELD_LINE.match(line.strip())
    ]


def common_fields(smi: list[tuple[str, ...]], ours: list[tuple[str, ...]]) -> list[str]:
    """The fields both know, by a name both accept, in nvidia-smi's order."""
    known = {name for group in ours for name in group}
    out: list[str] = []
    for group in smi:
        name = next((n for n in group if n in known), None)
        if name is not None and name not in out:
            out.append(name)
    return out


@dataclass(frozen=True)
class Tolerance:
    """How far a moving field's two readings, taken a moment apart, may differ."""

    abs_: float | None = None  # None: any value of the same format


EXACT = Tolerance(abs_=0)
ANY = Tolerance()
# Fields that change between two calls a moment apart; the rest must be equal. First match wins.
MOVING: tuple[tuple[str, Tolerance], ...] = (
    ("timestamp", Tolerance(abs_=BUDGET_S)),
    ("temperature.*", Tolerance(abs_=5)),
    ("fan.speed", Tolerance(abs_=10)),
    ("memory.used", Tolerance(abs_=1024)),
    ("memory.free", Tolerance(abs_=1024)),
    ("protected_memory.used", Tolerance(abs_=1024)),
    ("protected_memory.free", Tolerance(abs_=1024)),
    ("utilization.*", ANY),
    ("power.draw*", ANY),
    ("gpu.power.draw*", ANY),
    ("module.power.draw*", ANY),
    ("clocks.current.*", ANY),
    ("clocks.gr", ANY),
    ("clocks.sm", ANY),
    ("clocks.mem", ANY),
    ("clocks.video", ANY),
    ("clocks_event_reasons.supported", EXACT),
    ("clocks_throttle_reasons.supported", EXACT),
    ("clocks_event_reasons*", ANY),
    ("clocks_throttle_reasons*", ANY),
    ("pstate", ANY),
    ("pcie.link.gen.current", ANY),  # the link drops a generation when idle
    ("pcie.link.gen.gpucurrent", ANY),
    ("pcie.link.width.current", ANY),
    ("encoder.stats.*", ANY),
    ("fbc.stats.*", ANY),
)


def tolerance_of(name: str) -> Tolerance | None:
    """None for a static field (compared exactly)."""
    for pattern, tolerance in MOVING:
        if fnmatchcase(name, pattern):
            return None if tolerance is EXACT else tolerance
    return None


_HEX = re.compile(r"0x[0-9A-Fa-f]+")
_DECIMAL = re.compile(r"\d+\.(\d+)")
_WORDS = {"Active": "<activity>", "Not Active": "<activity>"}


def value_format(text: str) -> str:
    """A value's format: digits abstracted; decimals, units and bracketed texts kept."""
    if text in _WORDS:
        return _WORDS[text]
    shape = _HEX.sub(lambda m: f"<hex{len(m.group()) - 2}>", text)
    shape = _DECIMAL.sub(lambda m: "N." + "d" * len(m.group(1)), shape)
    return re.sub(r"\d+", "N", shape)


def _number(text: str) -> float | None:
    match = re.match(r"^-?\d+(?:\.\d+)?", text)
    return float(match.group()) if match else None


def _timestamp(text: str) -> float | None:
    try:
        return datetime.strptime(text, "%Y/%m/%d %H:%M:%S.%f").timestamp()
    except ValueError:
        return None


def compare_value(name: str, smi: str, ours: str) -> str | None:
    """None when gputop's value passes for nvidia-smi's, else why not."""
    tolerance = tolerance_of(name)
    if tolerance is None:
        return None if smi == ours else "value differs"
    if value_format(smi) != value_format(ours):
        return "format differs"
    if tolerance.abs_ is None:
        return None
    read = _timestamp if name == "timestamp" else _number
    a, b = read(smi), read(ours)
    if a is not None and b is not None and abs(a - b) > tolerance.abs_:
        return f"differs by more than {tolerance.abs_:g}"
    return None


@dataclass(frozen=True)
class Table:
    """One tool's answer: field -> the value per GPU row; and the fields it refused, and why."""

    values: dict[str, list[str]]
    refused: dict[str, str]


def query(runner: Callable[[list[str]], Ran], names: list[str]) -> Table:
    """All ``names`` in one call; a call that fails (or whose rows do not split into as many
    values) is split in two, down to single fields, so one bad field does not hide the rest."""
    values: dict[str, list[str]] = {}
    refused: dict[str, str] = {}
    todo = [names]
    while todo:
        batch = todo.pop(0)
        ran = runner(batch)
        rows = [line for line in ran.out.splitlines() if line.strip()]
        cells = [[line] if len(batch) == 1 else line.split(", ") for line in rows]
        if ran.rc == 0 and rows and all(len(c) == len(batch) for c in cells):
            for i, name in enumerate(batch):
                values[name] = [c[i].strip() for c in cells]
        elif len(batch) > 1 and ran.rc is not None:
            half = len(batch) // 2
            todo += [batch[:half], batch[half:]]
        else:
            for name in batch:
                refused[name] = ran.why() if ran.rc != 0 else "its output does not parse"
    return Table(values, refused)


def check_query(tools: Tools) -> list[Check]:
    smi_help = tools.run_smi("--help-query-gpu")
    our_help = tools.run_gputop("--help-query-gpu", command="query")
    for ran in (smi_help, our_help):
        if ran.rc != 0:
            return [Check("FAIL", "query-gpu", f"no field list: {ran.why()}")]
    smi_fields, our_fields = help_fields(smi_help.out), help_fields(our_help.out)
    names = common_fields(smi_fields, our_fields)
    if not names:
        return [Check("FAIL", "query-gpu", "the two field lists have no field in common")]

    def smi(batch: list[str]) -> Ran:
        return tools.run_smi(f"--query-gpu={','.join(batch)}", "--format=csv,noheader", step_s=60)

    def ours(batch: list[str]) -> Ran:
        args = (f"--query-gpu={','.join(batch)}", "--format=csv,noheader")
        return tools.run_gputop(*args, command="query", step_s=60)

    theirs, mine = both(lambda: query(smi, names), lambda: query(ours, names))
    bus = theirs.values.get("pci.bus_id", [])
    checks: list[Check] = []
    for name in names:
        if name in theirs.refused:
            why = theirs.refused[name]
            checks.append(Check("SKIP", f"query-gpu {name}", f"nvidia-smi refuses it: {why}"))
            continue
        if name in mine.refused:
            why = mine.refused[name]
            checks.append(Check("FAIL", f"query-gpu {name}", f"gputop refuses it: {why}"))
            continue
        a, b = theirs.values[name], mine.values[name]
        if len(a) != len(b):
            rows = f"{len(a)} rows from nvidia-smi, {len(b)} from gputop"
            checks.append(Check("FAIL", f"query-gpu {name}", rows))
            continue
        diffs = [
            f"GPU {i} ({bus[i] if i < len(bus) else '?'}): nvidia-smi {_quote(x)}"
            f" | gputop {_quote(y)} ({how})"
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            if (how := compare_value(name, x, y)) is not None
        ]
        if diffs:
            checks.append(Check("FAIL", f"query-gpu {name}", diffs[0], tuple(diffs[1:])))
    bad = sum(c.verdict != "PASS" for c in checks)
    failed = any(c.verdict == "FAIL" for c in checks)
    only_smi = [g[0] for g in smi_fields if not set(g) & {n for o in our_fields for n in o}]
    only_ours = [g[0] for g in our_fields if not set(g) & {n for s in smi_fields for n in s}]
    moving = sum(tolerance_of(n) is not None for n in names)
    summary = (
        f"{len(names) - bad} of {len(names)} fields agree "
        f"({len(names) - moving} static: exactly; {moving} moving: by format and tolerance)"
    )
    notes = (
        f"only nvidia-smi lists: {', '.join(only_smi) or 'none'}",
        f"only gputop lists: {', '.join(only_ours) or 'none'}",
    )
    return [Check("FAIL" if failed else "PASS", "query-gpu", summary, notes), *checks]


# -- 2. dmon -----------------------------------------------------------------------------------


Cell = tuple[int, str]  # where a value ends (its column), and the value


def dmon_parts(text: str) -> tuple[list[str], dict[str, list[Cell]]]:
    """The header lines, and per GPU its first row: (end column, text) per value."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    header = [line for line in lines if line.startswith("#")][:2]
    rows: dict[str, list[Cell]] = {}
    for line in lines:
        if not line.startswith("#"):
            cells = [(m.end(), m.group()) for m in re.finditer(r"\S+", line)]
            rows.setdefault(cells[0][1], cells)
    return header, rows


def row_diffs(names: list[str], gpu: str, smi: list[Cell], ours: list[Cell]) -> list[str]:
    """Where a GPU's row differs in layout: a column's end, or "-" on one side only."""
    if len(smi) != len(ours):
        return [f"GPU {gpu}: {len(smi)} values from nvidia-smi, {len(ours)} from gputop"]
    return [
        f"GPU {gpu} {names[i] if i < len(names) else i}: nvidia-smi {_quote(a)} ends at {x},"
        f" gputop {_quote(b)} at {y}"
        for i, ((x, a), (y, b)) in enumerate(zip(smi, ours, strict=True))
        if x != y or (a == "-") != (b == "-")
    ]


def both(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """Run two things side by side: dmon's samples take seconds, which need not add up."""
    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(first), pool.submit(second)
        return a.result(), b.result()


def check_dmon(tools: Tools) -> list[Check]:
    checks: list[Check] = []
    for select in DMON_SELECTS:
        args = ("-c", "2") if select is None else ("-c", "2", "-s", select)
        label = "dmon " + " ".join(args)
        smi, ours = both(
            partial(tools.run_smi, "dmon", *args), partial(tools.run_gputop, *args, command="dmon")
        )
        if smi.rc != 0:
            checks.append(Check("SKIP", label, f"nvidia-smi cannot: {smi.why()}"))
            continue
        if ours.rc != 0:
            checks.append(Check("FAIL", label, ours.why()))
            continue
        (smi_head, smi_rows), (our_head, our_rows) = dmon_parts(smi.out), dmon_parts(ours.out)
        diffs = [
            f"header: nvidia-smi {_quote(x)} | gputop {_quote(y)}"
            for x, y in zip(smi_head, our_head, strict=False)
            if x != y
        ]
        if len(smi_head) != len(our_head):
            diffs.append(f"{len(smi_head)} header lines from nvidia-smi, {len(our_head)} ours")
        if sorted(smi_rows) != sorted(our_rows):
            diffs.append(f"GPUs: nvidia-smi {sorted(smi_rows)} | gputop {sorted(our_rows)}")
        names = smi_head[0].lstrip("#").split() if smi_head else []
        for gpu in sorted(set(smi_rows) & set(our_rows)):
            diffs += row_diffs(names, gpu, smi_rows[gpu], our_rows[gpu])
        if diffs:
            checks.append(Check("FAIL", label, diffs[0], tuple(diffs[1:])))
        else:
            agree = f"headers and row layout agree, {len(smi_rows)} GPUs"
            checks.append(Check("PASS", label, agree))
    return checks


# -- 3. real processes (torch) -------------------------------------------------------------------

ALLOC_WORKER = f"""
import os, sys, threading
import torch
if not torch.cuda.is_available():
    print("NOCUDA", flush=True)
    sys.exit(0)
threading.Timer({WORKER_LIFETIME_S}, os._exit, args=(0,)).start()
x = torch.ones({ALLOC_MIB} * 2**20, dtype=torch.uint8, device="cuda:0")
torch.cuda.synchronize()
print("READY", os.getpid(), flush=True)
sys.stdin.readline()
del x
torch.cuda.empty_cache()
torch.cuda.synchronize()
print("FREED", flush=True)
sys.stdin.readline()
os._exit(0)
"""

# The parent forks before CUDA is touched, waits for the child's context, and exits: the child
# is adopted (init or a subreaper) while it holds the GPU, as a worker whose launcher died.
ORPHAN_WORKER = f"""
import os, sys, time
parent = os.getpid()
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    import torch
    if not torch.cuda.is_available():
        print("NOCUDA", flush=True)
        os._exit(0)
    x = torch.ones(64 * 2**20, dtype=torch.uint8, device="cuda:0")
    torch.cuda.synchronize()
    os.write(w, b"x")
    os.close(w)
    while os.getppid() == parent:
        time.sleep(0.05)
    print("READY", os.getpid(), flush=True)
    time.sleep({WORKER_LIFETIME_S})
    os._exit(0)
os.close(w)
os.read(r, 1)
"""


class Worker:
    """A workload process whose stdout lines are read with a timeout."""

    def __init__(self, code: str, env: dict[str, str]) -> None:
        # Its stderr, read when it fails; closed by end().
        self.err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, WORKER_MARK],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            env=env,
            start_new_session=True,  # its own session: the orphan is adopted from outside it
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.pid: int | None = None  # the PID it reports (the orphan's is its child's)
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str] | None) -> None:
        for line in stream or ():
            self.lines.put(line.strip())
        self.lines.put("EOF")

    def expect(self, word: str, timeout_s: float) -> str | None:
        """None when the worker said ``word``, else what it said (or its stderr's last line)."""
        try:
            line = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            return f"no {word} within {timeout_s:.0f} s"
        if line.startswith(word):
            if word == "READY":
                self.pid = int(line.split()[1])
            return None
        if line == "NOCUDA":
            return "torch.cuda.is_available() is False"
        self.err.seek(0)
        last = [x for x in self.err.read().splitlines() if x.strip()][-1:]
        return f"the worker said {_quote(line)}" + (f": {_quote(last[0])}" if last else "")

    def send(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()

    def end(self) -> None:
        """End the worker and the PID it reported, by PID, after checking it is still ours."""
        if self.pid is not None and self.pid != self.proc.pid and _is_worker(self.pid):
            _terminate(self.pid)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(3)
        self.err.close()


def _is_worker(pid: int) -> bool:
    try:
        return WORKER_MARK.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _terminate(pid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        end = time.monotonic() + 3.0
        while time.monotonic() < end and _is_worker(pid):
            time.sleep(0.05)
        if not _is_worker(pid):
            return


@dataclass(frozen=True)
class Seen:
    """One PID as one view shows it: its tags/states, and its GPU memory in MiB if shown."""

    states: tuple[str, ...]
    mib: float | None


def seen_in_json(text: str, pid: int) -> Seen | None:
    for row in json.loads(text).get("processes", []):
        if row.get("pid") == pid:
            used = row.get("used_memory_bytes")
            return Seen(tuple(row.get("states") or ()), None if used is None else used / MiB)
    return None


def seen_in_once(text: str, pid: int) -> Seen | None:
    match = re.search(rf"(?:^|[\s/]){pid}\(([^)]*)\)(?:\[([^\]]*)\])?", text, re.MULTILINE)
    if match is None:
        return None
    mib = re.match(r"(\d+)M", match.group(1))
    tags = tuple((match.group(2) or "active").split("+"))
    return Seen(tags, float(mib.group(1)) if mib else None)


def seen_in_doctor(text: str, pid: int) -> Seen | None:
    """Doctor lists only the stuck: their tags, and "kill" when it tells to signal this PID."""
    match = re.search(rf"^\s*PID {pid}\s+\[([^\]]*)\]", text, re.MULTILINE)
    if match is None:
        return None
    tags = tuple(match.group(1).split("+"))
    return Seen((*tags, "kill") if f"kill -TERM {pid}" in text else tags, None)


def seen_in_dashboard(pids: tuple[int, ...], timeout_s: float) -> dict[int, Seen]:
    """The dashboard's process table, headless, on the real driver, once it lists ``pids``."""
    from gputop.sources import open_source
    from gputop.ui.app import make_app

    source = open_source(isolated=True)
    app = make_app(source, interval_s=0.5, readonly=True)
    found: dict[int, Seen] = {}

    async def main() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            end = time.monotonic() + timeout_s
            while time.monotonic() < end and set(found) != set(pids):
                table = app.main_screen.table
                for key in table.visible_keys():
                    row = table.row(key)
                    if row is not None and row.pid in pids:
                        used = row.used_memory_bytes
                        mib = None if used is None else used / MiB
                        found[row.pid] = Seen(tuple(str(s) for s in row.states), mib)
                await pilot.pause(0.25)

    try:
        asyncio.run(asyncio.wait_for(main(), timeout_s + 10))
    finally:
        source.close()
    return found


def judge_worker(seen: Seen | None, *, orphan: bool, view: str) -> str | None:
    """None when the view shows the worker right, else what is wrong."""
    if view == "doctor":
        if orphan:
            ok = seen is not None and "orphan" in seen.states and "kill" in seen.states
            return None if ok else f"doctor does not name it a stuck orphan: {seen}"
        return None if seen is None else f"doctor calls a working process stuck: {seen}"
    if seen is None:
        return f"{view} does not list it"
    if orphan:
        return None if "orphan" in seen.states else f"{view} shows {seen.states}, not orphan"
    if any(s in seen.states for s in ("orphan", "holder", "exited", "other-namespace")):
        return f"{view} shows {seen.states}"
    if seen.mib is None or seen.mib < ALLOC_MIB:
        return f"{view} shows {seen.mib} MiB, not at least {ALLOC_MIB}"
    return None


View = tuple[str, Callable[[str, int], Seen | None], tuple[str, ...], str | None]
VIEWS: tuple[View, ...] = (
    ("--json", seen_in_json, ("--json",), None),
    ("--once", seen_in_once, ("--once", "-p"), None),
    ("doctor", seen_in_doctor, (), "doctor"),
)


def check_processes(tools: Tools) -> list[Check]:
    import importlib.util

    name = "processes"
    if importlib.util.find_spec("torch") is None:
        return [Check("SKIP", name, f"torch is not installed for {sys.executable}")]
    if tools.demo is not None:
        return [Check("SKIP", name, "--demo: simulated views never show real processes")]
    alloc, orphan = Worker(ALLOC_WORKER, tools.env), Worker(ORPHAN_WORKER, tools.env)
    try:
        for worker in (alloc, orphan):
            why = worker.expect("READY", tools.budget.left(90))
            if why is not None:
                verdict = "SKIP" if "is_available" in why else "FAIL"
                return [Check(verdict, name, f"the workload did not start: {why}")]
        assert alloc.pid is not None and orphan.pid is not None
        pids = (alloc.pid, orphan.pid)
        checks: list[Check] = []
        json_before: Seen | None = None
        for view, read, args, command in VIEWS:
            ran = tools.run_gputop(*args, command=command, step_s=30)
            if ran.rc is None or (ran.rc != 0 and command is None):
                checks.append(Check("FAIL", f"{name} {view}", ran.why()))
                continue
            for pid, is_orphan in zip(pids, (False, True), strict=True):
                seen = read(ran.out, pid)
                if view == "--json" and not is_orphan:
                    json_before = seen
                why = judge_worker(seen, orphan=is_orphan, view=view)
                what = f"{'orphan' if is_orphan else 'allocating'} PID {pid}: {seen}"
                checks.append(Check("FAIL" if why else "PASS", f"{name} {view}", why or what))
        shown = seen_in_dashboard(pids, tools.budget.left(30))
        for pid, is_orphan in zip(pids, (False, True), strict=True):
            why = judge_worker(shown.get(pid), orphan=is_orphan, view="dashboard")
            what = f"{'orphan' if is_orphan else 'allocating'} PID {pid}: {shown.get(pid)}"
            checks.append(Check("FAIL" if why else "PASS", f"{name} dashboard", why or what))
        checks.append(_check_freed(tools, alloc, json_before))
        return checks
    finally:
        alloc.end()
        orphan.end()


def _check_freed(tools: Tools, alloc: Worker, before: Seen | None) -> Check:
    label = "processes --json after free"
    alloc.send()
    why = alloc.expect("FREED", tools.budget.left(30))
    if why is not None or alloc.pid is None:
        return Check("FAIL", label, f"the worker did not free: {why}")
    ran = tools.run_gputop("--json", step_s=30)
    after = seen_in_json(ran.out, alloc.pid) if ran.rc == 0 else None
    if before is None or before.mib is None or after is None or after.mib is None:
        return Check("FAIL", label, f"no memory reading: before {before}, after {after}")
    ok = before.mib - after.mib >= ALLOC_MIB * 0.75
    summary = f"PID {alloc.pid}: {before.mib:.0f} MiB, then {after.mib:.0f} MiB"
    return Check("PASS" if ok else "FAIL", label, summary)


# -- the run -----------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="real-gpu-check",
        description="Compare gputop with nvidia-smi and real GPU processes; write one report.",
    )
    parser.add_argument(
        "-o", "--output", default=DEFAULT_REPORT, metavar="FILE", help="the report to write"
    )
    parser.add_argument(
        "--demo",
        metavar="NAME",
        default=None,
        help="for gputop's own tests only: run gputop on this simulated scenario",
    )
    return parser.parse_args(argv)


def no_gpu_here(tools: Tools) -> str | None:
    """Why this box cannot be checked, or None."""
    ran = tools.run_smi("-L", step_s=30)
    if ran.rc != 0:
        return f"nvidia-smi cannot see the driver ({ran.why()})"
    if not any(line.startswith("GPU ") for line in ran.out.splitlines()):
        return "nvidia-smi lists no GPU"
    return None


def versions(tools: Tools) -> list[str]:
    ours = tools.run_gputop("--version")
    fields = "--query-gpu=index,name,driver_version,pci.bus_id"
    smi = tools.run_smi(fields, "--format=csv,noheader")
    lines = [f"gputop: {ours.out.strip() or ours.why()} (python: {sys.executable})"]
    lines += [f"GPU: {_quote(line)[1:-1]}" for line in smi.out.splitlines() if line.strip()]
    if tools.demo is not None:
        lines.append(f"gputop ran on its SIMULATED driver (--demo={tools.demo}): a self-test")
    return lines


def open_report(path: Path) -> IO[str]:
    """The report file, created or emptied."""
    # O_NOFOLLOW: root running this in a shared folder never writes through someone's link.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    return os.fdopen(os.open(path, flags, 0o644), "w", encoding="utf-8")


def render_report(head: list[str], checks: list[Check], elapsed_s: float) -> str:
    counts = {v: sum(c.verdict == v for c in checks) for v in ("PASS", "FAIL", "SKIP")}
    lines = ["# gputop real-GPU check", f"date: {datetime.now().isoformat(timespec='seconds')}"]
    lines += [*head, ""]
    for check in checks:
        lines.append(f"{check.verdict:<5} {check.name}: {check.summary}")
        lines += [f"      {detail}" for detail in check.details]
    lines.append("")
    lines.append(
        f"summary: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP"
        f" in {elapsed_s:.1f} s"
    )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        print("real-gpu-check: no nvidia-smi on PATH: run it on a box with an NVIDIA GPU")
        return 2
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k != "GPUTOP_DEMO"}  # the real driver
    tools = Tools(smi=smi, demo=args.demo, budget=Budget(BUDGET_S), env=env)
    why = no_gpu_here(tools)
    if why is not None:
        print(f"real-gpu-check: {why}")
        return 2
    path = Path(args.output)
    try:  # before the checks: a report that cannot be written is known at once
        report = open_report(path)
    except OSError as exc:
        print(f"real-gpu-check: cannot write {path}: {exc.strerror}")
        return 2
    with report:
        head = versions(tools)
        checks: list[Check] = []
        for step in (check_query, check_dmon, check_processes):
            if tools.budget.spent():
                checks.append(Check("FAIL", step.__name__, "not run: the time budget is spent"))
                continue
            try:
                checks += step(tools)
            except Exception as exc:  # noqa: BLE001 (one step's bug must not lose the report)
                what = f"{type(exc).__name__}: {exc}"
                checks.append(Check("FAIL", step.__name__, f"the check crashed: {_quote(what)}"))
        report.write(render_report(head, checks, time.monotonic() - started))
    failed = any(c.verdict == "FAIL" for c in checks)
    print(f"real-gpu-check: {'FAIL' if failed else 'PASS'}: report in {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
