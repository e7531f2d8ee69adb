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
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from gputop.argtypes import (
    INTERVAL_BOUNDS_HELP,
    add_timeout_argument,
    interval_seconds,
    table_refresh_seconds,
)
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.sanitize import clean
from gputop.errors import DriverTimeout, GputopError
from gputop.exits import (
    EXIT_FAILURE,
    EXIT_FLEET_BLIND,
    EXIT_FLEET_STUCK,
    EXIT_FLEET_STUCK_AND_BLIND,
    EXIT_OK,
    EXIT_STUCK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    ExitSignals,
    describe_os_error,
    reader_may_leave,
    say,
    signal_exit,
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
    "web": ("gputop.commands.web", "the dashboard in a browser (needs textual-serve)"),
}


# Commands that read no driver: they refuse --demo/--scenario (one line, exit 2), which their
# --help therefore does not list.
NO_DRIVER = frozenset({"fleet"})


@dataclass(frozen=True, slots=True)
class HelpExtras:
    """What a command's --help shows after its options (also rendered into the man page).

    ``about``: paragraphs after the one-line description (one holding a newline is laid out
    already: its lines indented by two are commands); ``examples``: (command line, what it does);
    ``exit_codes``: (status, meaning), ascending.
    """

    about: tuple[str, ...]
    examples: tuple[tuple[str, str], ...]
    exit_codes: tuple[tuple[int, str], ...]


_INT = signal_exit(signal.SIGINT)
_HUP = signal_exit(signal.SIGHUP)
_TERM = signal_exit(signal.SIGTERM)
_BAD_INPUT = (
    "bad input (an option, a scenario file), or a driver that cannot be used (none installed, "
    "version mismatch, no permission)"
)
_SIGNALS = (
    (_HUP, "ended by SIGHUP (the terminal closed)"),
    (_INT, "ended by Ctrl-C (SIGINT)"),
    (_TERM, "ended by SIGTERM"),
)
_WRITE = "the output could not be written (a full disk, say)"

