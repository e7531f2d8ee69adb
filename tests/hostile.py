"""A hostile box: a real process whose argv, environment and zombie child's name hold terminal
escapes, C1 controls, bidi overrides and newlines, listed on a GPU whose driver name is hostile too.

A scenario file lists the two real PIDs, so the real CLI and dashboard run on them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.engine.spawn import PY

ARGS = ("\x1b]0;OWNED\x07", "\x1b[2J", "\x9b31mred", "\u202eevil\u2066", "two\nlines\u2028")
ENV = {"GPUTOP_EVIL": "\x1b]0;ENV\x07\u202e"}
GPU_NAME = "NVIDIA A100\x1b]0;GPU\x07\u202e"

# The zombie child renames itself (PR_SET_NAME), exits, and is never reaped: a process with a
# hostile name and no argv, which views show by its name.
SCRIPT = """
import ctypes, os, sys, time
pid = os.fork()
if pid == 0:
    ctypes.CDLL(None).prctl(15, b"\\x1b]0;PWN\\x07", 0, 0, 0)  # PR_SET_NAME
    os._exit(0)
os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
print(pid, flush=True)
time.sleep(120)
"""


@dataclass(frozen=True)
class HostileBox:
    """The scenario file and the two real PIDs it lists on GPU 0."""

    scenario: Path
    pid: int  # argv carries ARGS, environment ENV
    zombie: int  # name "\x1b]0;PWN\x07", no argv


@contextlib.contextmanager
def hostile_box(folder: Path) -> Iterator[HostileBox]:
    """Start the hostile process, write its scenario into ``folder``; kill it after the block."""
    proc = subprocess.Popen(
        [*PY, SCRIPT, *ARGS], stdout=subprocess.PIPE, text=True, env={**os.environ, **ENV}
    )
    try:
        assert proc.stdout is not None
        zombie = int(proc.stdout.readline())
        gpu = {
            "name": GPU_NAME,
            "memory_total_mib": 81920,
            "processes": [
                {"pid": proc.pid, "name": "python\x1b[2J", "used_memory_mib": 4096},
                {"pid": zombie, "used_memory_mib": 1024},
            ],
        }
        path = folder / "hostile.json"
        path.write_text(json.dumps({"name": "hostile", "gpu": [gpu]}))
        yield HostileBox(scenario=path, pid=proc.pid, zombie=zombie)
    finally:
        proc.kill()
        proc.wait()
