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
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gputop.fleet import bounds
from gputop.fleet.client import Answer, PrometheusClient, PrometheusError, Series

MIB = 1024 * 1024
LOOKBACK = "1h"  # how far back a down target's host name is looked for
HOST_LABELS = ("hostname", "Hostname")
STUCK_STATES = ("holder", "defunct", "orphan", "stopped")
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
_WHOLE_GPU = '{GPU_I_ID=""}'  # a MIG device's series left out: its GPU's own count

# name -> PromQL; one instant query each, for the whole fleet.
QUERIES: dict[str, str] = {
    "up": "up",
    "scraped": "timestamp(up)",
    "known": (
        f"group by (job, instance, hostname, Hostname) "
        f"(last_over_time(DCGM_FI_DEV_FB_USED[{LOOKBACK}]) "
        f"or last_over_time(gputop_info[{LOOKBACK}]))"
    ),
    # Only the labels the model reads come back: at 4,000 GPUs the answers' other labels
    # (pci_bus_id, device, DCGM_FI_DRIVER_VERSION, ...) were half the parsing time.
    "used": f"max by ({GPU_LABELS}, modelName) (DCGM_FI_DEV_FB_USED{_WHOLE_GPU})",
    "util": f"max by (UUID) (DCGM_FI_DEV_GPU_UTIL{_WHOLE_GPU})",
    "free": f"max by (UUID) (DCGM_FI_DEV_FB_FREE{_WHOLE_GPU})",
    "power": f"max by (UUID) (DCGM_FI_DEV_POWER_USAGE{_WHOLE_GPU})",
    "temp": f"max by (UUID) (DCGM_FI_DEV_GPU_TEMP{_WHOLE_GPU})",
    "info": "gputop_info",
    # Only the non-zero ones: a gputop host (gputop_info) with none has none stuck.
    "stuck": "gputop_stuck_processes > 0",
    "unattributed": "gputop_unattributed_memory_bytes > 0",
    "age": "gputop_sample_age_seconds",
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

    @property
    def memory_total_bytes(self) -> int | None:
        if self.memory_used_bytes is None or self.memory_free_bytes is None:
            return None
        return self.memory_used_bytes + self.memory_free_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Unattributed:
    """GPU memory in use that no process accounts for, on one GPU (gputop exporters only)."""

    gpu: str
    uuid: str
    bytes: int


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
        """Stuck processes or unattributed GPU memory reported."""
        return bool(self.stuck_total) or bool(self.unattributed_bytes)

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
        """0, or :data:`EXIT_STUCK`, :data:`EXIT_BLIND`, :data:`EXIT_STUCK_AND_BLIND`."""
        stuck = any(h.troubled for h in self.hosts)
        blind = any(h.down or h.stale for h in self.hosts)
        if stuck and blind:
            return EXIT_STUCK_AND_BLIND
        return EXIT_STUCK if stuck else (EXIT_BLIND if blind else EXIT_OK)

    def problems(self) -> str | None:
        """What the non-zero exit code stands for, in one line (None: all is well)."""
        troubled = [h.name for h in self.hosts if h.troubled]
        down = [h.name for h in self.hosts if h.down]
        stale = [h.name for h in self.hosts if h.stale]
        parts = []
        if troubled:
            parts.append(f"stuck processes or unattributed memory on {_names(troubled)}")
        if down:
            parts.append(f"down: {_names(down)}")
        if stale:
            parts.append(f"stale (readings over {STALE_AFTER_S:.0f} s old): {_names(stale)}")
        return "; ".join(parts) or None


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def read_fleet(client: PrometheusClient, *, timeout_s: float | None = None) -> Fleet:
    """Ask ``client``'s Prometheus every query (within ``timeout_s`` in all) and build the fleet."""
    return build_fleet(_ask(client, QUERIES, timeout_s), prometheus=client.base_url)


def _ask(
    client: PrometheusClient, queries: Mapping[str, str], timeout_s: float | None = None
) -> dict[str, Answer]:
    limit = client.timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit
    answers: dict[str, Answer] = {}
    for name, promql in queries.items():
        left = deadline - time.monotonic()
        if left <= 0:
            raise PrometheusError(
                f"Prometheus at {client.base_url} did not answer within {limit:g} s"
            )
        answers[name] = client.query(promql, timeout_s=left)
    return answers


# The overview's memory query between placements: the values alone, by UUID (FleetReader).
USED_BY_UUID = f"max by (UUID) (DCGM_FI_DEV_FB_USED{_WHOLE_GPU})"
PLACE_EVERY = 6  # overview reads between two of the memory query with every label (30 s at 5 s)


HISTORY_POINTS = 16
HISTORY_STEP_S = 30.0
# One range query per metric for the whole fleet, a series per host (MIG devices left out:
# their GPU's own series count).
_BY_HOST = "by (hostname, Hostname)"
HISTORY_QUERIES: dict[str, str] = {
    "util": f"avg {_BY_HOST} (DCGM_FI_DEV_GPU_UTIL{_WHOLE_GPU})",
    "memory": (
        f"100 * sum {_BY_HOST} (DCGM_FI_DEV_FB_USED{_WHOLE_GPU}) / sum {_BY_HOST} "
        f"(DCGM_FI_DEV_FB_USED{_WHOLE_GPU} + DCGM_FI_DEV_FB_FREE{_WHOLE_GPU})"
    ),
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
        if self.calls % self.place_every == 0 or not self.placement:
            answers = _ask(self.client, QUERIES)
            self._place(answers["used"])
            return answers
        answers = _ask(self.client, {**QUERIES, "used": USED_BY_UUID})
        by_uuid, placement = answers["used"], self.placement
        series: list[Series] = []
        for s in by_uuid.series:
            places = placement.get(s.labels.get("UUID") or "")
            if places is None:  # a GPU new since the last placement: place them all again
                answers["used"] = self.client.query(QUERIES["used"])
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


class _Builder:
    def __init__(self, answers: Mapping[str, Answer]) -> None:
        self.answers = answers
        self.hosts: dict[str, _Host] = {}
        self._placed: dict[tuple[str, str, str | None], _Host | None] = {}
        # target -> the hosts its series name (from the current series and the last hour's)
        self.names: dict[TargetKey, list[str]] = {}
        seen: set[tuple[TargetKey, str | None]] = set()
        for key in ("known", "used", "util", "free", "power", "temp", "info"):
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
            scale = MIB if key in ("used", "free") else 0
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
                if labels.get("modelName"):  # only the memory query asks for it
                    gpu["model"] = labels["modelName"]
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

    def build(self) -> tuple[FleetHost, ...]:
        self.add_gpu_fields()
        self.add_targets()
        self.add_gputop()
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
                )
            )
        return tuple(hosts)


_GPU_FIELDS = (
    ("used", "memory_used_bytes"),
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
