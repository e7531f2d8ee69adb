"""One process in depth: command line, parent chain, children, device files, signals, env."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from gputop import cells, units
from gputop.engine import proc_lookup
from gputop.engine.holders import held_by
from gputop.engine.kill import SENDING, Killer, Signal
from gputop.engine.model import ProcessRow, ProcInfo, Snapshot
from gputop.errors import GputopError
from gputop.ui import text
from gputop.ui.keys import signal_keys
from gputop.ui.rows import row_key
from gputop.ui.widgets.footer import Footer

ENV_FIRST = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def ordered_environment(env: dict[str, str]) -> list[tuple[str, str]]:
    """CUDA_VISIBLE_DEVICES and friends first, then GPU-related variables, then the rest."""

    def rank(name: str) -> tuple[int, int, str]:
        if name in ENV_FIRST:
            return (0, ENV_FIRST.index(name), name)
        return (1 if name.startswith(proc_lookup.GPU_ENV_PREFIXES) else 2, 0, name)

    return [(k, env[k]) for k in sorted(env, key=rank)]


@dataclass(frozen=True, slots=True)
class ProcReadings:
    """What /proc says about a process beyond its row: family and device files, or environment."""

    parents: tuple[ProcInfo, ...] = ()
    children: tuple[ProcInfo, ...] = ()
    device_files: tuple[str, ...] = ()
    environment: dict[str, str] | None = None
    environment_error: str | None = None  # why the environment could not be read

    @property
    def of_environment(self) -> bool:
        """Whether these are the environment's readings (else the family's)."""
        return self.environment is not None or self.environment_error is not None


def read_proc(row: ProcessRow, dev_dir: str, *, environment: bool) -> ProcReadings:
    """The readings the process detail shows for ``row``, from /proc.

    Each read may take a while, or block on a stuck process: never call this on the UI thread.
    """
    if environment:
        try:
            return ProcReadings(environment=proc_lookup.environment(row.pid))
        except GputopError as exc:
            return ProcReadings(environment_error=str(exc))
    return ProcReadings(
        parents=tuple(proc_lookup.parent_chain(row.pid)),
        children=tuple(proc_lookup.children(row.pid)),
        device_files=tuple(row.device_files or held_by(row.pid, dev_dir) or ()),
    )


def _proc_line(info: ProcInfo) -> str:
    if not info.visible:
        return f"{info.pid}  (not visible)"
    user = cells.ljust(info.user or units.NA, 10)  # in cells: a CJK name is two a character
    return f"{info.pid:>7}  {user} {info.command or info.name or '?'}"


def _container_text(info: ProcInfo) -> str:
    """``runtime name (short id)``, and the pod as ``namespace/pod``; "none" on the host."""
    box = info.container
    if box is None:
        return "none" if info.visible and info.create_time else units.NA
    text = f"{box.runtime} {box.label}"
    if box.name and box.short_id != box.name:
        text += f" ({box.short_id})"
    if box.pod or box.pod_uid:
        text += f"  pod {box.namespace or '?'}/{box.pod or box.pod_uid}"
    return text


def _section(out: Text, heading: str, lines: list[str]) -> None:
    out.append(f"\n{heading}\n", "bold")
    for line in lines or ["none"]:
        out.append(f"  {line}\n")


class ProcessDetailScreen(Screen[None]):
    """Everything about one process; `e` toggles its environment; `k` (or F9, T, K, I) signals it.

    It follows the app's snapshot; what /proc says about the process is read on a worker
    thread, one read at a time, and shown when it arrives.
    """

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding(
            "e",
            "toggle_env",
            "Environment",
            tooltip="its environment, CUDA_VISIBLE_DEVICES first (again: back)",
        ),
        *signal_keys("this process"),
    ]

    @dataclass
    class KillRequested(Message):
        """The user asked to signal this process."""

        row: ProcessRow
        signal: Signal | None = None  # chosen with T, K or I; else the dialog's default

    @dataclass
    class Readings(Message):
        """A worker finished reading /proc for this screen."""

        readings: ProcReadings

    def __init__(
        self, row: ProcessRow, *, dev_dir: str, killer: Killer | None, show_env: bool = False
    ) -> None:
        super().__init__()
        self.row = row
        self.dev_dir = dev_dir
        self.killer = killer  # None in --readonly: no kill key, no signal log
        self.now_wall = time.time()
        self.gone = False
        self.show_env = show_env
        self._reading = False
        self._read_again = False

    @property
    def can_kill(self) -> bool:
        """Whether `k` signals the process (not in --readonly)."""
        return self.killer is not None

    def compose(self) -> ComposeResult:
        yield Static(id="proc-title")
        with VerticalScroll(id="proc-command", can_focus=False):
            yield Static(id="proc-cmdline")
        with VerticalScroll(id="proc-body"):
            yield Static(id="proc-info")
        yield Footer()

    def on_mount(self) -> None:
        self.watch(self.app, "snapshot", self.show_snapshot)

    def show_snapshot(self, snapshot: Snapshot | None) -> None:
        """Follow the process into this snapshot (gone: no longer in its list)."""
        if not self.is_current:  # popped: being removed
            return
        if snapshot is not None:
            key = row_key(self.row)
            row = next((r for r in snapshot.processes if row_key(r) == key), None)
            self.gone = row is None
            if row is not None:
                self.row = row
            self.now_wall = snapshot.taken_at_wall
        self._render_head()
        self._read()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_kill if action == "kill" else True

    def action_kill(self, signal: str | None = None) -> None:
        if self.can_kill:
            self.post_message(self.KillRequested(self.row, Signal(signal) if signal else None))

    def action_toggle_env(self) -> None:
        self.show_env = not self.show_env
        self._read()

    # -- reading /proc ------------------------------------------------------------------
    def _read(self) -> None:
        # One read at a time: a read that blocks on a stuck process must not pile up threads
        # (an exclusive worker would only mark the old one cancelled: a thread cannot be stopped).
        if self._reading:
            self._read_again = True
            return
        self._reading = True
        self._read_in_thread(self.row, self.show_env)

    @work(thread=True, group="proc-read")
    def _read_in_thread(self, row: ProcessRow, environment: bool) -> None:
        readings = read_proc(row, self.dev_dir, environment=environment)
        if not get_current_worker().is_cancelled:
            self.post_message(self.Readings(readings))  # thread-safe

    def on_process_detail_screen_readings(self, message: ProcessDetailScreen.Readings) -> None:
        self._reading = False
        readings = message.readings
        if readings.of_environment == self.show_env:  # else `e` was pressed while reading
            self._render_body(readings)
        if self._read_again:  # the row or the view changed while reading
            self._read_again = False
            self._read()

    # -- drawing ------------------------------------------------------------------------
    def _render_head(self) -> None:
        row = self.row
        states = ", ".join(s.value for s in row.states)
        gone = "  (no longer listed)" if self.gone else ""
        self.query_one("#proc-title", Static).update(
            Text(f"PID {row.pid}  {row.info.name or '?'}  ({states}){gone}")
        )
        self.query_one("#proc-cmdline", Static).update(
            Text(" ".join(row.info.cmdline) or row.info.name or "(command line not readable)")
        )

    def _render_body(self, readings: ProcReadings) -> None:
        body = self._environment(readings) if self.show_env else self._facts(readings)
        self.query_one("#proc-info", Static).update(body)

    def _facts(self, readings: ProcReadings) -> Text:
        row, info = self.row, self.row.info
        created = text.clock_time(info.create_time) if info.create_time else units.NA
        runtime = units.NA
        if info.create_time:
            runtime = units.duration_coarse(self.now_wall - info.create_time)
        used, peak = (
            units.short_size(row.used_memory_bytes),
            units.short_size(row.peak_memory_bytes),
        )
        out = Text()
        pairs = [
            (
                "user",
                f"{info.user or units.NA} (uid {info.uid if info.uid is not None else units.NA})",
            ),
            ("status", info.status or units.NA),
            ("container", _container_text(info)),
            ("started", f"{created}  running {runtime}"),
            ("on GPU", ", ".join(str(i) for i in row.gpu_indices) or "none listed"),
            ("type", row.type.value if row.type else units.NA),
            ("GPU memory", f"{used} (peak {peak})"),
            (
                "SM / mem util",
                f"{units.percent(row.sm_util_percent)} / {units.percent(row.memory_util_percent)}",
            ),
            ("CPU", units.percent(info.cpu_percent)),
            ("host memory", units.short_size(info.host_rss_bytes)),
        ]
        for name, value in pairs:
            out.append(f"{name:<14}", "bold")
            out.append(f"{value}\n")
        for note in (row.parent_note, info.note):
            if note:
                out.append(f"note          {note}\n")
        _section(out, "Parent chain", [_proc_line(p) for p in readings.parents])
        _section(out, "Children", [_proc_line(c) for c in readings.children])
        _section(out, "Open GPU device files", list(readings.device_files))
        _section(out, "Signals sent from this session", self._log_lines())
        out.append("\ne: environment", "italic")
        return out

    def _log_lines(self) -> list[str]:
        if self.killer is None:
            return ["read-only session: signals are disabled"]
        ct = self.row.info.create_time
        return [
            f"{text.clock_time(e.time_wall)}  SIG{e.signal.value}  {e.result}"
            for e in self.killer.log
            if e.pid == self.row.pid and e.result != SENDING and (ct is None or e.create_time == ct)
        ]

    def _environment(self, readings: ProcReadings) -> Text:
        out = Text()
        out.append(f"Environment of PID {self.row.pid}\n", "bold")
        env = readings.environment
        if env is None:
            out.append(f"  cannot show it: {readings.environment_error}\n")
            return out
        for name, value in ordered_environment(env):
            out.append(f"  {name}", "bold")
            out.append(f"={value}\n")
        out.append("\ne: back to the process", "italic")
        return out