# Key: the command's name ("" for gputop itself). Every code here is one the command returns:
# tests/test_help.py makes each command return each code the simulator can produce.
HELP_EXTRAS: dict[str, HelpExtras] = {
    "": HelpExtras(
        about=(
            "Without a COMMAND: the dashboard, or with --once/--json one view of every GPU. "
            "Where no NVIDIA library is installed, the dashboard shows the simulated demo box; "
            "--once and --json say so and exit 2. Each COMMAND has its own --help.",
        ),
        examples=(
            ("gputop", "the dashboard"),
            ("gputop --demo=dgx", "the dashboard on a simulated 8-GPU box"),
            ("gputop --once -pu", "one compact view with PIDs and users, then exit"),
            ("gputop --json > snapshot.json", "the whole snapshot as JSON"),
            (
                "gputop --once --timeout 20",
                "wait up to 20 s for a slow driver; a GPU still silent then: exit 3",
            ),
        ),
        exit_codes=(
            (EXIT_OK, "the dashboard quit; --once/--json printed every GPU"),
            (EXIT_FAILURE, f"{_WRITE}, or the dashboard crashed"),
            (EXIT_USAGE, _BAD_INPUT),
            (
                EXIT_TIMEOUT,
                "--once/--json: a GPU did not answer within --timeout (shown NOT RESPONDING) "
                "or the driver crashed; the others are printed",
            ),
            *_SIGNALS,
        ),
    ),
    "doctor": HelpExtras(
        about=(
            "Lists the processes that hold a GPU without working (holder, defunct, orphan, "
            "stopped) and GPU memory no listed process accounts for, each with the command "
            "that would clean it up.",
        ),
        examples=(
            ("gputop doctor", "diagnose this box"),
            ("gputop doctor --demo=faults", "a simulated box with stuck processes: exit 1"),
            (
                "gputop doctor --timeout 20 > /dev/null || echo attention",
                "in a script: the exit status alone",
            ),
        ),
        exit_codes=(
            (EXIT_OK, "nothing is stuck and no GPU needs more than a kill"),
            (
                EXIT_STUCK,
                "something is stuck or unaccounted for, or a GPU needs a reset, a reboot or "
                f"replacing (gputop --demo=sick); or {_WRITE}",
            ),
            (EXIT_USAGE, _BAD_INPUT),
            (EXIT_TIMEOUT, "a GPU did not answer within --timeout (the others are diagnosed)"),
            *_SIGNALS,
        ),
    ),
    "query": HelpExtras(
        about=(
            "The field names, headers and values of nvidia-smi --query-gpu and "
            "--query-compute-apps, so scripts written for nvidia-smi keep working.",
        ),
        examples=(
            (
                "gputop query --query-gpu=index,name,utilization.gpu,memory.used --format=csv",
                "one CSV row per GPU",
            ),
            (
                "gputop query --query-gpu=timestamp,index,power.draw -l 5 -f log.csv",
                "log every 5 s to log.csv until Ctrl-C",
            ),
            (
                "gputop query --query-compute-apps=pid,process_name,used_memory --format=json",
                "one JSON object per GPU process",
            ),
            ("gputop query --help-query-gpu", "every --query-gpu field"),
        ),
        exit_codes=(
            (EXIT_OK, "every row printed"),
            (EXIT_FAILURE, _WRITE),
            (EXIT_USAGE, f"{_BAD_INPUT}; an unknown field; -f FILE cannot be written"),
            (
                EXIT_TIMEOUT,
                "a run that ends by itself (no -l, or --count) printed a GPU that did not "
                "answer within --timeout ([Unknown Error])",
            ),
            *_SIGNALS,
        ),
    ),
    "dmon": HelpExtras(
        about=("The columns and units of nvidia-smi dmon, one row per GPU per interval.",),
        examples=(
            ("gputop dmon", "power, temperature, utilisation and clocks every second"),
            (
                "gputop dmon -s pum -d 5 -o T",
                "power, utilisation and memory every 5 s, with a time column",
            ),
            ("gputop dmon --demo -c 3", "three rows per simulated GPU, then exit"),
        ),
        exit_codes=(
            (EXIT_OK, "-c N samples printed"),
            (EXIT_FAILURE, _WRITE),
            (EXIT_USAGE, f"{_BAD_INPUT}; an unknown metric group"),
            (EXIT_TIMEOUT, "with -c: a row showed a GPU that did not answer within --timeout"),
            *_SIGNALS,
        ),
    ),
    "export": HelpExtras(
        about=(
            "Needs prometheus-client (the 'export' extra). Add it with the tool that installed\n"
            "gputop (the distribution is gputop-nv):\n"
            "  pipx inject gputop-nv prometheus-client\n"
            "  uv tool install '.[export]'\n"
            "  pip install '.[export]'\n"
            "(the last two from a clone), or in gputop's own environment:\n"
            "  pip install prometheus-client",
            "Serves /metrics (the DCGM_FI_* names of dcgm-exporter plus gputop_* series) "
            "and/or writes a textfile for node_exporter. A driver that cannot be used at start "
            "ends it (exit 2) before anything listens.",
        ),
        examples=(
            ("gputop export", "serve http://127.0.0.1:9400/metrics"),
            ("gputop export --listen 0.0.0.0:9400", "let other hosts (Prometheus) scrape it"),
            (
                "gputop export --textfile /var/lib/node_exporter/textfile_collector",
                "write gputop.prom there too",
            ),
            ("gputop export --demo --listen 127.0.0.1:9401", "the simulated demo box's metrics"),
            (
                "gputop export --hostname-label Hostname",
                "the host label of dcgm-exporter before 4.6.0-4.8.3",
            ),
            ("gputop export --field-names both", "DCGM 4.7's names and units as well"),
            (
                "gputop export --listen 0.0.0.0:9400 --web-config-file web.yml",
                "TLS and/or basic auth (exporter-toolkit format)",
            ),
        ),
        exit_codes=(
            (EXIT_OK, "stopped by SIGTERM (systemctl stop, docker stop)"),
            (
                EXIT_USAGE,
                f"{_BAD_INPUT}; prometheus-client missing; the port is taken",
            ),
            (_HUP, "ended by SIGHUP"),
            (_INT, "ended by Ctrl-C (SIGINT)"),
        ),
    ),
    "fleet": HelpExtras(
        about=(
            "Reads a Prometheus server that scrapes gputop exporters or dcgm-exporter; no "
            "driver, hence no --demo (run `gputop export --demo` for Prometheus to scrape). "
            "Without --once or --json: the overview, refreshed every --interval.",
        ),
        examples=(
            ("gputop fleet --prometheus http://prometheus:9090", "the overview"),
            (
                "GPUTOP_PROMETHEUS=http://prometheus:9090 gputop fleet --once",
                "one line per host and the stuck report",
            ),
            (
                "gputop fleet --json --timeout 30",
                "the fleet as JSON, for scripts (the server from $GPUTOP_PROMETHEUS)",
            ),
            (
                "gputop fleet --web --prometheus http://prometheus:9090",
                "the overview in a browser, served as gputop web serves the dashboard",
            ),
        ),
        exit_codes=(
            (EXIT_OK, "--once/--json: all is well (the overview: it quit)"),
            (EXIT_FAILURE, "Prometheus could not be asked (refused, timed out, TLS, 401/403...)"),
            (
                EXIT_USAGE,
                "bad input (a bad URL, an unreadable --token-file, --demo); --web: the port is "
                "taken, an address other hosts reach without --allow-remote, no textual-serve",
            ),
            (
                EXIT_FLEET_STUCK,
                "stuck processes, unattributed GPU memory, Xid errors or a GPU that needs a "
                "reset, a reboot or replacing on a host",
            ),
            (
                EXIT_FLEET_BLIND,
                "some host down or stale, a GPU lost or not responding, a driver gputop cannot "
                "read, or a host without GPU series (legacy or DCGM 4.7 names)",
            ),
            (EXIT_FLEET_STUCK_AND_BLIND, "both"),
            *_SIGNALS,
        ),
    ),
    "web": HelpExtras(
        about=(
            "Needs textual-serve (the 'web' extra): pip install textual-serve, or pipx inject "
            "gputop-nv textual-serve.",
            "Serves the dashboard (the same keys, screens and theme) to a browser: each "
            "browser tab runs a dashboard of its own. Listens on 127.0.0.1 only unless "
            "--allow-remote; every request needs the token in the printed URL (then a "
            "cookie); read-only unless --allow-kill, and even then signals are sent as the "
            "user running gputop. From another machine: ssh -L 8080:127.0.0.1:8080 BOX, then "
            "open the printed URL there.",
        ),
        examples=(
            ("gputop web", "serve http://127.0.0.1:8080/?token=..., read-only"),
            ("gputop web --demo --listen 8081", "the simulated demo box, on port 8081"),
            (
                "gputop web --token-file ~/.config/gputop/web-token",
                "the same token every start (the file is created, 0600, with a new one)",
            ),
            ("gputop web --allow-kill --audit-log kills.log", "the browser may send signals"),
            (
                "gputop web --listen 0.0.0.0:8080 --allow-remote",
                "reachable from other hosts (no TLS: prefer an SSH port forward)",
            ),
        ),
        exit_codes=(
            (EXIT_OK, "stopped by SIGTERM (systemctl stop)"),
            (
                EXIT_USAGE,
                "bad input (an option; a --token-file that is not a private file of yours "
                "holding a token); textual-serve missing; the port is taken; an address other "
                "hosts reach without --allow-remote",
            ),
            (_HUP, "ended by SIGHUP"),
            (_INT, "ended by Ctrl-C (SIGINT)"),
        ),
    ),
}

