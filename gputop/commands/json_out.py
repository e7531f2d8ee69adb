"""``gputop --json``: the whole snapshot as JSON, with stable field names (no Textual here).

The keys are the field names of the dataclasses in :mod:`gputop.engine.model` (units in the
names), plus ``"schema": 1`` at the top. Enums are written as their values (``"ok"``, ``"compute"``,
``"holder"``), tuples as lists, ``None`` as ``null`` (the driver does not report the field).
Readings that are properties in the model are included too: ``fan_speed_percent`` per GPU,
``command`` per process info and ``state``/``stuck`` per process row. A GPU the driver did not
answer for in time has ``"state": "not-responding"``, its ``stale_s`` (seconds waited) and
``error``; the snapshot's ``driver_note`` names the call that hung. Each GPU has its ``health``
(gputop.engine.gpu_health): ``{"verdict": "reset needed", "reasons": [{"verdict", "evidence",
"source", "meaning", "advice"}, ...]}``, the worst reason first; verdicts are ``ok``,
``degraded``, ``reset needed``, ``reboot needed``, ``replace`` and ``unknown`` (nothing read).
Field names only ever get added within a schema version; a rename or removal bumps ``schema``.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import fields, is_dataclass
from enum import Enum
from typing import Any

from gputop.engine.gpu_health import GpuHealth, assess
from gputop.engine.model import GpuSample, ProcessRow, ProcInfo, Snapshot, SystemInfo
from gputop.engine.sanitize import json_escape, json_safe

SCHEMA_VERSION = 1


def _plain(value: Any) -> Any:
    """Enums to their values, tuples to lists, nested dataclasses to dicts."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


def system_to_dict(system: SystemInfo) -> dict[str, Any]:
    """SystemInfo as a JSON-ready dict."""
    result: dict[str, Any] = _plain(system)
    return result


def gpu_to_dict(gpu: GpuSample) -> dict[str, Any]:
    """One GPU as a JSON-ready dict (``processes`` are NVML's contexts on it)."""
    result: dict[str, Any] = _plain(gpu)
    result["fan_speed_percent"] = gpu.fan_speed_percent
    result["health"] = health_to_dict(assess(gpu))
    return result


def health_to_dict(health: GpuHealth) -> dict[str, Any]:
    """A GPU's health verdict and its reasons (the worst first) as a JSON-ready dict."""
    return {"verdict": health.verdict.value, "reasons": _plain(health.reasons)}


def proc_info_to_dict(info: ProcInfo) -> dict[str, Any]:
    """The OS view of one PID as a JSON-ready dict, with its ``command`` line as one string."""
    result: dict[str, Any] = _plain(info)
    result["command"] = info.command
    return result


def process_row_to_dict(row: ProcessRow) -> dict[str, Any]:
    """One GPU-related process (NVML joined with the OS) as a JSON-ready dict."""
    result: dict[str, Any] = _plain(row)
    result["info"] = proc_info_to_dict(row.info)
    result["state"] = row.state.value
    result["stuck"] = row.stuck
    return result


def snapshot_to_dict(snapshot: Snapshot) -> dict[str, Any]:
    """The whole snapshot as a JSON-ready dict: ``schema``, then the Snapshot fields.

    ``unattributed_memory_bytes`` is a list of ``[gpu index, bytes]`` pairs, as in the model.
    """
    return {
        "schema": SCHEMA_VERSION,
        "seq": snapshot.seq,
        "taken_at_wall": snapshot.taken_at_wall,
        "taken_at_mono": snapshot.taken_at_mono,
        "duration_s": snapshot.duration_s,
        "stale_s": snapshot.stale_s,
        "system": system_to_dict(snapshot.system),
        "gpus": [gpu_to_dict(g) for g in snapshot.gpus],
        "processes": [process_row_to_dict(r) for r in snapshot.processes],
        "unattributed_memory_bytes": _plain(snapshot.unattributed_memory_bytes),
        "holder_scan_note": snapshot.holder_scan_note,
        "hidden_pids_note": snapshot.hidden_pids_note,
        "driver_note": snapshot.driver_note,
        "sampler_restarts": snapshot.sampler_restarts,
        "counters": _plain(snapshot.counters),
    }


def render_json(snapshot: Snapshot, *, indent: int | None = 2) -> str:
    """The snapshot as JSON text (no trailing newline); ``indent=None`` gives one line."""
    separators = (",", ":") if indent is None else None
    # Strings from processes are clean already (gputop.engine.sanitize); json_safe also escapes C1
    # and bidi controls from anywhere else, keeping readable UTF-8 for names and paths.
    return json_safe(
        json.dumps(
            snapshot_to_dict(snapshot), indent=indent, ensure_ascii=False, separators=separators
        )
    )


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def ascii_json(document: str) -> str:
    """The same JSON document in ASCII: every other character written as ``\\uXXXX``.

    JSON's own syntax is ASCII, so such a character can only be inside a string, where the
    escape means the same character: the document stays valid and equal.
    """
    return document if document.isascii() else _NON_ASCII.sub(json_escape, document)


def for_stream(document: str, stream: Any) -> str:
    """``document`` (JSON text) as ``stream`` can carry it: unchanged where it writes UTF-8,
    otherwise in ASCII (an ASCII or ISO-8859-1 locale, PYTHONIOENCODING=ascii).

    Any non-UTF-8 stream gets ASCII, not just the characters it cannot encode: JSON read by
    another program is UTF-8 (RFC 8259), and ASCII is UTF-8 in every such encoding.
    """
    if document.isascii():
        return document
    encoding = getattr(stream, "encoding", None)
    try:
        utf8 = encoding is not None and codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        utf8 = False
    return document if utf8 else ascii_json(document)
