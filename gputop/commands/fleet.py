"""`gputop fleet`: every host and GPU a Prometheus server knows (gputop exporters and
dcgm-exporter alike), as a table (``--once``) or JSON (``--json``).

Reads Prometheus only (no driver). --once and --json exit 0 when all is well; 4 when some host
has stuck processes, unattributed GPU memory or Xid errors; 5 when the fleet cannot see all it
should: a host down or stale, a GPU lost or not responding, a driver gputop cannot read, a host
without GPU series; 6 for both (the fleet printed, then one line on stderr saying which
hosts); 2 for bad input (a bad URL, a token file that cannot be read); 1 when Prometheus cannot
be asked (refused, timed out, TLS, HTTP 401/403, not Prometheus, too large, nested too deeply),
with one line on stderr. Series an exporter got wrong (a gpu label that is no index, a reading
out of physical range) are left out and counted in one note line on stderr; they never change
the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from gputop.argtypes import (
    INTERVAL_BOUNDS_HELP,
    TIMEOUT_BOUNDS_HELP,
    interval_seconds,
    timeout_seconds,
)
from gputop.errors import UsageError
from gputop.fleet.client import DEFAULT_TIMEOUT_S, ENV_URL, client_from

if TYPE_CHECKING:
    from gputop.fleet.model import Fleet

DEFAULT_INTERVAL_S = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `gputop fleet`."""
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        default=None,
        help=f"the Prometheus server, e.g. http://prometheus:9090 (default: ${ENV_URL}). "
        "Credentials: $GPUTOP_PROMETHEUS_TOKEN or --token-file (bearer), or "
        "$GPUTOP_PROMETHEUS_USER and $GPUTOP_PROMETHEUS_PASSWORD (basic auth)",
    )
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        default=None,
        help="read a bearer token from FILE (never give a token on the command line)",
    )
    parser.add_argument(
        "--timeout",
        dest="fleet_timeout",
        type=timeout_seconds,
        default=DEFAULT_TIMEOUT_S,
        metavar="SEC",
        help=f"how long all the queries may take together, {TIMEOUT_BOUNDS_HELP} "
        f"(default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "-1",
        "--once",
        action="store_true",
        help="print one line per host and the stuck report, then exit (exit status below)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the fleet as JSON, then exit (the same exit status)",
    )
    parser.add_argument(
        "--interval",
        dest="fleet_interval",
        type=interval_seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="SEC",
        help=f"the overview: seconds between reads, {INTERVAL_BOUNDS_HELP} "
        f"(default {DEFAULT_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--theme", default=None, help="the overview: a Textual theme name (default: Textual's)"
    )
    parser.add_argument(
        "--web",
        action="store_true",
        help="serve the overview to a browser, as `gputop web` serves the dashboard",
    )
    from gputop.commands.web import add_web_arguments

    # --token-file is Prometheus's bearer token here: the web's is --web-token-file.
    add_web_arguments(parser, token_option="--web-token-file")


def run(args: argparse.Namespace) -> int:
    """Print the fleet once (--once, --json; 0 when Prometheus answered), else the overview."""
    from gputop.fleet.model import read_fleet

    if getattr(args, "demo", None) or getattr(args, "scenario", None):
        raise UsageError(
            "fleet reads Prometheus, not a driver: run `gputop export --demo` and let "
            "Prometheus scrape it instead of --demo here"
        )
    client = client_from(args.prometheus, token_file=args.token_file, timeout_s=args.fleet_timeout)
    if args.web:
        if args.once or args.json:
            raise UsageError("--web serves the overview: not with --once or --json")
        from gputop.commands.web import serve

        return serve(args, overview_argv(args), title="gputop fleet", what="the fleet overview")
    if not (args.once or args.json):
        from gputop.ui.fleet import run_fleet_dashboard  # Textual only for the overview

        if getattr(args, "no_color", False):
            os.environ["NO_COLOR"] = "1"
        return run_fleet_dashboard(client, interval_s=args.fleet_interval, theme=args.theme)
    fleet = read_fleet(client)
    from gputop.exits import reader_may_leave

    with reader_may_leave(sys.stdout):  # `fleet --once | head -1` keeps its verdict (exit 4..6)
        _print(fleet, as_json=args.json)
    return _exit(fleet)


def overview_argv(args: argparse.Namespace) -> list[str]:
    """The command line each browser session of `fleet --web` runs (without "gputop"); the
    credentials from the environment reach it as they are (its environment is ours)."""
    argv = ["fleet"]
    if args.prometheus is not None:
        argv += ["--prometheus", args.prometheus]
    if args.token_file is not None:
        argv += ["--token-file", os.path.abspath(args.token_file)]
    argv += ["--timeout", repr(args.fleet_timeout), "--interval", repr(args.fleet_interval)]
    if args.theme is not None:
        argv += ["--theme", args.theme]
    return argv


def _print(fleet: Fleet, *, as_json: bool) -> None:
    from gputop.fleet import text

    if as_json:
        sys.stdout.write(text.render_json(fleet) + "\n")  # ASCII: json.dumps escapes the rest
        return
    from gputop.glyphs import for_stream

    degree = for_stream(sys.stdout).degree
    sys.stdout.write(text.render_table(fleet, degree))
    if fleet.hosts:
        sys.stdout.write("\n" + text.render_stuck_report(fleet))
        sys.stdout.write("\n" + text.render_health_report(fleet))


def _exit(fleet: Fleet) -> int:
    """The fleet's exit code; on stderr after the output, the series skipped as unbelievable (a
    note, one line) and, when the code is not 0, why (one line)."""
    note, problems = fleet.skipped_note(), fleet.problems()
    if note is not None or problems is not None:
        from gputop.exits import say

        sys.stdout.flush()
        if note is not None:
            say(f"fleet: {note}")
        if problems is not None:
            say(f"fleet: {problems} (exit {fleet.exit_code()})")
    return fleet.exit_code()
