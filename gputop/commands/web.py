"""`gputop web`: the dashboard in a browser, served by textual-serve (the ``web`` extra).

Safe by default: it listens on 127.0.0.1 (another address needs --allow-remote), every request
needs the printed token (or the one in --token-file), and the dashboard it serves is read-only
(no signal can be sent) unless --allow-kill; even then signals are sent by the dashboard's
process, as the user who started `gputop web`, with the terminal's checks. A port already taken,
an address that is not local without --allow-remote, or textual-serve missing: one line, exit 2.
"""

from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import socket
from collections.abc import Sequence

from gputop.argtypes import INTERVAL_BOUNDS_HELP, interval_seconds
from gputop.errors import UsageError

DEFAULT_LISTEN = "127.0.0.1:8080"
# Not "pip install gputop[web]": the "gputop" on PyPI is another project (this one is gputop-nv).
MISSING_SERVE = (
    "gputop web needs textual-serve: pip install textual-serve"
    " (pipx: pipx inject gputop-nv textual-serve)"
)


def add_web_arguments(parser: argparse.ArgumentParser, *, token_option: str) -> None:
    """Where to listen and the token: the options `gputop web` and `gputop fleet --web` share."""
    group = parser.add_argument_group("web")
    group.add_argument(
        "--listen",
        metavar="[ADDRESS:]PORT",
        default=DEFAULT_LISTEN,
        help=f"where to serve (default {DEFAULT_LISTEN}; port 0: any free one)",
    )
    group.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow an --listen address other hosts can reach (the token still guards it)",
    )
    group.add_argument(
        token_option,
        dest="web_token_file",
        metavar="FILE",
        default=None,
        help="the token, kept in FILE (mode 0600; created with a new token if missing); "
        "without it, a new token every start",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `gputop web`."""
    add_web_arguments(parser, token_option="--token-file")
    dashboard = parser.add_argument_group("the dashboard served")
    dashboard.add_argument(
        "--allow-kill",
        action="store_true",
        help="let the browser send signals (as the user running gputop); read-only without it",
    )
    dashboard.add_argument(
        "--interval",
        dest="web_interval",
        type=interval_seconds,
        default=1.0,
        metavar="SEC",
        help=f"sampling interval in seconds, {INTERVAL_BOUNDS_HELP} (default 1)",
    )
    dashboard.add_argument(
        "--theme",
        dest="web_theme",
        metavar="NAME",
        default=None,
        help="a Textual theme name, e.g. nord (default: Textual's)",
    )
    dashboard.add_argument(
        "--audit-log",
        dest="web_audit_log",
        metavar="FILE",
        default=None,
        help="with --allow-kill: append every signal sent to FILE",
    )


def dashboard_argv(args: argparse.Namespace) -> list[str]:
    """The gputop command line each browser session runs (without "gputop")."""
    argv: list[str] = []
    demo, scenario = getattr(args, "demo", None), getattr(args, "scenario", None)
    if demo is not None:
        argv.append(f"--demo={demo}")
    if scenario is not None:
        argv += ["--scenario", os.path.abspath(scenario)]
    argv += ["--interval", repr(args.web_interval)]
    if args.web_theme is not None:
        argv += ["--theme", args.web_theme]
    if not args.allow_kill:
        if args.web_audit_log is not None:
            raise UsageError("--audit-log: only with --allow-kill (read-only sends no signal)")
        argv.append("--readonly")
    elif args.web_audit_log is not None:
        argv += ["--audit-log", os.path.abspath(args.web_audit_log)]
    return argv


def run(args: argparse.Namespace) -> int:
    """Serve the dashboard until stopped (exit 0 on SIGTERM)."""
    what = "the dashboard" if args.allow_kill else "the dashboard (read-only)"
    return serve(args, dashboard_argv(args), title="gputop", what=what)


def serve(args: argparse.Namespace, argv: Sequence[str], *, title: str, what: str) -> int:
    """Check the options, listen, print the URL (with the token) and serve ``argv`` to every
    browser that has the token. UsageError (exit 2) before anything listens when textual-serve
    is missing, the address is not local without --allow-remote, or the port is taken."""
    if importlib.util.find_spec("textual_serve") is None:
        raise UsageError(MISSING_SERVE)
    from gputop.commands.export import parse_listen
    from gputop.ui.web.token import new_token, token_from_file

    listen = parse_listen(args.listen)
    if not listen.loopback and not args.allow_remote:
        raise UsageError(
            f"--listen {listen}: other hosts could reach it; give --allow-remote to mean it "
            "(or reach 127.0.0.1 through an SSH port forward)"
        )
    token = new_token() if args.web_token_file is None else token_from_file(args.web_token_file)
    sock = bind(listen.host, listen.port)
    try:
        from gputop.ui.web.server import WebServer

        port = int(sock.getsockname()[1])
        server = WebServer(argv, token=token, port=port, title=title)
        shown = f"[{listen.host}]" if ":" in listen.host else listen.host
        if not listen.loopback:
            shown = socket.gethostname() if listen.host in ("0.0.0.0", "::") else shown
        url = f"http://{shown}:{port}/?token={token}"

        def announce() -> None:
            print(f"gputop web: {what} on {url}", flush=True)

        return server.serve(sock, announce)
    finally:
        sock.close()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port; UsageError (one line) when it cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            why = "the port is taken (another server listens there; pick one with --listen)"
        elif exc.errno == errno.EACCES:
            why = "permission denied (ports below 1024 need root)"
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = "no such address on this host"
        else:
            why = exc.strerror or str(exc)
        raise UsageError(f"--listen {where}: {why}") from None
