"""What changed since the last tick: the one place that says how gputop avoids redoing work.

At thousands of GPU processes (MPS, many small inference workers) nearly every row is what it
was a second ago. Each tick therefore works out *what changed* once, as a value, and the later
steps do only that much work. The rules:

1. **Values, never objects.** A change is decided by equality (``==``). No module may give a
   meaning to ``is`` or ``id()`` of a value another module handed it. A producer may pass an
   unchanged value on as the same object (the driver's reader keeps an unchanged process entry,
   the pipe's decoder keeps its last objects, the OS reader an unchanged reading, the enricher an
   unchanged row): that only makes the equality test here cheap (an object is equal to itself,
   found in C), it never decides the answer. This module is the only one that looks at identity,
   and only as that shortcut (:func:`same`, :func:`_replaced`).
2. **Once per tick, by its owner.** :class:`ListTracker` says which GPUs' process lists changed
   and which driver entries were replaced (:class:`ListChanges`); the sampler makes one a tick
   and hands it to the enricher (which makes its own when given none). :class:`RowTracker`,
   kept by the enricher, says which process rows were added, changed or removed
   (:class:`gputop.engine.model.RowChanges`, carried as ``Snapshot.changes``): History and the
   process table read that instead of comparing rows.
3. **A change is from a numbered tick; a consumer checks that it is its own.** Ticks are
   numbered process-wide (two trackers never share a number). A consumer applies a change only
   when its ``since`` is the tick that consumer saw last (:meth:`RowChanges.follows`); the same
   ``tick`` again (a stale re-send) changed nothing; anything else (none, a skipped tick, another
   sampler) means: take every row afresh. So a dropped snapshot costs a whole pass, never a
   wrong screen.
4. **Keys are process identities.** A row is keyed by ``ProcessRow.identity``, (PID, create
   time): a reused PID is another process (a removal and an addition), and a process not read
   yet (no create time) becomes another key once read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, count
from operator import attrgetter, is_not
from typing import TypeVar

from gputop.engine.model import GpuProcess, GpuSample, ProcessRow, RowChanges, RowKey, row_identity

_ticks = count(1)  # process-wide: see rule 3
_pid_of = attrgetter("pid")

T = TypeVar("T")


def same(a: object, b: object) -> bool:
    """Equal values (rule 1): found at once when the producer passed the object on."""
    return a is b or a == b


def _replaced(
    before: Sequence[T], now: Sequence[T], key: Callable[[T], object]
) -> list[tuple[T, T]] | None:
    """The (before, now) pairs of the places whose value changed, when every place holds the
    same ``key`` as before (the same process); else None. In C but for the candidates: the
    places that do not hold the object they held (a few hundred of 5,000 on a quiet tick)."""
    if len(before) != len(now):
        return None
    differ = list(map(is_not, before, now))
    olds, news = list(compress(before, differ)), list(compress(now, differ))
    if list(map(key, olds)) != list(map(key, news)):
        return None
    return [(old, new) for old, new in zip(olds, news, strict=True) if old != new]


@dataclass(frozen=True, slots=True)
class ListChanges:
    """What changed in the GPUs' process lists (as the driver gives them) since tick ``since``.

    ``whole``: they cannot be compared (the first tick, a process came or went, the GPUs
    changed): ``gpus`` then names every GPU and ``entries`` is empty: take the lists afresh.
    """

    tick: int
    since: int
    whole: bool
    gpus: frozenset[int]  # indices of the GPUs whose lists changed
    # (before, now) for each entry whose reading changed, the same PID in the same place
    entries: tuple[tuple[GpuProcess, GpuProcess], ...]
    pids: frozenset[int]  # every PID listed now

    def follows(self, tick: int) -> bool:
        """Whether this is the change from tick ``tick`` (a consumer's last) and a partial one."""
        return not self.whole and tick != 0 and self.since == tick


class ListTracker:
    """Makes a :class:`ListChanges` for each snapshot's GPUs (one tracker per sampler)."""

    def __init__(self) -> None:
        self._lists: tuple[tuple[int, tuple[GpuProcess, ...]], ...] | None = None
        self._tick = 0
        self._pids: frozenset[int] = frozenset()

    def track(self, gpus: Sequence[GpuSample]) -> ListChanges:
        """The change from the lists of the last call to those of ``gpus``."""
        lists = tuple((g.index, g.processes) for g in gpus)
        last, since = self._lists, self._tick
        self._lists, tick = lists, next(_ticks)
        self._tick = tick
        pairs = _list_pairs(last, lists)
        if pairs is None:
            self._pids = frozenset().union(*(map(_pid_of, listed) for _, listed in lists))
            return ListChanges(tick, since, True, frozenset(i for i, _ in lists), (), self._pids)
        gpus_changed = frozenset(new.gpu_index for _, new in pairs)
        return ListChanges(tick, since, False, gpus_changed, tuple(pairs), self._pids)


def _list_pairs(
    last: tuple[tuple[int, tuple[GpuProcess, ...]], ...] | None,
    lists: tuple[tuple[int, tuple[GpuProcess, ...]], ...],
) -> list[tuple[GpuProcess, GpuProcess]] | None:
    """The replaced entries of every GPU, or None when the lists cannot be compared."""
    if last is None or len(last) != len(lists):
        return None
    pairs: list[tuple[GpuProcess, GpuProcess]] = []
    for (index, old), (new_index, new) in zip(last, lists, strict=True):
        if index != new_index:
            return None
        if old is new:  # the shortcut of rule 1: the same tuple is an equal one
            continue
        replaced = _replaced(old, new, _pid_of)
        if replaced is None:
            return None  # a process came or went, or moved
        pairs += replaced
    return pairs


class RowTracker:
    """Makes the :class:`RowChanges` of each call's rows (kept by the enricher)."""

    def __init__(self) -> None:
        self._rows: tuple[ProcessRow, ...] = ()
        self._tick = 0

    def track(self, rows: tuple[ProcessRow, ...]) -> RowChanges:
        """The change from the rows of the last call to ``rows``."""
        last, since = self._rows, self._tick
        self._rows, tick = rows, next(_ticks)
        self._tick = tick
        if since == 0:
            return RowChanges(tick, 0, added=rows)
        pairs = _replaced(last, rows, row_identity)
        if pairs is not None:  # the same processes in the same places (a quiet tick)
            return RowChanges(tick, since, changed=tuple(new for _, new in pairs))
        before: dict[RowKey, ProcessRow] = dict(zip(map(row_identity, last), last, strict=True))
        now: dict[RowKey, ProcessRow] = dict(zip(map(row_identity, rows), rows, strict=True))
        changed = tuple(
            row for key, row in now.items() if key in before and not same(before[key], row)
        )
        return RowChanges(
            tick,
            since,
            added=tuple(row for key, row in now.items() if key not in before),
            changed=changed,
            removed=tuple(key for key in before if key not in now),
        )

    def forget(self) -> None:
        """Start afresh: the next rows are all new (after a call that failed half way)."""
        self._rows, self._tick = (), 0