_WIDTH = 79  # the epilog's fixed layout: the same text whatever the terminal


def _description(name: str, one_line: str) -> str:
    """The one-line description, then the command's paragraphs, wrapped to a fixed width."""
    paragraphs = (one_line, *HELP_EXTRAS[name].about)
    return "\n\n".join(p if "\n" in p else textwrap.fill(p, _WIDTH) for p in paragraphs)


def epilog(name: str) -> str:
    """The examples and exit status sections of a command's --help, from HELP_EXTRAS."""
    extras = HELP_EXTRAS[name]
    lines = ["examples:"]
    for command, what in extras.examples:
        lines.append(f"  {command}")
        lines.extend(textwrap.wrap(what, _WIDTH, initial_indent=" " * 6, subsequent_indent=" " * 6))
    lines += ["", "exit status:"]
    for code, meaning in extras.exit_codes:
        lines.extend(
            textwrap.wrap(meaning, _WIDTH, initial_indent=f"  {code:<5}", subsequent_indent=" " * 7)
        )
    return "\n".join(lines)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Option help wrapped to the terminal; description and epilog as laid out above."""


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
        description=_description("", "A terminal dashboard for NVIDIA GPUs."),
        epilog=epilog(""),
        formatter_class=_Formatter,
    )
    parser.add_argument("-V", "--version", action="version", version=f"gputop {__version__}")
    _add_main_options(parser)
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        if commands is not None and name not in commands:
            if importlib.util.find_spec(module_name) is not None:
                _add_command(subs, name, help_text)
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        sub = _add_command(subs, name, help_text)
        add_source_arguments(sub)
        if name in NO_DRIVER:
            _hide_source_arguments(sub)
        module.add_arguments(sub)
    return parser


def _add_command(
    subs: argparse._SubParsersAction[_Parser], name: str, help_text: str
) -> argparse.ArgumentParser:
    """The command's parser: its line in gputop's list, its description, examples and exit codes."""
    return subs.add_parser(
        name,
        help=help_text,
        description=_description(name, help_text),
        epilog=epilog(name),
        formatter_class=_Formatter,
    )


def _hide_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Leave --demo/--scenario out of a command's --help: still parsed, so that the command
    itself refuses them with a line that says why."""
    for action in parser._actions:
        if action.dest in ("demo", "scenario"):
            action.help = argparse.SUPPRESS


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
    ui.add_argument(
        "--table-refresh",
        type=table_refresh_seconds,
        default=None,
        metavar="SEC",
        help="draw the process table's numbers at most every SEC seconds (default 2; 0: every "
        "sample); a process that comes or goes, a changed state and your keys show at once",
    )
    ui.add_argument(
        "--theme",
        default=None,
        help="a Textual theme name, e.g. nord, gruvbox (default: Textual's)",
    )
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
    # The dashboard never speaks TLS, yet asyncio (Textual's loop) imports ssl if it can: 4 MiB of
    # RSS (libssl, libcrypto) for as long as the dashboard runs, which is days on some boxes.
    # Only here, for the plain dashboard command: fleet, web and export may need TLS, and a
    # process that has loaded asyncio already (a test calling main) keeps what it has.
    if "asyncio" not in sys.modules:
        sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]  # `import ssl` fails
    from gputop.ui import ensure_terminal, run_dashboard  # Textual only for the dashboard

    ensure_terminal()  # before the driver or the demo's processes are opened
    return run_dashboard(args, signals=signals)


