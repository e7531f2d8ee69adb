"""A /proc tree of our own for holder-scan tests: PIDs with fd links and a maps file."""

from __future__ import annotations

from pathlib import Path

PYTHON_MAPS = "00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/python\n"


def add_pid(root: Path, pid: int, fds: dict[str, str], maps: str = PYTHON_MAPS) -> None:
    """``root/PID`` with ``fd/N`` links to ``fds``' targets and ``maps`` as its memory map."""
    d = root / str(pid)
    (d / "fd").mkdir(parents=True, exist_ok=True)
    for fd, target in fds.items():
        (d / "fd" / fd).symlink_to(target)
    (d / "maps").write_text(maps)
