"""`gputop query --count N` without -l: N samples one interval apart (issue 18), not at once."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import datetime

import pytest

from gputop.cli import build_parser
from gputop.commands import query
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]


def stamps(out: str) -> list[datetime]:
    return [
        datetime.strptime(line.split(", ")[0], "%Y/%m/%d %H:%M:%S.%f")
        for line in out.splitlines()[1:]
    ]


def test_count_without_loop_samples_one_default_interval_apart(
    box: Box, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(query, "DEFAULT_LOOP_S", 0.25)  # -l's default, shortened for the test
    started = time.monotonic()
    result = run_cli(
        box("demo", wall=None), "query", "--query-gpu=timestamp,index", "-i", "0", "--count", "3"
    )
    took = time.monotonic() - started
    assert result.rc == 0
    times = stamps(result.out)
    assert len(times) == 3
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert all(0.25 - 0.002 <= gap < 0.25 + 0.2 for gap in gaps), gaps  # one interval each
    assert took >= 0.5 - 0.01


def test_the_interval_without_loop_is_the_loop_default_of_5_s() -> None:
    args = build_parser().parse_args(["query", "--query-gpu=index", "--count", "4"])
    assert query._interval_s(args) == query.DEFAULT_LOOP_S == 5.0
    looped = build_parser().parse_args(["query", "--query-gpu=index", "-l"])
    assert query._interval_s(looped) == query.DEFAULT_LOOP_S  # what -l alone means
    one = build_parser().parse_args(["query", "--query-gpu=index", "--count", "1"])
    assert query._interval_s(one) is None  # a single sample waits for nothing
    given = build_parser().parse_args(["query", "--query-gpu=index", "-lms", "200", "--count", "4"])
    assert query._interval_s(given) == 0.2
