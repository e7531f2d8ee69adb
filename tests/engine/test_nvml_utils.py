"""Per-process utilisation samples as the NVML reader takes them: the newest of each process,
and which processes' readings moved since the last call (issue 17: only those are made anew)."""

from __future__ import annotations

from gputop.engine.nvml.processes import Utils
from gputop.engine.nvml.pynvml_private import UNPACK_UTIL


def _samples(*rows: tuple[int, int, int, int]) -> bytes:
    """(pid, time stamp, SM %, memory %) as the driver's C array."""
    return b"".join(UNPACK_UTIL.pack(pid, stamp, sm, mem, 0, 0) for pid, stamp, sm, mem in rows)


def test_the_newest_sample_of_each_process_is_kept_in_any_order() -> None:
    utils = Utils.of(_samples((5, 20, 9, 4), (6, 15, 3, 1), (5, 10, 1, 2), (7, 5, 0, 0)))
    assert utils.by_pid() == {5: (9, 4), 6: (3, 1), 7: (0, 0)}


def test_one_sample_each_is_read_as_columns() -> None:
    utils = Utils.of(_samples((5, 20, 9, 4), (6, 20, 3, 1)))
    assert (list(utils.pids), list(utils.sm), list(utils.mem)) == ([5, 6], [9, 3], [4, 1])


def test_only_the_processes_whose_readings_moved_are_named() -> None:
    before = Utils.of(_samples((5, 1, 9, 4), (6, 1, 3, 1), (7, 1, 0, 0)))
    same = Utils.of(_samples((5, 2, 9, 4), (6, 2, 3, 1), (7, 2, 0, 0)))  # only the stamps
    assert same.moved_since(before) == {}
    moved = Utils.of(_samples((5, 3, 9, 5), (6, 3, 3, 1), (7, 3, 8, 0)))
    assert moved.moved_since(before) == {5: (9, 5), 7: (8, 0)}
    # Another order, one process without a sample now: compared by PID, the missing one unknown.
    other = Utils.of(_samples((7, 4, 0, 0), (5, 4, 9, 4)))
    assert other.moved_since(before) == {6: (0, 0)}
