"""The terminal guard: if gputop dies with the dashboard open, its driver process mends the tty.

gputop (the parent, :func:`arm`) hands the driver process a copy of its terminal, the terminal's
modes, and the read end of a pipe its faulthandler writes to; the driver process (:func:`mend`,
when its pipe from gputop closes without a goodbye) restores the modes, turns off what Textual
turned on, and saves gputop's crash dump, if any, to a file named in one line.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import time
from itertools import count
from typing import IO

from gputop.engine.messages import TerminalGuard

# What Textual's driver turns on, turned off: mouse reporting (all modes), bracketed paste,
# focus events, the kitty keyboard protocol; then line wrapping, the cursor, colours and the
# main screen.
TERMINAL_RESET = (
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?1004l"
    "\x1b[<u\x1b[?7h\x1b[?25h\x1b[0m\x1b[?1049l"
)


def arm() -> tuple[TerminalGuard, IO[bytes]] | None:
    """What the driver process needs to mend the terminal, and gputop's faulthandler file (now
    writing into the guard's pipe); None when stderr is no terminal."""
    import termios

    if not os.isatty(2):
        return None
    tty = os.dup(2)
    try:
        attrs = termios.tcgetattr(tty)
    except termios.error:
        os.close(tty)
        return None
    read_end, write_end = os.pipe()
    fault_file = os.fdopen(write_end, "wb", buffering=0)
    faulthandler.enable(file=fault_file)
    return TerminalGuard(tty, attrs, read_end), fault_file


def disarm() -> None:
    """gputop is closing: a crash from here on is no longer the guard's to report."""
    with contextlib.suppress(Exception):
        faulthandler.disable()


def mend(guard: TerminalGuard) -> None:
    """Put the terminal back as it was before gputop, and say why in one line."""
    import termios

    fd = guard.tty_fd
    with contextlib.suppress(termios.error, OSError):
        termios.tcsetattr(fd, termios.TCSANOW, guard.termios_attrs)
    with contextlib.suppress(OSError):
        os.write(fd, TERMINAL_RESET.encode())
    line = "gputop ended without closing the dashboard; the terminal was put back."
    report = _read_all(guard.fault_fd)
    if report:
        first = report.strip().splitlines()[0] if report.strip() else "a crash"
        path = save_report(report)
        where = f"the report is in {path}" if path else "the report could not be saved"
        line = f"gputop crashed ({first.removeprefix('Fatal Python error: ')}); {where}."
    with contextlib.suppress(OSError):
        os.write(fd, (line + "\r\n").encode("utf-8", "replace"))


def _read_all(fd: int | None) -> str:
    if fd is None:
        return ""
    chunks: list[bytes] = []
    with contextlib.suppress(OSError):
        os.set_blocking(fd, False)
        while len(chunks) < 64:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def save_report(text: str) -> str | None:
    """Write gputop's crash dump under the user's state folder (or the temp folder).

    The name is one anyone can guess, in /tmp perhaps, and this may be root: the file is always
    a new one (O_EXCL, no link followed, mode 0600); something already there gets a later name.
    """
    import tempfile
    from pathlib import Path  # here: the driver process imports this module, rarely crashes

    from gputop.engine.private_file import UnsafeFile, create_fresh

    stem = time.strftime("crash-%Y%m%d-%H%M%S") + f"-{os.getppid()}"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    data = text.encode("utf-8", "replace")
    for folder in (Path(state) / "gputop", Path(tempfile.gettempdir())):
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
        # Taken (planted, or a second crash this second): the next name; else the next folder.
        names = (str(folder / f"{stem}{f'-{n}' if n else ''}.txt") for n in count())
        try:
            path, fd = create_fresh(names)
        except UnsafeFile:
            continue
        try:
            with open(fd, "wb") as out:
                out.write(data)
        except OSError:
            continue
        return path
    return None
