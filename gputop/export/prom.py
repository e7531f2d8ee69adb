"""prometheus-client glue for `gputop export`: the collector and the textfile writer.

The HTTP server that serves the collector's registry is gputop.export.http; it renders with
:func:`choose_encoder`, which keeps dcgm-exporter's counters under their exact names.

Imports prometheus_client at the top: import this module only after checking that it is installed
(gputop.commands.export does). Scrapes read the sampler's last snapshot and never call the driver.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from itertools import count
from pathlib import Path
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.exposition import choose_encoder as _prometheus_encoder
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.openmetrics.exposition import ALLOWUTF8, UNDERSCORES
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample as PromSample

from gputop.engine.model import Snapshot
from gputop.engine.private_file import UnsafeFile, create_fresh
from gputop.errors import UsageError
from gputop.export.metrics import (
    HOST_LABEL,
    Family,
    FieldNames,
    Kind,
    sample_age_s,
    snapshot_families,
)
from gputop.version import __version__

TEXTFILE_NAME = "gputop.prom"
# node_exporter runs as its own user and must read the file; nothing in it is secret.
TEXTFILE_MODE = 0o644


class SnapshotHolder(Protocol):
    """What the collector reads: the Sampler, or the exporter's feed."""

    @property
    def latest(self) -> Snapshot | None: ...

    @property
    def errors(self) -> int:
        """Readings that failed so far."""
        ...

    @property
    def restarts(self) -> int:
        """Driver-process restarts so far."""
        ...


class ExactCounter(GaugeMetricFamily):
    """A counter served under its exact name, as dcgm-exporter serves its counters.

    prometheus-client names a counter family's series ``<name>_total``; this family's series keep
    ``name``. It is a gauge to prometheus-client's own renderers (which would rename it); the
    encoders of this module (:func:`generate_text`, :func:`choose_encoder`) type it counter.
    """


class _One:
    """A collector of one metric family (to render it alone)."""

    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self._metric


def generate_text(registry: Collector, escaping: str = UNDERSCORES) -> bytes:
    """The Prometheus text format (0.0.4) of ``registry``, as prometheus-client's
    generate_latest writes it, but :class:`ExactCounter` families typed ``counter`` under their
    own name (``# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter``), as dcgm-exporter."""
    out = []
    for metric in registry.collect():
        text = generate_latest(_One(metric), escaping)
        if isinstance(metric, ExactCounter):
            name = openmetrics.escape_metric_name(metric.name, escaping)
            text = text.replace(
                f"# TYPE {name} gauge\n".encode(), f"# TYPE {name} counter\n".encode(), 1
            )
        out.append(text)
    return b"".join(out)


def _openmetrics_exact(registry: Collector, escaping: str, version: str) -> bytes:
    """OpenMetrics, where a counter's series must end in ``_total``: an exact counter is typed
    ``unknown`` (its name kept) instead."""
    text: bytes = openmetrics.generate_latest(  # type: ignore[no-untyped-call]
        registry, escaping=escaping, version=version
    )
    for metric in registry.collect():
        if isinstance(metric, ExactCounter):
            name = openmetrics.escape_metric_name(metric.name, escaping)
            text = text.replace(
                f"# TYPE {name} gauge\n".encode(), f"# TYPE {name} unknown\n".encode(), 1
            )
    return text


def choose_encoder(accept_header: str) -> tuple[Callable[[Collector], bytes], str]:
    """(encoder, content type) for a scrape's Accept header.

    The text format 0.0.4 whenever the client takes it: what dcgm-exporter serves, and the only
    format in which a counter keeps dcgm-exporter's exact name (Prometheus offers it in its
    default Accept header). OpenMetrics only for a client that asks for nothing else; there
    dcgm-exporter's counters are typed ``unknown``.
    """
    kinds = {part.split(";")[0].strip().lower() for part in accept_header.split(",")}
    if "application/openmetrics-text" in kinds and not kinds & {"text/plain", "text/*", "*/*"}:
        encoder, content_type = _prometheus_encoder(accept_header)
        if content_type.startswith("application/openmetrics-text"):
            keywords = getattr(encoder, "keywords", {})
            return (
                partial(
                    _openmetrics_exact,
                    escaping=keywords.get("escaping", UNDERSCORES),
                    version=keywords.get("version", "1.0.0"),
                ),
                content_type,
            )
    return generate_text, CONTENT_TYPE_PLAIN_0_0_4


