"""`gputop export`: a Prometheus exporter (dcgm-exporter compatible names) and textfile writer.

One Sampler reads the driver every ``--interval`` seconds; HTTP scrapes and textfile writes only
render its last snapshot, so a burst of scrapes costs no driver calls and a hung driver shows up
as a growing ``gputop_sample_age_seconds`` instead of a hung scrape. A driver that cannot be
used at start (no library, version mismatch, module not loaded, no permission) ends it with the
driver's own line and exit 2 before anything listens; one that goes away later is
``gputop_driver_up 0`` (gputop.export.feed). prometheus-client is an optional dependency
(the ``export`` extra of the ``gputop-nv`` distribution), imported only here, after a check.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import ipaddress
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

from gputop.errors import UsageError
from gputop.exits import EXIT_OK, EXIT_SIGNALS, handling, signal_exit

if TYPE_CHECKING:
    from gputop.engine.sampler import Sampler
    from gputop.engine.source import Source
    from gputop.export.feed import SampleFeed
    from gputop.export.http import MetricsServer
    from gputop.export.prom import SnapshotCollector, TextfileWriter
    from gputop.export.web_config import WebConfig

DEFAULT_LISTEN = "127.0.0.1:9400"
DEFAULT_INTERVAL_S = 5.0
# At start, how long the driver may take to open before the exporter starts without it (and
# says so); a driver that fails to open within it ends the exporter (exit 2). As the one-shots'
# default --timeout.
OPEN_WAIT_S = 5.0
# Not "pip install gputop[export]": the "gputop" on PyPI is another project (this one is
# gputop-nv); prometheus-client alone is what is missing.
MISSING_CLIENT = (
    "the exporter needs prometheus-client: pip install prometheus-client"
    " (pipx: pipx inject gputop-nv prometheus-client)"
)
HOST_LABEL_CHOICES = ("hostname", "Hostname")  # = gputop.dcgm.HOST_LABELS, unimported
FIELD_NAMES_CHOICES = ("legacy", "dcgm4.7", "both")  # = gputop.export.metrics.FieldNames


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenAddress:
    """Where to serve /metrics: a numeric host, a port, and whether only this host can reach it."""

    host: str
    port: int
    loopback: bool

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def _split_listen(text: str) -> tuple[str, str]:
    """("host", "port") from HOST:PORT, [V6]:PORT, :PORT (all interfaces) or PORT (loopback)."""
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
        if not sep:
            raise UsageError(f"--listen: expected [ADDRESS]:PORT, got {text!r}")
        return host, port
    if ":" not in text:
        return "127.0.0.1", text
    host, _, port = text.rpartition(":")
    if ":" in host:
        raise UsageError(f"--listen: write IPv6 addresses in brackets, e.g. [::1]:9400: {text!r}")
    return host or "0.0.0.0", port


def parse_listen(text: str) -> ListenAddress:
    """Parse and resolve --listen; raises UsageError with one readable line."""
    host, port_text = _split_listen(text.strip())
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise UsageError(f"--listen: port must be a number from 0 to 65535, got {text!r}")
    port = int(port_text)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise UsageError(f"--listen: cannot resolve host {host!r}") from None
    address = str(infos[0][4][0])
    return ListenAddress(
        host=address, port=port, loopback=ipaddress.ip_address(address).is_loopback
    )


def exposure_note(listen: ListenAddress) -> str | None:
    """The line printed at start when /metrics is reachable from other hosts, else None."""
    if listen.loopback:
        return None
    return f"gputop: listening on {listen} — reachable from other hosts"


def require_prometheus_client() -> ModuleType:
    """The prometheus_client module, or UsageError with the install hint."""
    try:
        return importlib.import_module("prometheus_client")
    except ImportError:
        raise UsageError(MISSING_CLIENT) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `gputop export` (the shared --demo/--scenario are added by the CLI)."""
    from gputop.argtypes import INTERVAL_BOUNDS_HELP, interval_seconds

    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        default=None,
        help=f"serve /metrics here, PORT 0 to 65535 (default {DEFAULT_LISTEN}; only --textfile: "
        "no HTTP). Use 0.0.0.0:9400 or [::]:9400 to let other hosts scrape",
    )
    parser.add_argument(
        "--web-config-file",
        metavar="FILE",
        default=None,
        help="serve /metrics over TLS and/or with basic auth as this YAML file says (the "
        "Prometheus exporter-toolkit format: tls_server_config, basic_auth_users with bcrypt "
        "hashes, http_server_config.headers); needs PyYAML and bcrypt",
    )
    parser.add_argument(
        "--interval",
        type=interval_seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="SEC",
        help=f"seconds between driver reads, {INTERVAL_BOUNDS_HELP} "
        f"(default {DEFAULT_INTERVAL_S:g})",
    )
    parser.add_argument(
        "--hostname-label",
        choices=HOST_LABEL_CHOICES,
        default=HOST_LABEL_CHOICES[0],
        help="the name of the host's label on the DCGM_FI_* series: hostname, as dcgm-exporter "
        "4.6.0-4.8.3 and later (the default), or Hostname, as the releases before it (for "
        "dashboards built on those)",
    )
    parser.add_argument(
        "--field-names",
        choices=FIELD_NAMES_CHOICES,
        default=FIELD_NAMES_CHOICES[0],
        help="the DCGM_FI_* names: legacy (the default: DCGM_FI_DEV_GPU_UTIL in %%, as "
        "dcgm-exporter up to 4.8), dcgm4.7 (DCGM 4.7's names and units where one is known, "
        "e.g. DCGM_FI_DEV_GPU_UTIL_RATIO 0 to 1, DCGM_FI_DEV_SM_CLOCK_HERTZ; the legacy name "
        "elsewhere) or both",
    )
    parser.add_argument(
        "--textfile",
        metavar="DIR",
        default=None,
        help="also write DIR/gputop.prom every interval for node_exporter's textfile collector",
    )
    parser.add_argument(
        "--hostname",
        metavar="NAME",
        default=None,
        help="the hostname label on every series (default: this host's name)",
    )


