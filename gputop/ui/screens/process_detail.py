"""One process in depth: command line, parent chain, children, device files, signals, env."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from gputop.engine import procs
from gputop.engine.holders import held_by
from gputop.engine.kill import SENDING, AuditEntry
from gputop.engine.model import ProcessRow, ProcInfo
from gputop.errors import GputopError
from gputop.ui import text

ENV_FIRST = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


def ordered_environment(env: dict[str, str]) -> list[tuple[str, str]]:
    """CUDA_VISIBLE_DEVICES and friends first, then GPU-related variables, then the rest."""

    def rank(name: str) -> tuple[int, int, str]:
        if name in ENV_FIRST:
            return (0, ENV_FIRST.index(name), name)
        return (1 if name.startswith(procs.GPU_ENV_PREFIXES) else 2, 0, name)

    return [(k, env[k]) for k in sorted(env, key=rank)]


def _proc_line(info: ProcInfo) -> str:
    if not info.visible:
        return f"{info.pid}  (not visible)"
    return f"{info.pid:>7}  {info.user or text.NA:<10} {info.command or info.name or '?'}"


def _section(out: Text, heading: str, lines: list[str]) -> None:
    out.append(f"\n{heading}\n", "bold")
    for line in lines or ["none"]:
        out.append(f"  {line}\n")


class ProcessDetailScreen(Screen[None]):
    """Everything about one process; `e` toggles its environment; `k` signals it."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("e", "toggle_env", "Environment"),
        Binding("k", "kill", "Kill"),
    ]

    @dataclass
    class KillRequested(Message):
        """The user asked to signal this process."""

        row: ProcessRow

    def __init__(
        self,
        row: ProcessRow,
        *,
        dev_dir: str,
        signal_log: tuple[AuditEntry, ...] | None,
        now_wall: float,
        can_kill: bool,
    ) -> None:
        super().__init__()
        self.row = row
        self.dev_dir = dev_dir
        self.signal_log = signal_log
        self.now_wall = now_wall
        self.gone = False
        self.can_kill = can_kill
        self.show_env = False

    def compose(self) -> ComposeResult:
        yield Static(id="proc-title")
        with VerticalScroll(id="proc-command", can_focus=False):
            yield Static(id="proc-cmdline")
        with VerticalScroll(id="proc-body"):
            yield Static(id="proc-info")
        yield Footer()

    def on_mount(self) -> None:
        self._render_all()

    def update_row(
        self, row: ProcessRow | None, now_wall: float, log: tuple[AuditEntry, ...] | None
    ) -> None:
        """A newer reading of the process (None: it is gone from the GPU list)."""
        self.gone = row is None
        if row is not None:
            self.row = row
        self.now_wall, self.signal_log = now_wall, log
        self._render_all()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.can_kill if action == "kill" else True

    def action_kill(self) -> None:
        if self.can_kill:
            self.post_message(self.KillRequested(self.row))

    def action_toggle_env(self) -> None:
        self.show_env = not self.show_env
        self._render_all()

    def _render_all(self) -> None:
        row = self.row
        states = ", ".join(s.value for s in row.states)
        gone = "  (no longer listed)" if self.gone else ""
        self.query_one("#proc-title", Static).update(
            Text(f"PID {row.pid}  {row.info.name or '?'}  ({states}){gone}")
        )
        self.query_one("#proc-cmdline", Static).update(
            Text(" ".join(row.info.cmdline) or row.info.name or "(command line not readable)")
        )
        body = self._environment() if self.show_env else self._facts()
        self.query_one("#proc-info", Static).update(body)

    def _facts(self) -> Text:
        row, info = self.row, self.row.info
        created = text.clock_time(info.create_time) if info.create_time else text.NA
        runtime = text.duration(self.now_wall - info.create_time) if info.create_time else text.NA
        out = Text()
        pairs = [
            (
                "user",
                f"{info.user or text.NA} (uid {info.uid if info.uid is not None else text.NA})",
            ),
            ("status", info.status or text.NA),
            ("started", f"{created}  running {runtime}"),
            ("on GPU", ", ".join(str(i) for i in row.gpu_indices) or "none listed"),
            ("type", row.type.value if row.type else text.NA),
            (
                "GPU memory",
                f"{text.size(row.used_memory_bytes)} (peak {text.size(row.peak_memory_bytes)})",
            ),
            (
                "SM / mem util",
                f"{text.percent(row.sm_util_percent)} / {text.percent(row.memory_util_percent)}",
            ),
            ("CPU", text.percent(info.cpu_percent)),
            ("host memory", text.size(info.host_rss_bytes)),
        ]
        for name, value in pairs:
            out.append(f"{name:<14}", "bold")
            out.append(f"{value}\n")
        for note in (row.parent_note, info.note):
            if note:
                out.append(f"note          {note}\n")
        _section(out, "Parent chain", [_proc_line(p) for p in procs.parent_chain(row.pid)])
        _section(out, "Children", [_proc_line(c) for c in procs.children(row.pid)])
        files = row.device_files or held_by(row.pid, self.dev_dir) or ()
        _section(out, "Open GPU device files", list(files))
        _section(out, "Signals sent from this session", self._log_lines())
        out.append("\ne: environment", "italic")
        return out

    def _log_lines(self) -> list[str]:
        if self.signal_log is None:
            return ["read-only session: signals are disabled"]
        ct = self.row.info.create_time
        return [
            f"{text.clock_time(e.time_wall)}  SIG{e.signal.value}  {e.result}"
            for e in self.signal_log
            if e.pid == self.row.pid and e.result != SENDING and (ct is None or e.create_time == ct)
        ]

    def _environment(self) -> Text:
        out = Text()
        out.append(f"Environment of PID {self.row.pid}\n", "bold")
        try:
            env = procs.environment(self.row.pid)
        except GputopError as exc:
            out.append(f"  cannot show it: {exc}\n")
            return out
        for name, value in ordered_environment(env):
            out.append(f"  {name}", "bold")
            out.append(f"={value}\n")
        out.append("\ne: back to the process", "italic")
        return out
