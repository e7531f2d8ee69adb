"""Real processes for engine tests: holders, zombies, orphans, stopped ones. Always cleaned up."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import psutil

PY = [sys.executable, "-S", "-c"]

HOLD = """
import sys, time
f = open(sys.argv[1], "rb")
print("ready", flush=True)
time.sleep(120)
"""

# mmap through libc: Python's mmap module would keep a duplicate fd open.
MAP_AND_CLOSE = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
C = ctypes
libc.mmap.argtypes = [C.c_void_p, C.c_size_t, C.c_int, C.c_int, C.c_int, C.c_long]
fd = os.open(sys.argv[1], os.O_RDONLY)
addr = libc.mmap(None, 4096, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
assert addr not in (None, ctypes.c_void_p(-1).value)
os.close(fd)
print("ready", flush=True)
time.sleep(120)
"""

IGNORE_TERM = """
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(120)
"""

# The parent forks a child that exits at once and never reaps it: the child stays a zombie.
ZOMBIE_PARENT = """
import os, time
pid = os.fork()
if pid == 0:
    os._exit(0)
print(pid, flush=True)
time.sleep(120)
"""

# A job leader (own session) opens the device, forks a worker that inherits it, and exits.
ORPHAN_MAKER = """
import os, sys, time
f = open(sys.argv[1], "rb")
pid = os.fork()
if pid == 0:
    time.sleep(120)
    os._exit(0)
print(pid, flush=True)
os._exit(0)
"""

# launcher -> rank -> worker, one job (one process group). The worker holds argv[1] and prints
# "RANK WORKER"; the launcher reaps a dead rank and lives on, as torchrun or a supervisor would.
LAUNCHER = """
import os, sys, time
rank = os.fork()
if rank == 0:
    if os.fork() == 0:
        f = open(sys.argv[1], "rb")
        print(os.getppid(), os.getpid(), flush=True)
        time.sleep(120)
        os._exit(0)
    time.sleep(120)
    os._exit(0)
os.waitpid(rank, 0)
time.sleep(120)
"""

# A job-control shell running "first | second": both its children, in the first one's process
# group; the second holds argv[1]. argv[2] == "exit-first": the first exits (and is reaped), as
# `cat file | python train.py` does. Prints "FIRST SECOND".
PIPELINE = """
import subprocess, sys, time
code = "import sys, time; f = open(sys.argv[1], 'rb'); print('ready', flush=True); time.sleep(120)"
first = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(120)"],
                         process_group=0)
second = subprocess.Popen([sys.executable, "-S", "-c", code, sys.argv[1]],
                          process_group=first.pid, stdout=subprocess.PIPE, text=True)
assert second.stdout.readline().strip() == "ready"
if sys.argv[2] == "exit-first":
    first.kill()
    first.wait()
print(first.pid, second.pid, flush=True)
time.sleep(120)
"""

# A daemon: forked, setsid() (it leads its own group and session), holds argv[1]; its parent
# exits, so init or a subreaper adopts it. Prints the daemon's PID.
DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    f = open(sys.argv[1], "rb")
    print(os.getpid(), flush=True)
    time.sleep(120)
    os._exit(0)
"""

# A reaper, as tini is: it runs argv[2] (job code) in a child and reaps whatever it adopts, as
# PID 1 of a PID namespace (started under unshare) or as a subreaper (argv[3] == "subreaper").
# host_ids() is (parent PID, own PID) as the host sees them: /proc is the host's (no --mount-proc).
REAPER = """
import ctypes, os, sys, time

def host_ids():
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    return fields[1], os.readlink("/proc/self")

if sys.argv[3] == "subreaper":
    assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