@dataclass(slots=True)
class _Parts:
    """What run() opened, so that everything is closed in reverse order."""

    collector: SnapshotCollector
    listen: ListenAddress | None = None
    server: MetricsServer | None = None
    bound: ListenAddress | None = None
    textfile: TextfileWriter | None = None
    sampler: Sampler | None = None
    web: WebConfig | None = None


def _check_outputs(args: argparse.Namespace) -> _Parts:
    """Parse --listen and check the textfile folder, before the driver (or demo) is opened.

    Nothing is bound yet: an exporter that refuses to start (a driver that cannot be used)
    never listens.
    """
    from gputop.export.prom import SnapshotCollector, TextfileWriter, make_registry

    listen_text = args.listen or (None if args.textfile else DEFAULT_LISTEN)
    from gputop.export.metrics import FieldNames

    collector = SnapshotCollector(
        host_label=getattr(args, "hostname_label", HOST_LABEL_CHOICES[0]),
        field_names=FieldNames(getattr(args, "field_names", FIELD_NAMES_CHOICES[0])),
    )
    parts = _Parts(collector=collector, listen=parse_listen(listen_text) if listen_text else None)
    web_path = getattr(args, "web_config_file", None)
    if web_path is not None:
        from gputop.export.web_config import load_web_config

        if parts.listen is None:
            raise UsageError("--web-config-file: needs --listen (it is for the HTTP server)")
        parts.web = load_web_config(web_path)
    if args.textfile:
        parts.textfile = TextfileWriter(args.textfile, make_registry(collector))
    return parts


def _bind(parts: _Parts) -> None:
    """Listen on --listen (once the driver is known to open); UsageError if the port is taken."""
    from gputop.export.http import MetricsServer
    from gputop.export.prom import make_registry

    listen = parts.listen
    if listen is None:
        return
    parts.server = MetricsServer(
        make_registry(parts.collector), listen.host, listen.port, web=parts.web
    )
    parts.bound = ListenAddress(host=listen.host, port=parts.server.port, loopback=listen.loopback)
    note = exposure_note(parts.bound)
    if note:
        print(note, flush=True)


def _await_driver(source: Source) -> bool:
    """Refuse to start on a driver that cannot be used: raise its own one-line error.

    DriverMissing, DriverError (version mismatch, kernel module not loaded, no permission) and
    UsageError (a bad scenario) end the exporter with that line and exit 2. A driver that is
    only slow to open (a hung nvmlInit) or whose process crashed while opening it is waited for
    ``OPEN_WAIT_S`` at most: then the exporter starts and says so, in one line on stderr and in
    /metrics (gputop_driver_up 0), and the driver process goes on trying, restarted after a
    crash as at any time. Returns whether the driver opened in time.
    """
    from gputop.engine.deadline import not_open_within

    why = not_open_within(source, OPEN_WAIT_S)
    if why is None:
        return True
    print(f"gputop: {why}; starting with gputop_driver_up 0", file=sys.stderr, flush=True)
    return False


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[list[int]]:
    """SIGTERM, SIGHUP and SIGINT set ``stop``: the loop ends and the finally-blocks run.

    Yields the signals received, first first. A handler that only sets an event (rather than
    raising in the middle of whatever runs) lets a stop during start-up finish starting first.
    The previous handlers come back after the block.
    """
    received: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        # Not stop.set() here: the handler may run while this very thread holds the Event's lock
        # (inside stop.wait()), and that lock is not reentrant.
        threading.Thread(target=stop.set, name="gputop-stop").start()

    with handling(EXIT_SIGNALS, handler):
        yield received