def to_prometheus(family: Family) -> Metric:
    """One plain-data Family as a prometheus_client metric family."""
    metric: GaugeMetricFamily | CounterMetricFamily
    if family.exact:
        metric = ExactCounter(family.name, family.help, labels=family.label_names)
    elif family.kind is Kind.COUNTER:
        metric = CounterMetricFamily(family.name, family.help, labels=family.label_names)
    else:
        metric = GaugeMetricFamily(family.name, family.help, labels=family.label_names)
    for sample in family.samples:
        if sample.label_names is None:
            metric.add_metric(list(sample.labels), sample.value)
        else:  # a series with labels of its own (a DCGM series): gauges and exact counters
            labels = dict(zip(sample.label_names, sample.labels, strict=True))
            metric.samples.append(PromSample(family.name, labels, sample.value))
    return metric


class SnapshotCollector:
    """A prometheus_client Collector that renders the holder's last snapshot at scrape time.

    Before the first snapshot the sample age counts from the collector's creation. The driver
    process restarts are the snapshot's ``sampler_restarts``, or the holder's own ``restarts``
    when it has one and it is higher (``latest`` is the last fresh reading: restarts since then,
    and a driver process that keeps crashing, reach no snapshot); the counter never goes down
    between scrapes. ``host_label`` names the DCGM series' host label (``hostname``, as
    dcgm-exporter 4.6.0-4.8.3 and later, or ``Hostname``), ``field_names`` picks their names
    (legacy, DCGM 4.7's or both). ``driver_up``, when given, says at scrape time whether the
    driver can be read (gputop_driver_up; see gputop.export.feed).
    """

    def __init__(
        self,
        holder: SnapshotHolder | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        host_label: str = HOST_LABEL,
        driver_up: Callable[[], bool] | None = None,
        field_names: FieldNames = FieldNames.LEGACY,
    ) -> None:
        self.holder = holder
        self.host_label = host_label
        self.field_names = field_names
        self.driver_up = driver_up
        self._clock = clock
        self._started_mono = clock()
        self._restarts = 0
        self._lock = threading.Lock()

    def families(self) -> list[Family]:
        """The plain-data families one scrape would render."""
        holder = self.holder
        snapshot = holder.latest if holder is not None else None
        errors = holder.errors if holder is not None else 0
        seen = max(
            snapshot.sampler_restarts if snapshot is not None else 0,
            holder.restarts if holder is not None else 0,
        )
        with self._lock:  # scrapes run on several threads at once
            self._restarts = restarts = max(self._restarts, seen)
        driver_up = self.driver_up
        return snapshot_families(
            snapshot,
            age_s=sample_age_s(snapshot, self._clock(), self._started_mono),
            sampler_errors=errors,
            sampler_restarts=restarts,
            version=__version__,
            host_label=self.host_label,
            driver_up=None if driver_up is None else driver_up(),
            field_names=self.field_names,
        )

    def collect(self) -> Iterator[Metric]:
        """Called by prometheus_client for each scrape or textfile write."""
        for family in self.families():
            yield to_prometheus(family)


def make_registry(collector: SnapshotCollector) -> CollectorRegistry:
    """A registry of its own (no process/platform collectors): only gputop's metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


class TextfileWriter:
    """Writes DIR/gputop.prom for node_exporter's textfile collector, atomically.

    As prometheus_client.write_to_textfile does (the same bytes), a temporary file in the same
    folder is renamed over the target, so a reader sees the old file or the new one, never half of
    one; node_exporter only reads ``*.prom``, so it never picks up the temporary file. Unlike it,
    the temporary name is unguessable and the file is always a new one (O_EXCL, no symbolic link
    followed): in a folder others may write, a root exporter must not write through their link.
    """

    def __init__(self, directory: str | Path, registry: CollectorRegistry) -> None:
        self.path = Path(directory) / TEXTFILE_NAME
        self._registry = registry
        self._lock = threading.Lock()
        folder = Path(directory)
        if not folder.is_dir():
            raise UsageError(f"--textfile: not a directory: {folder}")

    def write(self) -> None:
        """Write the file once; raises UsageError with the reason when it cannot."""
        with self._lock:
            data = generate_text(self._registry, ALLOWUTF8)  # write_to_textfile's escaping
            try:
                self._replace(data)
            except UnsafeFile as exc:
                raise UsageError(f"--textfile: cannot write {self.path}: {exc.reason}") from None
            except OSError as exc:
                raise UsageError(
                    f"--textfile: cannot write {self.path}: {exc.strerror or exc}"
                ) from None

    def _replace(self, data: bytes) -> None:
        names = (f"{self.path}.{os.getpid()}.{secrets.token_hex(8)}" for _ in count())
        temp, fd = create_fresh(names)
        try:
            with open(fd, "wb") as out:
                out.write(data)
                os.fchmod(out.fileno(), TEXTFILE_MODE)
            os.rename(temp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
