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

    def start(self, code: str, *args: str, new_session: bool = False) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [*PY, code, *args],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=new_session,
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

    def adopt(self, pid: int) -> None:
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
