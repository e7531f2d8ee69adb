"""Real processes that play the demo's GPU users: trainers, a server, a stuck holder, a zombie.

The demo should behave like a real box, so its processes are real: each actor is a small Python
script run from a private temporary directory (so its command line reads ``python train.py ...``),
holding open fake device files in that directory's ``dev/``, which gputop scans instead of
``/dev``. Actors exit by themselves when the gputop process that started them is gone, and are
killed and the directory removed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputop.sim.devices import fill, remove_all

# Imported where actors start: every simulated box loads this module (for ActorSpec), most have
# no actors (dgx), and the driver process would hold these for as long as it runs.
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

# The one script every actor runs; the role comes from the environment so argv stays realistic.
ACTOR_SCRIPT = r"""
import ctypes, os, sys, time
role = os.environ["GPUTOP_ACTOR_ROLE"]
if role == "stopped":
    try:  # a stopped actor cannot poll: let the kernel kill it when gputop dies
        ctypes.CDLL(None).prctl(1, 9)
    except (OSError, AttributeError):
        pass
owner = int(os.environ["GPUTOP_ACTOR_OWNER"])
files = [open(p, "rb") for p in os.environ.get("GPUTOP_ACTOR_HOLD", "").split(os.pathsep) if p]

def owner_alive():
    try:
        os.kill(owner, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True

def linger():
    while owner_alive():
        time.sleep(0.5)
    # The owner was killed before it could tidy up: the demo's folder (our cwd) goes with us.
    here = os.getcwd()
    if os.path.basename(here).startswith("gputop-demo-"):
        import shutil
        shutil.rmtree(here, ignore_errors=True)
    sys.exit(0)

if role == "zombie-parent":
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitid(os.P_PID, child, os.WEXITED | os.WNOWAIT)  # it has exited: a zombie, not reaped
    print("ready", child, flush=True)
    linger()
elif role == "unkillable":
    # posix_spawn's vfork wait keeps this process in state D until its child execs, and the
    # child first opens a FIFO nobody writes to. A watchdog (this process cannot poll while in D)
    # opens it for writing once gputop is gone or the FIFO removed: the child then runs `true`.
    fifo = os.path.join(os.getcwd(), "unkillable.fifo")
    os.mkfifo(fifo, 0o600)
    closed_r, closed_w = os.pipe()  # the watchdog says when it holds no device file any more
    if os.fork() == 0:
        for f in files:
            f.close()
        sys.stdout.close()
        os.close(closed_r)
        os.write(closed_w, b"x")
        os.close(closed_w)
        while owner_alive() and os.path.exists(fifo):
            time.sleep(0.5)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW))
        except OSError:
            pass
        os._exit(0)
    os.close(closed_w)
    os.read(closed_r, 1)  # "ready" only once the parent alone holds the device files
    os.close(closed_r)
    print("ready", os.getpid(), flush=True)
    true = "/bin/true" if os.path.exists("/bin/true") else "/usr/bin/true"
    # the child holds no device file: only its parent is the stuck holder
    actions = [(os.POSIX_SPAWN_CLOSE, f.fileno()) for f in files]
    actions.append((os.POSIX_SPAWN_OPEN, 99, fifo, os.O_RDONLY, 0))
    os.posix_spawn(true, ["true"], {}, file_actions=actions)
    linger()
elif role == "orphan":
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        os.write(w, b"x")
        os.close(w)
        sys.stdout.close()
        linger()
    os.close(w)
    os.read(r, 1)
    print("ready", child, flush=True)
    os._exit(0)
else:
    print("ready", os.getpid(), flush=True)
    linger()
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorSpec:
    """One real process the scenario wants: its script name, arguments, role and device files."""

    name: str  # how scenario processes refer to it: actor = "rank0"
    script: str = "train.py"
    args: tuple[str, ...] = ()
    role: str = (
        # worker | zombie-parent (its zombie child is the actor) | orphan | stopped |
        # unkillable (in state D: a vfork wait that does not end while gputop runs)
        "worker"
    )
    holds: tuple[str, ...] = ()  # device file names, e.g. ("nvidia0", "nvidiactl")


