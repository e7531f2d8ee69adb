"""The fleet as text (a table, one line per host, and the stuck-process report) and as JSON."""

from __future__ import annotations

import json
import time
from typing import Any

from gputop.cells import cell_len, ljust, rjust
from gputop.fleet.model import NO_GPU_SERIES, STALE_AFTER_S, Fleet, FleetHost

GIB = 1024**3
SCHEMA = 1
# HEALTH next to GPUS: on an 80-column terminal it is on screen with the host's name.
COLUMNS = ("HOST", "GPUS", "HEALTH", "UTIL", "MEMORY", "POWER", "TEMP", "STUCK", "UNATTR", "AGE")
RIGHT = frozenset({"GPUS", "UTIL", "MEMORY", "POWER", "TEMP", "STUCK", "UNATTR", "AGE"})


def gib(value_bytes: int | None) -> str:
    return "-" if value_bytes is None else f"{value_bytes / GIB:.1f}"


def age_text(host: FleetHost) -> str:
    if host.down:
        return "DOWN"
    if host.age_s is None:
        return "-"
    return f"{host.age_s:.0f} s" if host.age_s >= 10 else f"{host.age_s:.1f} s"


def health_words(host: FleetHost) -> list[str]:
    """What is wrong with a host's GPUs, in full (``GPU 3 lost (fell off the bus)``, ``Xid 79 on
    GPU 2``...); empty: nothing its exporter reports."""
    if host.down:
        return []
    words = []
    if host.driver_up is False:
        words.append("driver unreadable (gputop_driver_up 0)")
    words += [f"GPU {gpu} lost (fell off the bus)" for gpu in host.lost]
    words += [f"GPU {gpu} not responding" for gpu in host.not_responding]
    words += [f"GPU {gpu}: {verdict}" for gpu, verdict in host.needs_action]
    for x in host.xid:
        text = f"Xid {x.last}" if x.last is not None else "Xid errors"
        text += f" on GPU {x.gpu or x.uuid}"
        if x.count is not None:
            text += f" ({x.count} since the exporter started)"
        words.append(text)
    if host.no_gpu_series and host.driver_up is not False:
        words.append(NO_GPU_SERIES)
    return words


def health_cell(host: FleetHost) -> str:
    """The HEALTH cell: ``ok``, or what is wrong in a few words (``1 lost, Xid 79``)."""
    if host.down:
        return "-"
    words = []
    if host.driver_up is False:
        words.append("no driver")
    if host.lost:
        words.append(f"{len(host.lost)} lost")
    if host.not_responding:
        words.append(f"{len(host.not_responding)} unresp")
    if host.needs_action:
        words.append(f"{len(host.needs_action)} need action")
    codes = sorted({x.last for x in host.xid if x.last is not None})
    if codes:
        words.append("Xid " + "/".join(map(str, codes)))
    elif host.xid:
        words.append("Xid")
    if host.no_gpu_series and host.driver_up is not False:
        words.append("no GPU series")
    return ", ".join(words) or "ok"


def host_cells(host: FleetHost, degree: str = "°") -> dict[str, str]:
    """The table's cells for one host ("-": not known)."""
    used, total = host.memory_used_bytes, host.memory_total_bytes
    util, power, temp = host.util_percent, host.power_w, host.temperature_max_c
    unattributed = host.unattributed_bytes
    return {
        "HOST": host.name,
        "GPUS": str(len(host.gpus)) if host.gpus or not host.down else "-",
        "HEALTH": health_cell(host),
        "UTIL": "-" if util is None else f"{util:.0f} %",
        "MEMORY": "-" if used is None else f"{gib(used)} / {gib(total)} GiB",
        "POWER": "-" if power is None else f"{power:.0f} W",
        "TEMP": "-" if temp is None else f"{temp:.0f}{degree}C",
        "STUCK": "-" if host.stuck_total is None else str(host.stuck_total),
        "UNATTR": "-"
        if unattributed is None
        else ("0" if unattributed == 0 else f"{gib(unattributed)} GiB"),
        "AGE": age_text(host),
    }


def render_table(fleet: Fleet, degree: str = "°") -> str:
    """One header line, one line per host, a summary line."""
    rows = [dict(zip(COLUMNS, COLUMNS, strict=True))]
    rows += [host_cells(h, degree) for h in fleet.hosts]
    # In terminal cells: a host named in CJK must not push its row's numbers right.
    widths = {c: max(cell_len(r[c]) for r in rows) for c in COLUMNS}
    lines = []
    for row in rows:
        cells = [
            rjust(row[c], widths[c]) if c in RIGHT else ljust(row[c], widths[c]) for c in COLUMNS
        ]
        lines.append("  ".join(cells).rstrip())
    down = sum(h.down for h in fleet.hosts)
    summary = (
        f"{len(fleet.hosts)} host{'s' if len(fleet.hosts) != 1 else ''}"
        + (f" ({down} down)" if down else "")
        + f", {fleet.gpu_count} GPU{'s' if fleet.gpu_count != 1 else ''}"
        + f" · {fleet.prometheus} at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(fleet.at))}"
    )
    if not fleet.hosts:
        summary = (
            f"no GPU hosts: {fleet.prometheus} has no DCGM_FI_DEV_* (legacy or DCGM 4.7 names) "
            "or gputop_* series (is it scraping gputop export or dcgm-exporter?)"
        )
        return summary + "\n"
    return "\n".join([*lines, summary]) + "\n"


