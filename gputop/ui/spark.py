"""Sparkline data for a GPU panel: peaks of fixed-size sample buckets, kept up incrementally.

Each character of a panel's sparkline is the peak of ``per`` consecutive samples, with buckets
aligned to sample numbers so a finished bucket never changes. Recomputing 300 samples per GPU
per tick cost more than drawing the panel; this reads only the new samples from History.
A panel with lines to spare draws its sparklines as charts several lines tall (:func:`chart`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from itertools import islice

from gputop.engine.history import History
from gputop.ui import text
from gputop.ui.text import spark_char, sparkline

METRICS = ("utilization_gpu_percent", "memory_used_bytes")


class PeakBuckets:
    """The peaks of the last ``width`` buckets of ``per`` samples each (None: no known value)."""

    def __init__(self, width: int, per: int) -> None:
        self.width, self.per = width, per
        self._done: deque[float | None] = deque(maxlen=max(0, width - 1))
        self._bucket: int | None = None  # the number of the bucket being filled
        self._peak: float | None = None
        self._finished = 0  # buckets appended to _done so far
        # The characters of _done for one scale: a finished bucket never changes, so each tick
        # works out only the characters of buckets that finished since the last call.
        self._chars: deque[str] = deque(maxlen=max(0, width - 1))
        self._chars_key: tuple[float, int] | None = None  # (top, _finished) _chars is for

    def add(self, number: int, value: float | None) -> None:
        """Sample ``number`` (counted since start; increasing) has ``value``."""
        bucket = number // self.per
        if self._bucket is not None and bucket != self._bucket:
            skipped = min(bucket - self._bucket - 1, self.width)
            self._done.append(self._peak)
            self._done.extend([None] * skipped)
            self._finished += 1 + skipped
            self._peak = None
        self._bucket = bucket
        if value is not None and (self._peak is None or value > self._peak):
            self._peak = value

    def peaks(self) -> list[float | None]:
        """Oldest first, exactly ``width`` long (unfilled buckets are None)."""
        if self.width <= 0:
            return []
        shown = [*self._done, self._peak] if self._bucket is not None else []
        return [None] * (self.width - len(shown)) + shown

    def text(self, top: float | None) -> str:
        """:meth:`peaks` as a sparkline scaled to ``top`` (None: to the highest peak shown)."""
        if self.width <= 0:
            return ""
        if not top or top <= 0:  # the scale moves with the data: every character may change
            return sparkline(self.peaks(), self.width, top)
        chars = self._chars
        key = self._chars_key
        new = self._finished - key[1] if key is not None and key[0] == top else -1
        if new < 0 or new > len(self._done):
            chars.clear()
            chars.extend(spark_char(v, top) for v in self._done)
        elif new:
            chars.extend(
                spark_char(v, top) for v in islice(self._done, len(self._done) - new, None)
            )
        self._chars_key = (top, self._finished)
        last = spark_char(self._peak, top) if self._bucket is not None else ""
        return ("".join(chars) + last).rjust(self.width)


def chart(values: Sequence[float | None], top: float | None, height: int) -> list[str]:
    """``values`` as columns of a chart ``height`` lines tall, top line first.

    Each column is a bar in eighths of a line scaled to ``top`` (None or 0: the highest value);
    a known value, even 0, shows at least its lowest eighth (as one-line sparklines do), an
    unknown one is blank.
    """
    if height <= 0:
        return []
    known = [v for v in values if v is not None]
    scale = top if top and top > 0 else (max(known) if known else 0.0)
    eighths = height * 8
    levels = [
        -1
        if v is None or scale <= 0
        else max(1, min(eighths, round(max(0.0, v) / scale * eighths)))
        for v in values
    ]
    blocks = text.GLYPHS.spark
    return [
        "".join(blocks[max(0, min(8, level - 8 * (height - 1 - row)))] for level in levels)
        for row in range(height)
    ]


class GpuSparks:
    """Utilisation and memory buckets of one GPU, fed from a History."""

    def __init__(self, gpu_index: int, window: int) -> None:
        self.gpu_index, self.window = gpu_index, window
        self.util = PeakBuckets(0, 1)
        self.memory = PeakBuckets(0, 1)
        self._seen = 0  # History.count when last fed

    def update(self, history: History, width: int) -> None:
        """Take the samples History gained since the last call; re-bucket when ``width`` changes."""
        count = history.count
        # Until the window has filled, buckets grow with the history (the line is full at once);
        # after that they are fixed, and each change of size re-reads at most one window.
        per = max(1, math.ceil(min(count, self.window) / width)) if width > 0 else 1
        new = count - self._seen
        if (width, per) != (self.util.width, self.util.per) or new > self.window or new < 0:
            self.util, self.memory = PeakBuckets(width, per), PeakBuckets(width, per)
            new = min(count, width * per)
        if new <= 0 or width <= 0:
            self._seen = count
            return
        end, (util, memory) = history.tail(self.gpu_index, METRICS, new)
        start = end - len(util)
        for i, (u, m) in enumerate(zip(util, memory, strict=True)):
            self.util.add(start + i, u)
            self.memory.add(start + i, m)
        self._seen = end
