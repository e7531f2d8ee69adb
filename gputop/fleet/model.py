"""The fleet as data: hosts and their GPUs, from a handful of instant queries (one per metric,
for every host at once: never one per host).

A series belongs to the host its ``hostname`` label names (``Hostname`` in released
dcgm-exporter, ``hostname`` in gputop and newer dcgm-exporter). gputop's own host-wide series
(``gputop_stuck_processes``, ``gputop_sample_age_seconds``, ...) carry no host label: they belong
to the host their scrape target (``job``, ``instance``) serves. A target Prometheus cannot scrape
(``up == 0``) no longer has current series; its host is named from what it served in the last
hour, and a target that never answered is listed (by its address) when its job serves GPUs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gputop.fleet.client import Answer, PrometheusClient, PrometheusError, Series

MIB = 1024 * 1024
LOOKBACK = "1h"  # how far back a down target's host name is looked for
HOST_LABELS = ("hostname", "Hostname")
STUCK_STATES = ("holder", "defunct", "orphan", "stopped")

# name -> PromQL; one instant query each, for the whole fleet.
QUERIES: dict[str, str] = {
    "up": "up",
    "scraped": "timestamp(up)",
    "known": (
        f"group by (job, instance, hostname, Hostname) "
        f"(last_over_time(DCGM_FI_DEV_FB_USED[{LOOKBACK}]) "
        f"or last_over_time(gputop_info[{LOOKBACK}]))"
    ),
    "util": "DCGM_FI_DEV_GPU_UTIL",
    "used": "DCGM_FI_DEV_FB_USED",
    "free": "DCGM_FI_DEV_FB_FREE",
    "power": "DCGM_FI_DEV_POWER_USAGE",
    "temp": "DCGM_FI_DEV_GPU_TEMP",
    "info": "gputop_info",
    "stuck": "gputop_stuck_processes",
    "unattributed": "gputop_unattributed_memory_bytes",
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
    def stuck_total(self) -> int | None:
        return None if self.stuck is None else sum(self.stuck.values())

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Fleet:
    """Every host Prometheus knows with GPUs, sorted by name, at ``at`` (Unix time)."""

    prometheus: str
    at: float
    hosts: tuple[FleetHost, ...]

    @property
    def gpu_count(self) -> int:
        return sum(len(h.gpus) for h in self.hosts)


def read_fleet(client: PrometheusClient, *, timeout_s: float | None = None) -> Fleet:
    """Ask ``client``'s Prometheus every query (within ``timeout_s`` in all) and build the fleet."""
    limit = client.timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit
    answers: dict[str, Answer] = {}
    for name, promql in QUERIES.items():
        left = deadline - time.monotonic()
        if left <= 0:
            raise PrometheusError(
                f"Prometheus at {client.base_url} did not answer within {limit:g} s"
            )
        answers[name] = client.query(promql, timeout_s=left)
    return build_fleet(answers, prometheus=client.base_url)


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
        # target -> the hosts its series name (from the current series and the last hour's)
        self.names: dict[TargetKey, list[str]] = {}
        for key in ("known", "util", "used", "free", "power", "temp", "info"):
            for s in self._series(key):
                name = host_label(s.labels)
                names = self.names.setdefault(_target(s.labels), [])
                if name is not None and name not in names:
                    names.append(name)

    def _series(self, key: str) -> tuple[Series, ...]:
        answer = self.answers.get(key)
        return answer.series if answer is not None else ()

    def host(self, name: str) -> _Host:
        return self.hosts.setdefault(name, _Host(name=name))

    def hosts_of_target(self, target: TargetKey) -> list[_Host]:
        names = self.names.get(target) or [target[1] or target[0]]
        return [self.host(n) for n in names]

    def host_of_series(self, series: Series) -> _Host | None:
        """A series' host: its own label, else its target's one host (None: ambiguous)."""
        name = host_label(series.labels)
        if name is not None:
            return self.host(name)
        hosts = self.hosts_of_target(_target(series.labels))
        return hosts[0] if len(hosts) == 1 else None

    def add_gpu_fields(self) -> None:
        fields = {
            "util": "util_percent",
            "used": "memory_used_bytes",
            "free": "memory_free_bytes",
            "power": "power_w",
            "temp": "temperature_c",
        }
        for key, attribute in fields.items():
            for s in self._series(key):
                if s.labels.get("GPU_I_ID"):  # a MIG device's series: the GPU's own is enough
                    continue
                host = self.host_of_series(s)
                if host is None:
                    continue
                host.targets.setdefault(_target(s.labels), True)
                gpu_id = s.labels.get("UUID") or f"{_target(s.labels)}:{s.labels.get('gpu', '')}"
                gpu = host.gpus.setdefault(
                    gpu_id,
                    {
                        "gpu": s.labels.get("gpu", ""),
                        "uuid": s.labels.get("UUID", ""),
                        "model": s.labels.get("modelName", ""),
                    },
                )
                value: float | int = s.value
                if key in ("used", "free"):
                    value = int(s.value * MIB)
                gpu[attribute] = value

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
            host = self.host_of_series(s)
            if host is not None:
                host.gputop = True
                host.stuck = host.stuck if host.stuck is not None else {}
                host.unattributed = host.unattributed if host.unattributed is not None else []
        for s in self._series("stuck"):
            host = self.host_of_series(s)
            if host is None:
                continue
            host.gputop = True
            host.stuck = host.stuck if host.stuck is not None else {}
            state = s.labels.get("state", "other")
            host.stuck[state] = host.stuck.get(state, 0) + int(s.value)
        for s in self._series("unattributed"):
            host = self.host_of_series(s)
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
            host = self.host_of_series(s)
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


def _index(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (1 << 30, text)


def build_fleet(answers: Mapping[str, Answer], *, prometheus: str = "") -> Fleet:
    """The fleet from the answers to :data:`QUERIES` (a missing answer counts as empty)."""
    at = answers["up"].at if "up" in answers else time.time()
    return Fleet(prometheus=prometheus, at=at, hosts=_Builder(answers).build())