@dataclass(slots=True)
class Cast:
    """The running actors of one scenario."""

    root: Path
    pids: dict[str, int] = field(default_factory=dict)
    _procs: list[subprocess.Popen[str]] = field(default_factory=list)

    @property
    def dev_dir(self) -> str:
        """The directory of fake device files the actors hold open."""
        return str(self.root / "dev")

    def stop(self) -> None:
        """Kill every actor (and the zombie's parent, which reaps it) and remove the directory."""
        import shutil
        import subprocess  # loaded already: start_cast started the actors with it

        # An unkillable actor's blocked child: its FIFO opened for writing, it runs `true` and
        # its parent leaves state D (a vfork wait is killable, but the child would stay).
        with contextlib.suppress(OSError):
            os.close(
                os.open(self.root / "unkillable.fifo", os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
            )
        # list(): another thread may still be starting actors (see stop_all).
        for pid in list(self.pids.values()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for proc in list(self._procs):
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
        shutil.rmtree(self.root, ignore_errors=True)


_STARTED: list[Cast] = []  # every cast of this process, from before its first actor starts


def stop_all() -> None:
    """Stop every cast this process started, including one still starting in another thread
    (gputop's driver process told to leave while the demo is coming up), and remove every
    simulated box's device folder it made."""
    for cast in _STARTED:
        cast.stop()
    remove_all()


def start_cast(specs: tuple[ActorSpec, ...], device_names: tuple[str, ...]) -> Cast:
    """Start every actor and wait until each holds its files; returns their PIDs by name."""
    import subprocess
    import tempfile
    from pathlib import Path

    root = Path(tempfile.mkdtemp(prefix="gputop-demo-"))
    cast = Cast(root=root)
    _STARTED.append(cast)
    atexit.register(cast.stop)
    dev = root / "dev"
    dev.mkdir()
    fill(dev, device_names)
    for spec in specs:
        (root / spec.script).write_text(ACTOR_SCRIPT)
        env = {
            **os.environ,
            "GPUTOP_ACTOR_ROLE": spec.role,
            "GPUTOP_ACTOR_OWNER": str(os.getpid()),
            "GPUTOP_ACTOR_HOLD": os.pathsep.join(str(dev / f) for f in spec.holds),
        }
        proc = subprocess.Popen(  # argv is ours, never user input
            [sys.executable, spec.script, *spec.args],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            # Never the user's terminal: the dashboard draws there, and an actor started just as
            # gputop is stopped (its folder removed under it) would print its error on top.
            stderr=subprocess.DEVNULL,
            text=True,
            # An orphan's job leader (the process we start) exits: give it a session of its own.
            # The others get a process group of their own: Ctrl-C, Ctrl-Z and a closed terminal
            # signal the terminal's foreground group, which would print KeyboardInterrupt
            # tracebacks from each actor. They exit by themselves when gputop is gone.
            start_new_session=spec.role == "orphan",
            process_group=None if spec.role == "orphan" else 0,
        )
        cast._procs.append(proc)
        line = proc.stdout.readline() if proc.stdout else ""
        parts = line.split()
        if len(parts) != 2 or parts[0] != "ready":
            cast.stop()
            raise RuntimeError(f"demo actor {spec.name} did not start")
        cast.pids[spec.name] = int(parts[1])
        if spec.role == "orphan":
            proc.wait(timeout=5)  # its parent exits at once: the child is now an orphan
        if spec.role == "stopped":
            os.kill(cast.pids[spec.name], signal.SIGSTOP)
            # Signals arrive asynchronously: return once it is really stopped (WNOWAIT leaves
            # the stop to be seen by anyone else who asks).
            os.waitid(os.P_PID, cast.pids[spec.name], os.WSTOPPED | os.WNOWAIT)
    return cast
