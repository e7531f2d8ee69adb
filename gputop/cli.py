"""Command line: `gputop` (dashboard), `gputop --once/--json`, and the subcommands.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``run(args) -> int``;
they are imported only when needed so `gputop --once` never loads Textual.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, NoReturn

from gputop.argtypes import INTERVAL_BOUNDS_HELP, add_timeout_argument, interval_seconds
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.sanitize import clean
from gputop.errors import DriverTimeout, GputopError
from gputop.exits import (
    ExitSignals,
    describe_os_error,
    reader_may_leave,
    say,
    silence,
    silence_if_broken,
)
from gputop.sources import add_source_arguments
from gputop.version import __version__

if TYPE_CHECKING:
    from gputop.engine.model import Snapshot

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("gputop.commands.doctor", "diagnose stuck GPU processes and unattributed memory"),
    "query": ("gputop.commands.query", "nvidia-smi --query-gpu compatible logger"),
    "dmon": ("gputop.commands.dmon", "nvidia-smi dmon compatible device monitor"),
    "export": ("gputop.commands.export", "Prometheus exporter (dcgm-exporter compatible names)"),
    "fleet": ("gputop.commands.fleet", "every host and GPU a Prometheus server knows"),
}


class _Parser(argparse.ArgumentParser):
    """argparse whose answer to bad input is one line; the usage is in --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {clean(message)} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # `--demo` takes an optional scenario name, so in `gputop --demo query ...` argparse
        # would read "query" as the scenario: a bare --demo before a command means the demo.
        argv = list(sys.argv[1:] if args is None else args)
        for i, arg in enumerate(argv[:-1]):
            if arg == "--demo" and argv[i + 1] in SUBCOMMANDS:
                argv[i] = "--demo=demo"
        return super().parse_known_args(argv, namespace)


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole argument parser, subcommands included (they inherit its one-line errors).

    ``commands``: the subcommands whose own options are added, which imports their modules; None
    is all of them. The others are still listed (with their help) and chosen alike, but know no
    options of their own: :func:`parse_args` builds the one the command line names, so the
    dashboard loads none of them.
    """
    parser = _Parser(
        prog="gputop",
        description="A terminal dashboard for NVIDIA GPUs. No options: the interactive dashboard.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"gputop {__version__}")
    _add_main_options(parser)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if commands is not None and name not in commands:
            if importlib.util.find_spec(module_name) is not None:
                subs.add_parser(name, help=help_text, description=help_text)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        sub = subs.add_parser(name, help=help_text, description=help_text)
        add_source_arguments(sub)
        module.add_arguments(sub)
    return parser


def _add_main_options(parser: argparse.ArgumentParser) -> None:
    """The options before the subcommand (all but --help and --version)."""
    add_source_arguments(parser)
    mode = parser.add_argument_group("one-shot output")
    mode.add_argument("-1", "--once", action="store_true", help="print a compact view and exit")
    mode.add_argument(
        "--json", action="store_true", help="print the full snapshot as JSON and exit"
    )
    mode.add_argument("-c", "--show-cmd", action="store_true", help="--once: show commands")
    mode.add_argument("-p", "--show-pid", action="store_true", help="--once: show PIDs")
    mode.add_argument("-u", "--show-user", action="store_true", help="--once: show users")
    mode.add_argument("-F", "--show-fan", action="store_true", help="--once: show fan speed")
    mode.add_argument(
        "-P", "--show-power", action="store_true", help="--once: show power draw/limit"
    )
    mode.add_argument(
        "--no-color", action="store_true", help="no colours (also when NO_COLOR is set)"
    )
    add_timeout_argument(mode, default_s=DEFAULT_TIMEOUT_S)
    ui = parser.add_argument_group("dashboard")
    ui.add_argument(
        "--interval",
        type=interval_seconds,
        default=1.0,
        metavar="SEC",
        help=f"sampling interval in seconds, {INTERVAL_BOUNDS_HELP} (default 1)",
    )
    ui.add_argument("--theme", default=None, help="a Textual theme name, e.g. nord, gruvbox")
    ui.add_argument(
        "--audit-log", metavar="FILE", default=None, help="append every signal sent to FILE"
    )
    ui.add_argument(
        "--readonly", action="store_true", help="no signals at all: for shared boxes and demos"
    )


class _Unsure(Exception):
    """The first look at the command line cannot tell which subcommand it names."""


class _FirstLook(_Parser):
    """Reads the main options and the subcommand's name only: no help, no version, no exit."""

    def error(self, message: str) -> NoReturn:
        raise _Unsure(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Unsure(message)


def _command_named(argv: Sequence[str] | None) -> str | None:
    """The subcommand the command line names (None: the dashboard or a one-shot).

    argparse picks the subcommand from the main options and the positionals alone, before it
    reads a subcommand's own options: a parser with the same main options and bare subcommands
    picks the same one. _Unsure when it cannot parse the main options (the whole parser then
    says what is wrong, as before).
    """
    look = _FirstLook(prog="gputop", add_help=False)
    _add_main_options(look)
    subs = look.add_subparsers(dest="command")
    for name in SUBCOMMANDS:
        subs.add_parser(name, add_help=False)
    args, _ = look.parse_known_args(argv)
    command: str | None = args.command
    return command


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line; only the subcommand it names is imported (none for the
    dashboard, whose start-up time this saves: about 90 ms of imports before the driver
    process can be started)."""
    try:
        command = _command_named(argv)
        commands: tuple[str, ...] | None = () if command is None else (command,)
    except _Unsure:
        commands = None
    args = build_parser(commands).parse_args(argv)
    if commands is not None and args.command is not None and args.command not in commands:
        args = build_parser().parse_args(argv)  # never seen: then the whole parser decides
    return args


def wants_color(args: argparse.Namespace) -> bool:
    """Colour unless --no-color, NO_COLOR (any value), TERM=dumb, or output is not a terminal."""
    if getattr(args, "no_color", False) or "NO_COLOR" in os.environ:
        return False
    if os.environ.get("TERM") == "dumb":  # as git and Rich: it shows escape codes as text
        return False
    return sys.stdout.isatty()


def _run(args: argparse.Namespace, signals: ExitSignals) -> int:
    if args.command:
        module = importlib.import_module(SUBCOMMANDS[args.command][0])
        result: int = module.run(args)
        return result
    if args.once or args.json:
        return _run_one_shot(args)
    from gputop.ui import ensure_terminal, run_dashboard  # Textual only for the dashboard

    ensure_terminal()  # before the driver or the demo's processes are opened
    return run_dashboard(args, signals=signals)


def _run_one_shot(args: argparse.Namespace) -> int:
    """--once or --json: one snapshot, printed; exit 3 when some GPU did not answer in time."""
    from gputop.engine.deadline import read_within, timeout_message
    from gputop.engine.enrich import enrich
    from gputop.engine.holders import scan_holders
    from gputop.sources import source_from_args, timeout_of

    source = source_from_args(args, counters=bool(args.json))  # only --json shows them
    try:
        # Enrich before close(): closing the demo ends its real processes. close() never waits
        # for a driver process stuck in a call: it is killed.
        snapshot = read_within(source, timeout_of(args))
        snapshot = enrich(snapshot, holders=scan_holders(source.dev_dir))
    finally:
        source.close()
    with reader_may_leave(sys.stdout):  # `--json | head -1`: exit 3 after a timeout all the same
        _print_one_shot(args, snapshot)
    if snapshot.hidden_pids_note:
        sys.stdout.flush()
        say(f"note: {snapshot.hidden_pids_note}")
    return _timeout_exit(timeout_message(snapshot))


def _print_one_shot(args: argparse.Namespace, snapshot: Snapshot) -> None:
    if args.json:
        from gputop.commands.json_out import for_stream, render_json

        sys.stdout.write(for_stream(render_json(snapshot), sys.stdout) + "\n")
    else:
        from gputop.commands.once import OnceOptions, render_once

        options = OnceOptions(
            show_cmd=args.show_cmd,
            show_pid=args.show_pid,
            show_user=args.show_user,
            show_fan=args.show_fan,
            show_power=args.show_power,
            color=wants_color(args),
            # Piped output is not cut to a guessed width; a terminal (or COLUMNS) is.
            width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 10_000,
        )
        sys.stdout.write(render_once(snapshot, options))


def _timeout_exit(message: str | None) -> int:
    """0, or: what did not answer in one line on stderr (after the output), and exit 3."""
    if message is None:
        return 0
    sys.stdout.flush()  # the partial output first, then the line that explains it
    say(message)
    return DriverTimeout.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gputop` command; returns the exit code.

    Whatever happens, one line on stderr and an exit code, never a traceback: 2 for bad input, 1
    for an I/O error, 128+N after signal N (SIGTERM 143, SIGHUP 129, SIGINT 130).
    """
    args = parse_args(argv)
    signals = ExitSignals()
    with signals.installed():
        code = _run_reporting(args, signals)
        if signals.received is not None:
            code = 128 + signals.received
    return code


def _run_reporting(args: argparse.Namespace, signals: ExitSignals) -> int:
    """_run(), its output flushed, every error it can end with turned into one line."""
    try:
        code = _run(args, signals)
        sys.stdout.flush()  # a full disk shows here, not as "Exception ignored" at exit
        return code
    except GputopError as exc:
        say(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `gputop --once | head` closing the pipe early is not an error worth a word.
        silence(sys.stdout)
        return 0
    except OSError as exc:
        silence_if_broken(sys.stdout)
        say(describe_os_error(exc))
        # EIO is what a closed terminal answers: the same end as its SIGHUP.
        return 128 + signal.SIGHUP if exc.errno == errno.EIO else 1
    except UnicodeEncodeError as exc:
        silence_if_broken(sys.stdout)
        bad = exc.object[exc.start : exc.end]
        say(
            f"cannot write {bad!r} in this terminal's encoding ({exc.encoding}); "
            "use a UTF-8 locale or PYTHONIOENCODING=utf-8"
        )
        return 1
    except OverflowError as exc:
        say(f"number too large: {exc}")
        return 1
