"""The fleet as data: hosts and their GPUs, from a handful of instant queries (one per metric,
for every host at once: never one per host).

A series belongs to the host its ``hostname`` label names (``Hostname`` in released
dcgm-exporter, ``hostname`` in gputop and newer dcgm-exporter). gputop's own host-wide series
(``gputop_stuck_processes``, ``gputop_sample_age_seconds``, ...) carry no host label: they belong
to the host their scrape target (``job``, ``instance``) serves. A target Prometheus cannot scrape
(``up == 0``) no longer has current series; its host is named from what it served in the last
hour, and a target that never answered is listed (by its address) when its job serves GPUs.

The overview adds the hosts' recent history (:func:`read_history`: one range query per metric
for the whole fleet, every few refreshes) and, for the host drilled into, its processes
(:func:`read_processes`: one query, by the host's targets).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from gputop import dcgm
from gputop.fleet import bounds
from gputop.fleet.client import Answer, PrometheusClient, PrometheusError, Series

MIB = 1024 * 1024


def spellings(legacy: str) -> tuple[tuple[str, float], ...]:
    """A DCGM field's names an exporter may use, each with what its value is multiplied by to
    read in the legacy name's unit: the legacy name (1) and its DCGM 4.7 name where
    :mod:`gputop.dcgm`'s table has one (a 0-1 ratio times 100 for %, bytes / 2**20 for MiB)."""
    info = dcgm.BY_LEGACY[legacy]
    if info.new is None:
        return ((legacy, 1.0),)
    return ((legacy, 1.0), (info.new, 1.0 / info.scale))


LOOKBACK = "1h"  # how far back a down target's host name is looked for
HOST_LABELS = ("hostname", "Hostname")
STUCK_STATES = ("holder", "defunct", "orphan", "stopped", "unkillable")  # = the exporter's
# gputop_gpu_health verdicts asking for more than a kill (= engine.gpu_health.ACTION_NEEDED)
ACTION_VERDICTS = ("reset needed", "reboot needed", "replace")
NO_GPU_SERIES = "no GPU series the fleet can read (neither DCGM's legacy names nor its 4.7 names)"
# A host whose newest readings are older than this is stale: twice Prometheus's default scrape
# interval (1 min), so a missed scrape or two is not an alarm, a hung exporter is.
STALE_AFTER_S = 120.0

# `gputop fleet --once/--json` exit codes for cron and CI (1: Prometheus cannot be asked, and
# 2: bad input, as everywhere in gputop; 3 is the driver timeout of the local commands).
EXIT_OK = 0
EXIT_STUCK = 4  # stuck processes or unattributed GPU memory on some host
EXIT_BLIND = 5  # some host down (every target failed its last scrape) or stale
EXIT_STUCK_AND_BLIND = 6  # both

# The labels a GPU is told apart and placed by: its memory query's. The other per-GPU queries
# name only its UUID (every dcgm-exporter and gputop export series has one): at 4,000 GPUs, the
# same six labels in five answers were most of a refresh's parsing (issue 20: under 5 % of a core).
GPU_LABELS = "job, instance, hostname, Hostname, gpu, UUID"
_BY_HOST = "hostname, Hostname"

# The DCGM fields the fleet reads, by their legacy names (the fleet's units: MiB, %, W, °C).
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
POWER = "DCGM_FI_DEV_POWER_USAGE"
TEMP = "DCGM_FI_DEV_GPU_TEMP"
XID = "DCGM_FI_DEV_XID_ERRORS"
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"


def _any_of(*legacy: str) -> str:
    """A selector of every series under any name of these fields."""
    names = [name for one in legacy for name, _ in spellings(one)]
    return '{__name__=~"' + "|".join(names) + '"}'


def per_gpu(legacy: str, by: str, mig: str) -> str:
    """PromQL for one reading per GPU (grouped ``by``), in the legacy name's unit, from the
    legacy name or its DCGM 4.7 name (converted), whichever the host exports.

    A GPU's own series (no ``GPU_I_ID``) where it has one; else, for a MIG GPU as dcgm-exporter
    shapes it (a series per GPU instance, none for the GPU), its instances' series aggregated
    with ``mig``: ``sum`` for memory (the instances split the GPU's), ``avg`` for utilisation,
    ``max`` for what each instance copies from its GPU (power, temperature). ``or`` keeps the
    first of these a GPU has: a host serving both names, or a gputop export that still serves a
    MIG GPU's own series beside its instances', counts each GPU once.
    """
    names = spellings(legacy)
    whole = [_scaled(f'max by ({by}) ({name}{{GPU_I_ID=""}})', k) for name, k in names]
    parts = [_scaled(f'{mig} by ({by}) ({name}{{GPU_I_ID!=""}})', k) for name, k in names]
    return " or ".join([*whole, *parts])


