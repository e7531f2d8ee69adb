"""A box of names that are not one cell a character: a CJK user, CJK, combining-mark and
zero-width argv and process names (comm), and a CJK GPU name, on real processes.

The user is added for the test (``useradd --badname``) and removed after, even on failure; the
processes run for real (``/bin/sleep`` under another argv[0], or Python renaming itself with
prctl PR_SET_NAME), and a scenario file lists their PIDs on two GPUs, so the real CLI and the
dashboard read them from /proc like any other.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.users import added_user

# Wider than the USER column (8 cells), so the dashboard cuts it, by cells.
USER_PREFIX = "用户名用户名"
CJK_ARGV0 = "训练任务"  # 4 characters, 8 cells
MARKS_ARGV0 = "Z" + "\u0334\u0322\u031b" * 12 + "algo"  # 41 characters, 5 cells
MARKS_COMM = "Z\u0334\u0322\u031balgo"  # 15 bytes at most: the kernel's TASK_COMM_LEN
ZW_NAME = "s\u200bsh"  # reads "ssh" on a terminal, unless shown as an escape
ZOMBIE_COMM = "s\u200bsh僵尸"  # 12 bytes: a stuck process doctor names
CJK_GPU = "NVIDIA 计算卡 A100"

# Renames itself (comm) to argv[1]; with an argv[2], first leaves a child of that name unreaped
# (a zombie: no argv, shown by its name). Prints the zombie's PID (or 0), then waits.
RENAME = """
import ctypes, os, sys, time
name = lambda text: ctypes.CDLL(None).prctl(15, text.encode(), 0, 0, 0)  # PR_SET_NAME
zombie = 0
if len(sys.argv) > 2:
    zombie = os.fork()
    if zombie == 0:
        name(sys.argv[2])
        os._exit(0)
    os.waitid(os.P_PID, zombie, os.WEXITED | os.WNOWAIT)
name(sys.argv[1])
print(zombie, flush=True)
time.sleep(300)
"""


@dataclass(frozen=True)
class WideBox:
    """The scenario and the real PIDs it lists: GPU 0 (CJK name) runs ``cjk`` and ``marks``,
    GPU 1 runs ``zw``, ``plain`` and ``zombie``."""

    scenario: Path
    user: str  # the CJK user ``cjk`` runs as
    cjk: int  # argv[0] CJK_ARGV0, as ``user``
    marks: int  # argv[0] MARKS_ARGV0, comm MARKS_COMM
    zw: int  # argv[0] and comm ZW_NAME
    plain: int  # python, as root
    zombie: int  # plain's unreaped child, comm ZOMBIE_COMM


def _start(
    argv: list[str], executable: str, user: pwd.struct_passwd | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        executable=executable,
        stdout=subprocess.PIPE,
        text=True,
        user=None if user is None else user.pw_uid,
        group=None if user is None else user.pw_gid,
        extra_groups=None if user is None else [],
    )


@contextlib.contextmanager
def wide_box(folder: Path) -> Iterator[WideBox]:
    """Start the processes (and the user), write their scenario into ``folder``; all gone after."""
    name = f"{USER_PREFIX}{os.getpid() % 100:02d}"  # each test run its own (runs may overlap)
    with added_user(name) as user:
        procs: list[subprocess.Popen[str]] = []
        try:
            procs.append(_start([CJK_ARGV0, "300"], "/bin/sleep", user))
            renamed = (
                [MARKS_ARGV0, MARKS_COMM],
                [ZW_NAME, ZW_NAME],
                ["python", "python", ZOMBIE_COMM],
            )
            procs += [_start([a[0], "-S", "-c", RENAME, *a[1:]], sys.executable) for a in renamed]
            zombies = []
            for proc in procs[1:]:
                assert proc.stdout is not None
                zombies.append(int(proc.stdout.readline()))
            cjk, marks, zw, plain = (p.pid for p in procs)

            def listed(*pids_mib: tuple[int, int]) -> list[dict[str, int]]:
                return [{"pid": pid, "used_memory_mib": mib} for pid, mib in pids_mib]

            plain_gpu = listed((zw, 2048), (plain, 1024), (zombies[-1], 512))
            scenario = {
                "name": "wide",
                "gpu": [
                    {"name": CJK_GPU, "processes": listed((cjk, 20480), (marks, 4096))},
                    {"name": "NVIDIA A100-SXM4-80GB", "processes": plain_gpu},
                ],
            }
            path = folder / "wide.json"
            path.write_text(json.dumps(scenario, ensure_ascii=False))
            yield WideBox(path, name, cjk, marks, zw, plain, zombies[-1])
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()
