"""What the fleet believes of an answer: GPU indices and PIDs that are numbers, readings in
physical range.

Prometheus relays whatever each exporter it scrapes wrote, and anyone who runs one can write
``gpu="²"`` (``int()`` refuses it; it reads ``"٣"``), five thousand digits, ``-5`` stuck processes
or 1e308 MiB (its sum overflows). A series outside these bounds is dropped where the fleet is
built and counted by reason (:func:`screen`), so it is never shown, never counted in an exit code,
and one bad exporter never fails the whole fleet.
"""

from __future__ import annotations

from collections.abc import Mapping

from gputop.fleet.client import MAX_STAMP, Answer

MIB = 1024 * 1024
MAX_GPU_MIB = 16 * 1024 * 1024  # 16 TiB on one GPU: 50 times today's largest
MAX_GPU_BYTES = MAX_GPU_MIB * MIB
MAX_GPU_W = 10_000.0  # a GPU board draws ~1.5 kW at most
MIN_C, MAX_C = -50.0, 200.0  # silicon stops working long before; 255 is a failed sensor
MAX_PROCESSES = 1 << 22  # Linux's PID_MAX_LIMIT: no host has more processes than that
MAX_AGE_S = 1e9  # ~30 years
GPU_DIGITS = 4  # NVML indices are below 64; 4 digits leave room and keep int() cheap
PID_DIGITS = 7  # PID_MAX_LIMIT is 4,194,304
MAX_XID = 65_535.0  # Xid codes are below 200 today; NVML's event data is 64-bit, DCGM's int64
MAX_XID_COUNT = 1e12  # one a microsecond for ten days

# Why a series was skipped (Fleet.skipped's keys).
UNREADABLE = "unreadable (labels not text, or the value not a finite number)"
BAD_GPU = "with a gpu label that is not a GPU index"
OUT_OF_RANGE = "with a value out of physical range"

# Inclusive bounds per query of gputop.fleet.model.QUERIES (the others' values are not read),
# and the queries whose values are counts (a fraction is not a count).
BOUNDS: dict[str, tuple[float, float]] = {
    "up": (0.0, 1.0),
    "scraped": (0.0, MAX_STAMP),
    "used": (0.0, MAX_GPU_MIB),
    "free": (0.0, MAX_GPU_MIB),
    "total": (0.0, MAX_GPU_MIB),
    "util": (0.0, 100.0),
    "power": (0.0, MAX_GPU_W),
    "temp": (MIN_C, MAX_C),
    "stuck": (0.0, MAX_PROCESSES),
    "unattributed": (0.0, MAX_GPU_BYTES),
    "age": (0.0, MAX_AGE_S),
    "lost": (0.0, 1.0),
    "silent": (0.0, 1.0),
    "driver": (0.0, 1.0),
    "xid": (0.0, MAX_XID),
    "xid_count": (0.0, MAX_XID_COUNT),
}
COUNTS = frozenset({"up", "stuck", "lost", "silent", "driver", "xid", "xid_count"})
PERCENT = (0.0, 100.0)  # the history's readings (utilisation, memory used)


def is_number(text: str, digits: int) -> bool:
    """ASCII digits only, at most ``digits`` of them (``str.isdigit`` also passes ``²``)."""
    return 0 < len(text) <= digits and text.isascii() and text.isdigit()


def gpu_label_ok(labels: Mapping[str, str]) -> bool:
    """No ``gpu`` label (dcgm-exporter always has one; a UUID alone places a GPU), or an index."""
    gpu = labels.get("gpu")
    return not gpu or is_number(gpu, GPU_DIGITS)


def in_bounds(value: float, limits: tuple[float, float]) -> bool:
    low, high = limits
    return low <= value <= high


def screen(answers: Mapping[str, Answer]) -> tuple[dict[str, Answer], dict[str, int]]:
    """The answers with every series the fleet cannot believe dropped, and how many were, by
    reason (the client's :attr:`Answer.skipped` counted as :data:`UNREADABLE`)."""
    skipped = dict.fromkeys((UNREADABLE, BAD_GPU, OUT_OF_RANGE), 0)
    screened: dict[str, Answer] = {}
    for key, answer in answers.items():
        skipped[UNREADABLE] += answer.skipped
        series = answer.series
        limits = BOUNDS.get(key)
        if limits is not None:  # one comprehension per answer: ~20,000 series at 4,000 GPUs
            low, high = limits
            kept = tuple(s for s in series if low <= s.value <= high)
            if key in COUNTS:
                kept = tuple(s for s in kept if float(s.value).is_integer())
            skipped[OUT_OF_RANGE] += len(series) - len(kept)
            series = kept if len(kept) != len(series) else series
        kept = tuple(s for s in series if gpu_label_ok(s.labels))
        skipped[BAD_GPU] += len(series) - len(kept)
        series = kept if len(kept) != len(series) else series
        screened[key] = answer if series is answer.series else Answer(answer.at, series)
    return screened, {reason: n for reason, n in skipped.items() if n}


def skipped_note(skipped: Mapping[str, int]) -> str | None:
    """``skipped 3 series Prometheus answered (...): 2 with ..., 1 unreadable ...`` (None: none
    skipped)."""
    total = sum(skipped.values())
    if not total:
        return None
    parts = ", ".join(f"{n} {reason}" for reason, n in skipped.items())
    return f"skipped {total} series Prometheus answered (never shown or counted): {parts}"