def _run_one_shot(args: argparse.Namespace) -> int:
    """--once or --json: one snapshot, printed; exit 3 when some GPU did not answer in time."""
    from gputop.engine.deadline import read_within, timeout_message
    from gputop.engine.enrich import enrich
    from gputop.engine.holders import scan_holders
    from gputop.engine.verdicts import confirm_blocked
    from gputop.sources import source_from_args, timeout_of

    source = source_from_args(args, counters=bool(args.json))  # only --json shows them
    try:
        # Enrich before close(): closing the demo ends its real processes. close() never waits
        # for a driver process stuck in a call: it is killed.
        read = read_within(source, timeout_of(args))
        holders = scan_holders(source.dev_dir)
        # A process in state D is called unkillable only if it is still there a moment later.
        snapshot = confirm_blocked(lambda: enrich(read, holders=holders))
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
        return EXIT_OK
    sys.stdout.flush()  # the partial output first, then the line that explains it
    say(message)
    return DriverTimeout.exit_code  # = EXIT_TIMEOUT


def web_session() -> int:
    """One browser session of `gputop web` or `gputop fleet --web`, as textual-serve runs it
    (with Textual's web driver): the command line it serves comes from the environment, as JSON
    (gputop.ui.web.ARGV_ENV), so none of it ever passes through the shell that starts it."""
    import json

    from gputop.ui.web import ARGV_ENV

    try:
        argv = json.loads(os.environ.pop(ARGV_ENV, ""))
    except ValueError:
        argv = None
    if not isinstance(argv, list) or not all(isinstance(arg, str) for arg in argv):
        say(f"{ARGV_ENV} is not a JSON list of arguments (gputop web sets it for its sessions)")
        return EXIT_USAGE
    return main(argv)


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
            code = signal_exit(signals.received)
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
        return signal_exit(signal.SIGINT)
    except BrokenPipeError:
        # `gputop --once | head` closing the pipe early is not an error worth a word.
        silence(sys.stdout)
        return EXIT_OK
    except OSError as exc:
        silence_if_broken(sys.stdout)
        say(describe_os_error(exc))
        # EIO is what a closed terminal answers: the same end as its SIGHUP.
        return signal_exit(signal.SIGHUP) if exc.errno == errno.EIO else EXIT_FAILURE
    except UnicodeEncodeError as exc:
        silence_if_broken(sys.stdout)
        bad = exc.object[exc.start : exc.end]
        say(
            f"cannot write {bad!r} in this terminal's encoding ({exc.encoding}); "
            "use a UTF-8 locale or PYTHONIOENCODING=utf-8"
        )
        return EXIT_FAILURE
    except OverflowError as exc:
        say(f"number too large: {exc}")
        return EXIT_FAILURE