if os.fork() == 0:
    exec(sys.argv[2])
    os._exit(0)
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(1)
"""
_HOST_LAUNCHER = LAUNCHER.replace("os.getppid(), os.getpid()", "*host_ids()")
# Job code for REAPER: LAUNCHER in a group of its own (as tini starts its child), or in a
# session of its own. Prints "RANK WORKER".
JOB_OWN_GROUP = "os.setpgid(0, 0)\n" + _HOST_LAUNCHER
JOB_OWN_SESSION = "os.setsid()\n" + _HOST_LAUNCHER
# Job code for REAPER: a worker in the reaper's own group, holding argv[1] (a container's
# `sh -c 'python train.py'`). Prints "REAPER WORKER".
JOB_REAPERS_GROUP = "f = open(sys.argv[1], 'rb')\nprint(*host_ids(), flush=True)\ntime.sleep(120)\n"

# A parent with one sleeping child: a small tree for "with children".
TREE = """
import subprocess, sys, time
kid = subprocess.Popen([sys.executable, "-S", "-c", "import time; time.sleep(120)"])
print(kid.pid, flush=True)
time.sleep(120)
"""


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Poll ``predicate`` until true or timeout (for OS state changes, not for performance)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def ppid_of(pid: int) -> int | None:
    """The parent PID from /proc/PID/stat (None once it has gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError):
        return None


def status_of(pid: int) -> str | None:
    try:
        return psutil.Process(pid).status()
    except psutil.NoSuchProcess:
        return None


class Spawner:
    """Starts helper processes and remembers every PID to kill at teardown."""

    def __init__(self) -> None:
        self.popens: list[subprocess.Popen[str]] = []
        self.extra: list[psutil.Process] = []  # grandchildren we learned about

    def start(
        self,
        code: str,
        *args: str,
        new_session: bool = False,
        own_group: bool = False,
        prefix: tuple[str, ...] = (),
    ) -> subprocess.Popen[str]:
        """Run ``code`` (after ``prefix``, a wrapper such as unshare), stdout piped."""
        proc = subprocess.Popen(
            [*prefix, *PY, code, *args],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
            process_group=0 if own_group else None,
        )
        self.popens.append(proc)
        return proc

    def ready(self, code: str, *args: str) -> subprocess.Popen[str]:
        """Start ``code`` and wait for its first line ("ready")."""
        proc = self.start(code, *args)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        return proc

    def first_line_pid(self, proc: subprocess.Popen[str]) -> int:
        assert proc.stdout is not None
        pid = int(proc.stdout.readline())
        self.adopt(pid)
        return pid

    def first_line_pids(self, proc: subprocess.Popen[str]) -> list[int]:
        """The PIDs on ``proc``'s next line, each killed at teardown."""
        assert proc.stdout is not None
        pids = [int(word) for word in proc.stdout.readline().split()]
        for pid in pids:
            self.adopt(pid)
        return pids

    def adopt(self, pid: int) -> None:
        if pid <= 0:  # 0 and negative PIDs would make the kill at teardown signal a group
            raise ValueError(f"not a process: {pid}")
        with contextlib.suppress(psutil.NoSuchProcess):
            self.extra.append(psutil.Process(pid))

    def cleanup(self) -> None:
        for p in self.extra:
            try:
                if p.is_running():  # psutil checks the create time: never a reused PID
                    p.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        for proc in self.popens:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()


# Opens argv[1] while the file argv[2] exists, and closes it when argv[2] is removed; prints
# "ready", then "opened" and "closed".
OPEN_WHEN_TOLD = """
import os, sys, time
print("ready", flush=True)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.01)
f = open(sys.argv[1], "rb")
print("opened", flush=True)
while os.path.exists(sys.argv[2]):
    time.sleep(0.01)
f.close()
print("closed", flush=True)
time.sleep(120)
"""

# Holds argv[1] from three threads' process: only the process is a holder, never a thread ID.
# Prints the thread IDs.
HOLD_WITH_THREADS = """
import sys, threading, time
f = open(sys.argv[1], "rb")
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(3)]
for t in threads:
    t.start()
print(*(t.native_id for t in threads), flush=True)
time.sleep(120)
"""