def exit_code(received: list[int]) -> int:
    """0 after SIGTERM, 128+N after another signal N (SIGINT 130, SIGHUP 129), 0 without one.

    SIGTERM is how systemd, docker and Kubernetes stop a service: for them exit 0 is a clean stop,
    while 143 would mark the unit failed (unless SuccessExitStatus=143).
    """
    if not received or received[0] == signal.SIGTERM:
        return EXIT_OK
    return signal_exit(received[0])


def _serve(
    parts: _Parts, feed: SampleFeed, sampler: Sampler, stop: threading.Event, *, opened: bool
) -> None:
    """Start sampling, bind after the first sample, then rewrite the textfile until stopped.

    ``opened``: the driver opened at start (else that was said, and is not said again).
    """
    sampler.start()
    if stop.is_set():  # a signal during start-up
        return
    feed.first.wait(max(2.0, sampler.interval_s))  # so that a first scrape has GPU data
    if stop.is_set():
        return
    _bind(parts)
    every = f"every {sampler.interval_s:g} s"
    if parts.textfile is not None:
        parts.textfile.write()  # a folder we cannot write to fails here, at start
        print(f"gputop: writing {parts.textfile.path} {every}", flush=True)
    if parts.bound is not None:
        scheme = parts.server.scheme if parts.server is not None else "http"
        print(f"gputop: serving {scheme}://{parts.bound}/metrics, sampling {every}", flush=True)
    said_up = opened
    while True:
        said_up = _say_driver_health(feed, said_up)
        if stop.wait(sampler.interval_s):
            return
        if parts.textfile is not None:
            try:
                parts.textfile.write()
            except UsageError as exc:  # e.g. disk full: say so, keep serving
                print(f"gputop: {exc}", file=sys.stderr, flush=True)


def _say_driver_health(feed: SampleFeed, said_up: bool) -> bool:
    """One line on stderr when the driver stops (or starts again) being readable; returns what
    was said last. A service's log then says why gputop_driver_up is 0."""
    problem = feed.driver_problem()
    if problem is not None and said_up:
        print(
            f"gputop: the NVIDIA driver cannot be read: {problem} (gputop_driver_up 0)",
            file=sys.stderr,
            flush=True,
        )
    elif problem is None and not said_up:
        print(
            "gputop: the NVIDIA driver answers again (gputop_driver_up 1)",
            file=sys.stderr,
            flush=True,
        )
    return problem is None


def run(args: argparse.Namespace) -> int:
    """Run the exporter until SIGTERM (exit 0), Ctrl-C (130) or SIGHUP (129); see exit_code()."""
    require_prometheus_client()
    stop = threading.Event()
    with _stop_on_signals(stop) as received:
        _run_until(args, stop)
    return exit_code(received)


def _run_until(args: argparse.Namespace, stop: threading.Event) -> None:
    from gputop.engine.sampler import Sampler
    from gputop.export.feed import SampleFeed
    from gputop.sources import SLOW_EVERY_S, source_from_args

    parts = _check_outputs(args)
    source = None
    try:
        # energy, Xid, NVLink... are exported; ECC totals and modes every 10 s, as the panel
        source = source_from_args(args, counters=True, slow_every_s=SLOW_EVERY_S)
        opened = _await_driver(source)
        parts.sampler = Sampler(source, interval_s=args.interval)
        feed = SampleFeed(parts.sampler, hostname=getattr(args, "hostname", None))
        parts.collector.holder = feed
        parts.collector.driver_up = feed.driver_up
        _serve(parts, feed, parts.sampler, stop, opened=opened)
    except KeyboardInterrupt:
        pass  # a KeyboardInterrupt raised by the code itself (handlers are in place)
    finally:
        if parts.sampler is not None:
            parts.sampler.stop()
        if parts.server is not None:
            parts.server.close()
        if source is not None:
            source.close()