def stuck_words(host: FleetHost) -> list[str]:
    """``2 holders``, ``1 orphan``, ``23.0 GiB unattributed on GPU 3`` ... for one host."""
    words = []
    for state, count in (host.stuck or {}).items():
        if count:
            plural = "s" if count != 1 and state not in ("stopped", "unkillable") else ""
            words.append(f"{count} {state}{plural}")
    words += [f"{gib(u.bytes)} GiB unattributed on GPU {u.gpu}" for u in host.unattributed or ()]
    return words


def render_stuck_report(fleet: Fleet) -> str:
    """Which hosts have stuck processes or unattributed memory, and which cannot say."""
    lines = ["Stuck processes across the fleet:"]
    found = False
    for host in fleet.hosts:
        words = stuck_words(host)
        if words:
            found = True
            lines.append(f"  {host.name}: {', '.join(words)}  (gputop doctor on the host)")
    if not found:
        lines.append("  none reported")
    blind = [h.name for h in fleet.hosts if not h.down and h.stuck is None]
    down = [h.name for h in fleet.hosts if h.down]
    if blind:
        lines.append(f"  not known (dcgm-exporter only, no gputop export): {', '.join(blind)}")
    if down:
        lines.append(f"  not known (target down): {', '.join(down)}")
    stale = [h.name for h in fleet.hosts if h.stale]
    if stale:
        lines.append(f"  stale (readings over {STALE_AFTER_S:.0f} s old): {', '.join(stale)}")
    return "\n".join(lines) + "\n"


def render_health_report(fleet: Fleet) -> str:
    """Which hosts have lost or silent GPUs, Xid errors, an unreadable driver, no GPU series."""
    lines = ["GPU health across the fleet:"]
    for host in fleet.hosts:
        words = health_words(host)
        if words:
            lines.append(f"  {host.name}: {', '.join(words)}")
    if len(lines) == 1:
        lines.append("  no lost or unresponsive GPUs, no Xid errors reported")
    return "\n".join(lines) + "\n"


def fleet_json(fleet: Fleet) -> dict[str, Any]:
    """The fleet as JSON-ready data (bytes, watts, °C, seconds; null: not known)."""
    return {
        "schema": SCHEMA,
        "prometheus": fleet.prometheus,
        "at": fleet.at,
        "exit_code": fleet.exit_code(),
        "host_count": len(fleet.hosts),
        "gpu_count": fleet.gpu_count,
        "hosts": [_host_json(h) for h in fleet.hosts],
        "stuck": [
            {"host": h.name, "summary": stuck_words(h)} for h in fleet.hosts if stuck_words(h)
        ],
        "health": [
            {"host": h.name, "summary": health_words(h)} for h in fleet.hosts if health_words(h)
        ],
        # Series left out as unbelievable, by reason: never shown, summed or in the exit code.
        "skipped": dict(fleet.skipped),
    }


def _host_json(host: FleetHost) -> dict[str, Any]:
    return {
        "name": host.name,
        "down": host.down,
        "stale": host.stale,
        "exporter": "gputop" if host.gputop else ("dcgm-exporter" if host.gpus else None),
        "targets": [{"job": t.job, "instance": t.instance, "up": t.up} for t in host.targets],
        "gpu_count": len(host.gpus),
        "util_percent_mean": host.util_percent,
        "memory_used_bytes": host.memory_used_bytes,
        "memory_total_bytes": host.memory_total_bytes,
        "power_w": host.power_w,
        "temperature_max_c": host.temperature_max_c,
        "stuck_processes": None if host.stuck is None else dict(host.stuck),
        "stuck_total": host.stuck_total,
        "unattributed_memory_bytes": host.unattributed_bytes,
        "unattributed": None
        if host.unattributed is None
        else [{"gpu": u.gpu, "uuid": u.uuid, "bytes": u.bytes} for u in host.unattributed],
        "age_s": host.age_s,
        # health (null or empty: not reported; only gputop export reports lost, not responding
        # and the driver; dcgm-exporter and gputop the newest Xid)
        "lost_gpus": list(host.lost),
        "not_responding_gpus": list(host.not_responding),
        "driver_up": host.driver_up,
        "xid": [{"gpu": x.gpu, "uuid": x.uuid, "last": x.last, "count": x.count} for x in host.xid],
        "gpus_needing_action": [{"gpu": g, "verdict": v} for g, v in host.needs_action],
        "no_gpu_series": host.no_gpu_series,
        "gpus": [
            {
                "gpu": g.gpu,
                "uuid": g.uuid,
                "model": g.model,
                "util_percent": g.util_percent,
                "memory_used_bytes": g.memory_used_bytes,
                "memory_free_bytes": g.memory_free_bytes,
                "memory_total_bytes": g.memory_total_bytes,
                "power_w": g.power_w,
                "temperature_c": g.temperature_c,
            }
            for g in host.gpus
        ],
    }


def render_json(fleet: Fleet) -> str:
    return json.dumps(fleet_json(fleet), indent=2, sort_keys=False, allow_nan=False)
