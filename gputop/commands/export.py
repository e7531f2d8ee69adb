"""`gputop export`: a Prometheus exporter (dcgm-exporter compatible names) and textfile writer.

One Sampler reads the driver every ``--interval`` seconds; HTTP scrapes and textfile writes only
render its last snapshot, so a burst of scrapes costs no driver calls and a hung driver shows up
as a growing ``gputop_sample_age_seconds`` instead of a hung scrape. prometheus-client is an
optional dependency (``gputop[export]``), imported only here, after a check.
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
from dataclasses import dataclass, replace
from types import FrameType, ModuleType
from typing import TYPE_CHECKING

from gputop.errors import UsageError
from gputop.exits import EXIT_SIGNALS, handling

if TYPE_CHECKING:
    from gputop.engine.model import Snapshot
    from gputop.engine.sampler import Sampler
    from gputop.export.http import MetricsServer
    from gputop.export.prom import SnapshotCollector, TextfileWriter

DEFAULT_LISTEN = "127.0.0.1:9400"
DEFAULT_INTERVAL_S = 5.0
MISSING_CLIENT = "the exporter needs prometheus-client: pip install 'gputop[export]'"
HOST_LABEL_CHOICES = ("Hostname", "hostname")  # = gputop.export.metrics.HOST_LABELS, unimported


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
        help=f"serve /metrics here (default {DEFAULT_LISTEN}; only --textfile: no HTTP). "
        "Use 0.0.0.0:9400 or [::]:9400 to let other hosts scrape",
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
        help="the name of the host's label on the DCGM_FI_* series: Hostname, as every released "
        "dcgm-exporter (the default), or hostname, as its unreleased main",
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
    server: MetricsServer | None = None
    bound: ListenAddress | None = None
    textfile: TextfileWriter | None = None
    sampler: Sampler | None = None


def _open_outputs(args: argparse.Namespace) -> _Parts:
    """Bind the port and check the textfile folder before the driver (or demo) is opened."""
    from gputop.export.http import MetricsServer
    from gputop.export.prom import SnapshotCollector, TextfileWriter, make_registry

    listen_text = args.listen or (None if args.textfile else DEFAULT_LISTEN)
    listen = parse_listen(listen_text) if listen_text else None
    collector = SnapshotCollector(host_label=getattr(args, "hostname_label", "Hostname"))
    registry = make_registry(collector)
    parts = _Parts(collector=collector)
    if args.textfile:
        parts.textfile = TextfileWriter(args.textfile, registry)
    if listen is not None:
        parts.server = MetricsServer(registry, listen.host, listen.port)
        parts.bound = ListenAddress(
            host=listen.host, port=parts.server.port, loopback=listen.loopback
        )
        note = exposure_note(parts.bound)
        if note:
            print(note, flush=True)
    return parts


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
        return 0
    return 128 + received[0]


def _serve(parts: _Parts, sampler: Sampler, stop: threading.Event) -> None:
    """Wait for the first sample, then rewrite the textfile each interval until stopped."""
    first = threading.Event()
    sampler.on_snapshot = lambda _snapshot: first.set()
    sampler.start()
    if stop.is_set():  # a signal during start-up
        return
    first.wait(max(2.0, sampler.interval_s))
    if stop.is_set():
        return
    every = f"every {sampler.interval_s:g} s"
    if parts.textfile is not None:
        parts.textfile.write()  # a folder we cannot write to fails here, at start
        print(f"gputop: writing {parts.textfile.path} {every}", flush=True)
    if parts.bound is not None:  # after the first sample, so a first scrape has GPU data
        print(f"gputop: serving http://{parts.bound}/metrics, sampling {every}", flush=True)
    while not stop.wait(sampler.interval_s):
        if parts.textfile is not None:
            try:
                parts.textfile.write()
            except UsageError as exc:  # e.g. disk full: say so, keep serving
                print(f"gputop: {exc}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Run the exporter until SIGTERM (exit 0), Ctrl-C (130) or SIGHUP (129); see exit_code()."""
    require_prometheus_client()
    stop = threading.Event()
    with _stop_on_signals(stop) as received:
        _run_until(args, stop)
    return exit_code(received)


class _Renamed:
    """The sampler's snapshots under another hostname (--hostname); errors and restarts too."""

    def __init__(self, sampler: Sampler, hostname: str) -> None:
        self._sampler = sampler
        self._hostname = hostname

    @property
    def latest(self) -> Snapshot | None:
        snapshot = self._sampler.latest
        if snapshot is None:
            return None
        return replace(snapshot, system=replace(snapshot.system, hostname=self._hostname))

    @property
    def errors(self) -> int:
        return self._sampler.errors

    @property
    def restarts(self) -> int:
        return self._sampler.restarts


def _run_until(args: argparse.Namespace, stop: threading.Event) -> None:
    from gputop.engine.sampler import Sampler
    from gputop.engine.source import source_from_args

    parts = _open_outputs(args)
    source = None
    try:
        source = source_from_args(args, counters=True)  # energy, Xid, NVLink... are exported
        parts.sampler = Sampler(source, interval_s=args.interval)
        parts.collector.holder = parts.sampler
        if getattr(args, "hostname", None):
            parts.collector.holder = _Renamed(parts.sampler, args.hostname)
        _serve(parts, parts.sampler, stop)
    except KeyboardInterrupt:
        pass  # a KeyboardInterrupt raised by the code itself (handlers are in place)
    finally:
        if parts.sampler is not None:
            parts.sampler.stop()
        if parts.server is not None:
            parts.server.close()
        if source is not None:
            source.close()