def _scaled(promql: str, factor: float) -> str:
    """``promql`` times ``factor`` (a power of two or ten: exact either way)."""
    if factor == 1:
        return promql
    if factor < 1:
        return f"({promql}) / {1 / factor:.15g}"
    return f"({promql}) * {factor:.15g}"


def _last_hour(legacy: str) -> str:
    return " or ".join(f"last_over_time({name}[{LOOKBACK}])" for name, _ in spellings(legacy))


# The label that marks the free-memory series inside the memory query's answer.
FREE_MARK = "gputop_fleet_reading"
_FREE = f'label_replace({per_gpu(FB_FREE, "UUID", "sum")}, "{FREE_MARK}", "free", "", "")'

# name -> PromQL; one instant query each, for the whole fleet, all at one evaluation time.
QUERIES: dict[str, str] = {
    "up": "up",
    "scraped": "timestamp(up)",
    "known": (
        f"group by (job, instance, {_BY_HOST}) "
        f"({_last_hour(FB_USED)} or last_over_time(gputop_info[{LOOKBACK}]))"
    ),
    # Only the labels the model reads come back: at 4,000 GPUs the answers' other labels
    # (pci_bus_id, device, DCGM_FI_DRIVER_VERSION, ...) were half the parsing time.
    # Used memory with the labels that place each GPU, and free memory (by UUID, marked) in the
    # same query: Prometheus evaluates one query against the scrapes committed when it starts,
    # so the two come from the same scrape (two queries at one time= could straddle a scrape
    # that commits between them: used + free off the GPU's total).
    "used": f"{per_gpu(FB_USED, f'{GPU_LABELS}, modelName', 'sum')} or {_FREE}",
    # The GPUs the memory query does not place (an exporter without FB_USED, as DCGM 4.7 may
    # be): placed by their other readings. Empty when every GPU has a memory series.
    "place": (
        f"group by ({GPU_LABELS}, modelName) ({_any_of(TEMP, POWER, GPU_UTIL, FB_TOTAL)}) "
        f"unless on (UUID) {_any_of(FB_USED)}"
    ),
    "util": per_gpu(GPU_UTIL, "UUID", "avg"),
    "power": per_gpu(POWER, "UUID", "max"),
    # the GPU's memory (MiB) where used + free is not known
    "total": per_gpu(FB_TOTAL, "UUID", "sum"),
    "temp": per_gpu(TEMP, "UUID", "max"),
    "info": "gputop_info",
    # Only the non-zero ones: a gputop host (gputop_info) with none has none stuck.
    "stuck": "gputop_stuck_processes > 0",
    "unattributed": "gputop_unattributed_memory_bytes > 0",
    "age": "gputop_sample_age_seconds",
    # Health (gputop export's own series; dcgm-exporter has only the Xid field): GPUs off the
    # bus, GPUs the driver did not answer for, a driver gputop cannot read, Xid errors.
    "lost": "gputop_gpu_lost == 1",
    "silent": "gputop_gpu_responding == 0",
    "driver": "gputop_driver_up",
    # the count since the exporter started (prometheus-client exposes a counter as _total)
    "xid_count": 'max by (job, instance, gpu, UUID) ({__name__=~"gputop_xid_errors(_total)?"}) > 0',
    # the newest Xid's code, per GPU (0: none); its MIG instances copy it
    "xid": " or ".join(f"max by ({GPU_LABELS}) ({name} > 0)" for name, _ in spellings(XID)),
    # gputop's health verdict, where it asks for more than a kill (gputop.engine.gpu_health)
    "sick": f'gputop_gpu_health{{verdict=~"{"|".join(ACTION_VERDICTS)}"}} == 1',
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A scrape target: Prometheus's job and instance, and whether its last scrape worked."""

    job: str
    instance: str
    up: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetGpu:
    """One GPU's latest readings (None: not reported)."""

    gpu: str  # dcgm-exporter's gpu label (the NVML index)
    uuid: str
    model: str
    util_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    memory_capacity_bytes: int | None = None  # DCGM's FB_TOTAL (reserved memory included)

    @property
    def memory_total_bytes(self) -> int | None:
        """Used + free (what a used-memory bar is out of), else the GPU's total memory."""
        if self.memory_used_bytes is None or self.memory_free_bytes is None:
            return self.memory_capacity_bytes if self.memory_used_bytes is not None else None
        return self.memory_used_bytes + self.memory_free_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Unattributed:
    """GPU memory in use that no process accounts for, on one GPU (gputop exporters only)."""

    gpu: str
    uuid: str
    bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Xid:
    """Xid errors on one GPU: the newest one's code (``DCGM_FI_DEV_XID_ERRORS``, which
    dcgm-exporter and gputop serve) and how many since the exporter started (gputop only);
    None: not reported."""

    gpu: str
    uuid: str
    last: int | None = None
    count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetHost:
    """One host: its targets, GPUs and, where a gputop exporter serves it, its stuck processes."""

    name: str
    targets: tuple[Target, ...]
    gpus: tuple[FleetGpu, ...]
    gputop: bool  # a gputop exporter serves it (stuck processes, unattributed memory known)
    stuck: Mapping[str, int] | None  # state -> count; None without a gputop exporter
    unattributed: tuple[Unattributed, ...] | None  # None without a gputop exporter
    age_s: float | None  # how old its newest readings are; None when no target is up
    # Health, where its exporter says (gputop export; dcgm-exporter only the Xid field): the
    # indices of GPUs that fell off the bus and of GPUs the driver did not answer for, whether
    # gputop can read the driver (None: not said), Xid errors by GPU.
    lost: tuple[str, ...] = ()
    not_responding: tuple[str, ...] = ()
    driver_up: bool | None = None
    xid: tuple[Xid, ...] = ()
    # GPUs whose health verdict (gputop export) asks for a reset, a reboot or replacing:
    # (gpu index, verdict), by GPU.
    needs_action: tuple[tuple[str, str], ...] = ()

    @property
    def down(self) -> bool:
        """Every target of the host failed its last scrape."""
        return bool(self.targets) and not any(t.up for t in self.targets)

    @property
    def stale(self) -> bool:
        """Up, but its newest readings are older than :data:`STALE_AFTER_S`."""
        return not self.down and self.age_s is not None and self.age_s > STALE_AFTER_S

    @property
    def stuck_total(self) -> int | None:
        return None if self.stuck is None else sum(self.stuck.values())

    @property
    def troubled(self) -> bool:
        """Stuck processes, unattributed GPU memory, Xid errors or a GPU that needs a reset, a
        reboot or replacing reported."""
        return (
            bool(self.stuck_total)
            or bool(self.unattributed_bytes)
            or bool(self.xid)
            or bool(self.needs_action)
        )

    @property
    def no_gpu_series(self) -> bool:
        """Up, yet no GPU reading the fleet can read: neither DCGM's legacy names nor its 4.7
        ones (or a driver that answers for no GPU)."""
        return not self.down and not self.gpus

    @property
    def blind(self) -> bool:
        """Some of it cannot be seen: down, stale, a GPU lost or not responding, the driver
        unreadable, or no GPU series at all."""
        return (
            self.down
            or self.stale
            or bool(self.lost or self.not_responding)
            or self.driver_up is False
            or self.no_gpu_series
        )

    @property
    def unattributed_bytes(self) -> int | None:
        return None if self.unattributed is None else sum(u.bytes for u in self.unattributed)

    def _values(self, name: str) -> list[float]:
        return [v for g in self.gpus if (v := getattr(g, name)) is not None]

    @property
    def util_percent(self) -> float | None:
        """The mean utilisation of the GPUs that report one."""
        values = self._values("util_percent")
        return sum(values) / len(values) if values else None

    @property
    def memory_used_bytes(self) -> int | None:
        values = self._values("memory_used_bytes")
        return int(sum(values)) if values else None

    @property
    def memory_total_bytes(self) -> int | None:
        values = self._values("memory_total_bytes")
        return int(sum(values)) if values else None

    @property
    def power_w(self) -> float | None:
        values = self._values("power_w")
        return sum(values) if values else None

    @property
    def temperature_max_c(self) -> float | None:
        values = self._values("temperature_c")
        return max(values) if values else None


@dataclass(frozen=True, slots=True)
class HostHistory:
    """A host's last :data:`HISTORY_POINTS` readings, one per :data:`HISTORY_STEP_S`, oldest
    first (None: no reading then): mean GPU utilisation and GPU memory used, in %."""

    util_percent: tuple[float | None, ...]
    memory_percent: tuple[float | None, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    """Every host Prometheus knows with GPUs, sorted by name, at ``at`` (Unix time), and the
    hosts' recent history where it was read (the overview's sparklines; by host name)."""

    prometheus: str
    at: float
    hosts: tuple[FleetHost, ...]
    history: Mapping[str, HostHistory] = field(default_factory=dict)
    # series dropped as unbelievable (gputop.fleet.bounds), by reason: never shown or counted
    skipped: Mapping[str, int] = field(default_factory=dict)

    def skipped_note(self) -> str | None:
        """One line saying how many series were skipped and why (None: none were)."""
        return bounds.skipped_note(self.skipped)

    @property
    def gpu_count(self) -> int:
        return sum(len(h.gpus) for h in self.hosts)

    def exit_code(self) -> int:
        """0, or :data:`EXIT_STUCK` (stuck processes, unattributed memory, Xid errors),
        :data:`EXIT_BLIND` (a host down or stale, a GPU lost or not responding, a driver gputop
        cannot read, a host without GPU series), :data:`EXIT_STUCK_AND_BLIND`."""
        stuck = any(h.troubled for h in self.hosts)
        blind = any(h.blind for h in self.hosts)
        if stuck and blind:
            return EXIT_STUCK_AND_BLIND
        return EXIT_STUCK if stuck else (EXIT_BLIND if blind else EXIT_OK)

    def problems(self) -> str | None:
        """What the non-zero exit code stands for, in one line (None: all is well)."""
        stale = f"stale (readings over {STALE_AFTER_S:.0f} s old)"
        kinds: tuple[tuple[str, Callable[[FleetHost], object]], ...] = (
            (
                "stuck processes or unattributed memory on",
                lambda h: h.stuck_total or h.unattributed_bytes,
            ),
            ("Xid errors on", lambda h: h.xid),
            ("GPUs needing a reset, a reboot or replacing on", lambda h: h.needs_action),
            ("down:", lambda h: h.down),
            (f"{stale}:", lambda h: h.stale),
            ("GPUs lost on", lambda h: h.lost),
            ("GPUs not responding on", lambda h: h.not_responding),
            ("driver unreadable on", lambda h: h.driver_up is False),
            (f"{NO_GPU_SERIES} on", lambda h: h.no_gpu_series and h.driver_up is not False),
        )
        parts = []
        for what, test in kinds:
            names = [h.name for h in self.hosts if test(h)]
            if names:
                parts.append(f"{what} {_names(names)}")
        return "; ".join(parts) or None


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def read_fleet(client: PrometheusClient, *, timeout_s: float | None = None) -> Fleet:
    """Ask ``client``'s Prometheus every query (within ``timeout_s`` in all) and build the fleet."""
    return build_fleet(_ask(client, QUERIES, timeout_s), prometheus=client.base_url)


def split_free(answers: dict[str, Answer]) -> dict[str, Answer]:
    """``answers`` with the free-memory series the memory query carries (:data:`FREE_MARK`)
    moved out of "used" into "free" (in place; also returned)."""
    used = answers.get("used")
    if used is None:
        return answers
    free = tuple(s for s in used.series if s.labels.get(FREE_MARK) == "free")
    if free:
        rest = tuple(s for s in used.series if s.labels.get(FREE_MARK) != "free")
        answers["used"] = Answer(at=used.at, series=rest, skipped=used.skipped)
        answers["free"] = Answer(at=used.at, series=free)
    return answers


def _ask(
    client: PrometheusClient,
    queries: Mapping[str, str],
    timeout_s: float | None = None,
    *,
    at: float | None = None,
) -> dict[str, Answer]:
    """Every query's answer, all evaluated at ``at`` (default: now), within ``timeout_s``.

    One evaluation time for all: each query at its own "now" read a GPU's used memory from one
    scrape and its free memory from the next (used + free off its total in 23 of 50 reads).
    """
    limit = client.timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit
    at = time.time() if at is None else at
    answers: dict[str, Answer] = {}
    for name, promql in queries.items():
        left = deadline - time.monotonic()
        if left <= 0:
            raise PrometheusError(
                f"Prometheus at {client.base_url} did not answer within {limit:g} s"
            )
        answers[name] = client.query(promql, at=at, timeout_s=left)
    return split_free(answers)


# The overview's memory query between placements: the values alone, by UUID (FleetReader).
USED_BY_UUID = f"{per_gpu(FB_USED, 'UUID', 'sum')} or {_FREE}"
PLACE_EVERY = 6  # overview reads between two of the memory query with every label (30 s at 5 s)


HISTORY_POINTS = 16
HISTORY_STEP_S = 30.0
# One range query per metric for the whole fleet, a series per host: the mean of its GPUs'
# utilisation, the share of its GPUs' memory in use (a MIG GPU once, as in QUERIES).
_HOST_USED = f"sum by ({_BY_HOST}) ({per_gpu(FB_USED, f'{_BY_HOST}, UUID', 'sum')})"
_HOST_FREE = f"sum by ({_BY_HOST}) ({per_gpu(FB_FREE, f'{_BY_HOST}, UUID', 'sum')})"
HISTORY_QUERIES: dict[str, str] = {
    "util": f"avg by ({_BY_HOST}) ({per_gpu(GPU_UTIL, f'{_BY_HOST}, UUID', 'avg')})",
    "memory": f"100 * {_HOST_USED} / ({_HOST_USED} + {_HOST_FREE})",
}


def read_history(
    client: PrometheusClient,
    *,
    end: float | None = None,
    points: int = HISTORY_POINTS,
    step_s: float = HISTORY_STEP_S,
) -> dict[str, HostHistory]:
    """Every host's history up to ``end`` (now): :data:`HISTORY_QUERIES`, one range query each."""
    end = time.time() if end is None else end
    start = end - (points - 1) * step_s
    rows: dict[str, dict[str, list[float | None]]] = {}
    for key, promql in HISTORY_QUERIES.items():
        answer = client.query_range(promql, start=start, end=end, step_s=step_s)
        for series in answer.series:
            name = host_label(series.labels)
            if name is None:
                continue
            slots = rows.setdefault(name, {}).setdefault(key, [None] * points)
            for stamp, value in series.points:
                if not bounds.in_bounds(value, bounds.PERCENT):
                    continue  # a hostile or broken exporter's reading: never drawn
                index = round((stamp - start) / step_s)
                if 0 <= index < points and slots[index] is None:  # hostname before Hostname
                    slots[index] = value
    empty = (None,) * points
    return {
        name: HostHistory(
            util_percent=tuple(row.get("util", empty)),
            memory_percent=tuple(row.get("memory", empty)),
        )
        for name, row in rows.items()
    }


class FleetReader:
    """The overview's read: the fleet every call, its history every ``history_every`` calls
    (first at once). A history that cannot be read keeps the last one: the fleet is what counts."""

    def __init__(
        self, client: PrometheusClient, *, history_every: int = 1, place_every: int = PLACE_EVERY
    ) -> None:
        self.client = client
        self.history_every = max(1, history_every)
        self.place_every = max(1, place_every)
        self.calls = 0
        self.history: Mapping[str, HostHistory] = {}
        # UUID -> the labels of its memory series (its host, target, index and model; one set
        # per exporter serving it), as of the last full read: GPUs do not move between hosts,
        # and at 4,000 GPUs those labels were the largest answer of a refresh. A GPU not in it
        # has its memory query asked again in full.
        self.placement: dict[str, list[Mapping[str, str]]] = {}

    def __call__(self) -> Fleet:
        fleet = build_fleet(self._answers(), prometheus=self.client.base_url)
        if self.calls % self.history_every == 0:
            with contextlib.suppress(PrometheusError):
                self.history = read_history(self.client, end=fleet.at)
        self.calls += 1
        return replace(fleet, history=self.history)

    def _answers(self) -> dict[str, Answer]:
        at = time.time()
        if self.calls % self.place_every == 0 or not self.placement:
            answers = _ask(self.client, QUERIES, at=at)
            self._place(answers["used"])
            return answers
        answers = _ask(self.client, {**QUERIES, "used": USED_BY_UUID}, at=at)
        by_uuid, placement = answers["used"], self.placement
        series: list[Series] = []
        for s in by_uuid.series:
            places = placement.get(s.labels.get("UUID") or "")
            if places is None:  # a GPU new since the last placement: place them all again
                # at the same time as the others: the answers must still add up
                answers["used"] = self.client.query(QUERIES["used"], at=at)
                split_free(answers)
                self._place(answers["used"])
                return answers
            series.extend(Series(labels, s.value) for labels in places)
        answers["used"] = Answer(at=by_uuid.at, series=tuple(series), skipped=by_uuid.skipped)
        return answers

    def _place(self, used: Answer) -> None:
        placement: dict[str, list[Mapping[str, str]]] = {}
        for s in used.series:
            if s.labels.get("UUID"):
                placement.setdefault(s.labels["UUID"], []).append(s.labels)
        self.placement = placement


def host_label(labels: Mapping[str, str]) -> str | None:
    """The host a series names (``hostname`` or ``Hostname``), or None."""
    for name in HOST_LABELS:
        if labels.get(name):
            return labels[name]
    return None


TargetKey = tuple[str, str]


def _target(labels: Mapping[str, str]) -> TargetKey:
    return labels.get("job", ""), labels.get("instance", "")


@dataclass(slots=True)
class _Host:
    name: str
    targets: dict[TargetKey, bool] = field(default_factory=dict)
    gpus: dict[str, dict[str, object]] = field(default_factory=dict)
    gputop: bool = False
    stuck: dict[str, int] | None = None
    unattributed: list[Unattributed] | None = None
    age_s: float | None = None
    lost: set[str] = field(default_factory=set)
    silent: set[str] = field(default_factory=set)
    driver_up: bool | None = None
    xid: dict[str, dict[str, object]] = field(default_factory=dict)  # gpu or UUID -> Xid's
    sick: dict[str, str] = field(default_factory=dict)  # gpu -> verdict asking for action


class _Builder:
    def __init__(self, answers: Mapping[str, Answer]) -> None:
        self.answers = answers
        self.hosts: dict[str, _Host] = {}
        self._placed: dict[tuple[str, str, str | None], _Host | None] = {}
        # target -> the hosts its series name (from the current series and the last hour's)
        self.names: dict[TargetKey, list[str]] = {}
        seen: set[tuple[TargetKey, str | None]] = set()
        for key in ("known", "used", "place", "util", "free", "power", "temp", "info"):
            series = self._series(key)
            if series and not _placeable(series[0].labels):
                continue  # by UUID alone (every series of an answer has the same label names)
            for s in series:
                target, name = _target(s.labels), host_label(s.labels)
                if (target, name) in seen:  # the same pair for each of a host's GPUs
                    continue
                seen.add((target, name))
                names = self.names.setdefault(target, [])
                if name is not None and name not in names:
                    names.append(name)

    def _series(self, key: str) -> tuple[Series, ...]:
        answer = self.answers.get(key)
        return answer.series if answer is not None else ()

    def host(self, name: str) -> _Host:
        host = self.hosts.get(name)  # not setdefault: called for each of 20,000 series a fleet
        if host is None:
            host = self.hosts[name] = _Host(name=name)
        return host

    def hosts_of_target(self, target: TargetKey) -> list[_Host]:
        names = self.names.get(target) or [target[1] or target[0]]
        return [self.host(n) for n in names]

    def host_of(self, labels: Mapping[str, str]) -> _Host | None:
        """A series' host: its own label, else its target's one host (None: ambiguous)."""
        key = (labels.get("job", ""), labels.get("instance", ""), host_label(labels))
        if key in self._placed:  # the same answer for each of a host's GPUs
            return self._placed[key]
        name = key[2]
        if name is not None:
            found: _Host | None = self.host(name)
        else:
            hosts = self.hosts_of_target(key[:2])
            found = hosts[0] if len(hosts) == 1 else None
        self._placed[key] = found
        return found

    def add_gpu_fields(self) -> None:
        # UUID -> its GPU on each host that lists it (one; the same recorded exporter served as
        # two hosts would make two)
        by_uuid: dict[str, list[dict[str, object]]] = {}
        for key, attribute in _GPU_FIELDS:  # "used" first: it places each GPU on its host
            series = self._series(key)
            scale = MIB if key in ("used", "free", "total") else 0
            if series and not _placeable(series[0].labels):
                # Named by UUID alone (every series of an answer has the same label names): at
                # 4,000 GPUs a refresh has 16,000 of these, so the loop is kept tight.
                get = by_uuid.get
                for s in series:
                    gpus = get(s.labels.get("UUID") or "")
                    if gpus:
                        value = int(s.value * scale) if scale else s.value
                        for one in gpus:
                            one[attribute] = value
                continue
            for s in series:
                labels = s.labels
                if labels.get("GPU_I_ID"):  # a MIG device's series: the GPU's own is enough
                    continue
                gpu = self._place_gpu(labels)
                if gpu is None:
                    continue
                if gpu["uuid"]:
                    known = by_uuid.setdefault(str(gpu["uuid"]), [])
                    if not any(g is gpu for g in known):
                        known.append(gpu)
                if labels.get("modelName"):  # only the placing queries ask for it
                    gpu["model"] = labels["modelName"]
                if attribute:
                    gpu[attribute] = int(s.value * scale) if scale else s.value

    def _place_gpu(self, labels: Mapping[str, str]) -> dict[str, object] | None:
        """The GPU a series with its target or host labels names, on its host (None: none)."""
        if not _placeable(labels):
            return None
        host = self.host_of(labels)
        if host is None:
            return None
        target = _target(labels)
        if target not in host.targets:
            host.targets[target] = True
        gpu_id = labels.get("UUID") or f"{target}:{labels.get('gpu', '')}"
        return host.gpus.setdefault(
            gpu_id, {"gpu": labels.get("gpu", ""), "uuid": labels.get("UUID", ""), "model": ""}
        )

    def add_targets(self) -> None:
        """Every target of a job that serves GPUs (now or in the last hour), up or down."""
        gpu_targets = set(self.names)
        gpu_jobs = {job for job, _ in gpu_targets}
        scraped = {_target(s.labels): s.value for s in self._series("scraped")}
        at = self.answers["up"].at if "up" in self.answers else time.time()
        for s in self._series("up"):
            target = _target(s.labels)
            if target not in gpu_targets and target[0] not in gpu_jobs:
                continue
            up = s.value == 1
            for host in self.hosts_of_target(target):
                host.targets[target] = up
                if up and target in scraped:
                    age = max(0.0, at - scraped[target])
                    host.age_s = age if host.age_s is None else max(host.age_s, age)

    def add_gputop(self) -> None:
        for s in self._series("info"):
            host = self.host_of(s.labels)
            if host is not None:
                host.gputop = True
                host.stuck = host.stuck if host.stuck is not None else {}
                host.unattributed = host.unattributed if host.unattributed is not None else []
        for s in self._series("stuck"):
            host = self.host_of(s.labels)
            if host is None:
                continue
            host.gputop = True
            host.stuck = host.stuck if host.stuck is not None else {}
            state = s.labels.get("state", "other")
            host.stuck[state] = host.stuck.get(state, 0) + int(s.value)
        for s in self._series("unattributed"):
            host = self.host_of(s.labels)
            if host is None:
                continue
            host.unattributed = host.unattributed if host.unattributed is not None else []
            if s.value > 0:
                host.unattributed.append(
                    Unattributed(
                        gpu=s.labels.get("gpu", ""),
                        uuid=s.labels.get("UUID", ""),
                        bytes=int(s.value),
                    )
                )
        for s in self._series("age"):  # the exporter's own sample age, at its last scrape
            host = self.host_of(s.labels)
            if host is not None and host.age_s is not None:
                host.age_s += s.value

    def add_health(self) -> None:
        """Lost and not-responding GPUs, the driver's state, Xid errors (by target or host)."""
        for key, found in (("lost", "lost"), ("silent", "silent")):
            for s in self._series(key):
                host = self.host_of(s.labels)
                if host is not None and s.labels.get("gpu"):
                    getattr(host, found).add(s.labels["gpu"])
        for s in self._series("driver"):
            host = self.host_of(s.labels)
            if host is not None:  # any target that cannot read its driver makes it False
                host.driver_up = (host.driver_up is not False) and s.value == 1
        for s in self._series("sick"):
            host = self.host_of(s.labels)
            if host is not None and s.labels.get("gpu"):
                host.sick[s.labels["gpu"]] = s.labels.get("verdict", "")
        for key, attribute in (("xid", "last"), ("xid_count", "count")):
            for s in self._series(key):
                host = self.host_of(s.labels)
                if host is None:
                    continue
                gpu, uuid = s.labels.get("gpu", ""), s.labels.get("UUID", "")
                one = host.xid.setdefault(uuid or gpu, {"gpu": gpu, "uuid": uuid})
                one[attribute] = int(s.value)

    def build(self) -> tuple[FleetHost, ...]:
        self.add_gpu_fields()
        self.add_targets()
        self.add_gputop()
        self.add_health()
        hosts = []
        for h in sorted(self.hosts.values(), key=lambda h: h.name):
            gpus = sorted(h.gpus.values(), key=lambda g: (_index(str(g["gpu"])), str(g["uuid"])))
            if h.stuck is not None:
                h.stuck = {s: h.stuck.get(s, 0) for s in STUCK_STATES} | h.stuck
            up = any(h.targets.values())
            hosts.append(
                FleetHost(
                    name=h.name,
                    targets=tuple(
                        Target(job=job, instance=instance, up=ok)
                        for (job, instance), ok in sorted(h.targets.items())
                    ),
                    gpus=tuple(FleetGpu(**g) for g in gpus),  # type: ignore[arg-type]
                    gputop=h.gputop,
                    stuck=h.stuck if up else None,
                    unattributed=(
                        tuple(sorted(h.unattributed, key=lambda u: _index(u.gpu)))
                        if h.unattributed is not None and up
                        else None
                    ),
                    age_s=h.age_s if up else None,
                    # what a target that is down last said is not now's news
                    lost=tuple(sorted(h.lost, key=_index)) if up else (),
                    # a lost GPU does not respond either: said once, as lost
                    not_responding=tuple(sorted(h.silent - h.lost, key=_index)) if up else (),
                    driver_up=h.driver_up if up else None,
                    xid=tuple(
                        sorted(
                            (Xid(**x) for x in h.xid.values()),  # type: ignore[arg-type]
                            key=lambda x: (_index(x.gpu), x.uuid),
                        )
                    )
                    if up
                    else (),
                    needs_action=tuple(sorted(h.sick.items(), key=lambda g: _index(g[0])))
                    if up
                    else (),
                )
            )
        return tuple(hosts)


_GPU_FIELDS = (
    ("used", "memory_used_bytes"),
    ("place", ""),  # placed only
    ("total", "memory_capacity_bytes"),
    ("util", "util_percent"),
    ("free", "memory_free_bytes"),
    ("power", "power_w"),
    ("temp", "temperature_c"),
)


def _placeable(labels: Mapping[str, str]) -> bool:
    """Whether a series says where it comes from: a scrape target or a host label."""
    return bool(labels.get("instance") or labels.get("job") or host_label(labels))


def _index(text: str) -> tuple[int, str]:
    """A sort key: numbers (ASCII digits only: int() refuses "²", and 5,000 digits) first."""
    return (int(text), "") if bounds.is_number(text, 9) else (1 << 30, text)


def build_fleet(answers: Mapping[str, Answer], *, prometheus: str = "") -> Fleet:
    """The fleet from the answers to :data:`QUERIES` (a missing answer counts as empty), without
    the series it cannot believe (:func:`gputop.fleet.bounds.screen`: counted in ``skipped``)."""
    screened, skipped = bounds.screen(answers)
    at = screened["up"].at if "up" in screened else time.time()
    return Fleet(prometheus=prometheus, at=at, hosts=_Builder(screened).build(), skipped=skipped)


@dataclass(frozen=True, slots=True, kw_only=True)
class FleetProcess:
    """A process using a GPU on some host, as its gputop exporter reported it (read-only)."""

    gpu: str
    pid: str
    user: str
    command: str
    memory_bytes: int
    container: str = ""


def promql_string(text: str) -> str:
    """``text`` as a PromQL string literal (JSON's escapes are Go's, which PromQL reads)."""
    return json.dumps(text)


def processes_query(host: FleetHost) -> str | None:
    """The one query for ``host``'s processes (by its targets: the series name no host), or
    None when no gputop exporter serves it (dcgm-exporter has no per-process series)."""
    if not host.gputop or not host.targets:
        return None
    return " or ".join(
        f"gputop_process_gpu_memory_bytes{{job={promql_string(t.job)},"
        f"instance={promql_string(t.instance)}}}"
        for t in host.targets
    )


def read_processes(client: PrometheusClient, host: FleetHost) -> tuple[FleetProcess, ...] | None:
    """``host``'s GPU processes, most memory first (None: no gputop exporter serves it)."""
    promql = processes_query(host)
    if promql is None:
        return None
    found = []
    for s in client.query(promql).series:
        labels = s.labels
        if not (
            bounds.gpu_label_ok(labels)
            and bounds.is_number(labels.get("pid", ""), bounds.PID_DIGITS)
            and bounds.in_bounds(s.value, (0.0, bounds.MAX_GPU_BYTES))
        ):
            continue  # a hostile or broken exporter's series: never shown
        found.append(
            FleetProcess(
                gpu=labels.get("gpu", ""),
                pid=labels.get("pid", ""),
                user=labels.get("user", ""),
                command=labels.get("command", ""),
                memory_bytes=int(s.value),
                container=labels.get("pod") or labels.get("container", ""),
            )
        )
    found.sort(key=lambda p: (-p.memory_bytes, _index(p.gpu), _index(p.pid)))
    return tuple(found)
