"""The dashboard's start-up order (issue 18): the sampler runs before Textual is loaded, and what
it read before the app was up is the app's first snapshot; nothing slow is loaded for it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pytest

import gputop.sources
import gputop.ui.app
from gputop.engine.model import Snapshot
from gputop.ui import EarlySampler, run_dashboard
from gputop.ui.app import GputopApp
from tests.fakes import FakeSource, make_snapshot
from tests.fresh import modules_after

ROOT = Path(__file__).resolve().parents[2]


def wait_until(condition: Any, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_early_sampler_holds_the_newest_snapshot_until_the_app_starts_it() -> None:
    source = FakeSource([make_snapshot(seq) for seq in (1, 2, 3)])
    early = EarlySampler(source, interval_s=0.05)
    got: list[Snapshot] = []
    try:
        assert wait_until(lambda: len(early.history) >= 2)  # sampling before any app
        same = early.factory(source, got.append, 0.05)
        assert same is early and got == []  # built, not started: still held
        early.start()
        assert got and got[0].seq >= 2  # the newest one read before start(), at once
        assert wait_until(lambda: len(got) >= 3)  # then every one, in order
        seqs = [s.seq for s in got]
        assert seqs == sorted(seqs)
    finally:
        early.stop()
    assert not early.sampler._thread.is_alive()


def test_early_sampler_passes_pause_and_interval_on() -> None:
    early = EarlySampler(FakeSource(), interval_s=1.0)
    try:
        early.factory(FakeSource(), lambda snap: None, 2.0)
        assert early.sampler.interval_s == early.interval_s == 2.0
        early.interval_s = 0.5
        early.paused = True
        assert early.sampler.interval_s == 0.5 and early.sampler.paused and early.paused
        assert early.history is early.sampler.history
    finally:
        early.stop()


def args() -> argparse.Namespace:
    return argparse.Namespace(
        demo=None, scenario=None, interval=1.0, theme=None, audit_log=None, readonly=False
    )


def test_the_first_snapshot_is_read_before_the_app_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = FakeSource()
    monkeypatch.setattr(gputop.sources, "source_from_args", lambda a, **kw: source)
    read_first: list[bool] = []
    make_app = gputop.ui.app.make_app

    def make_app_later(*a: Any, **kw: Any) -> GputopApp:
        read_first.append(wait_until(lambda: source.calls >= 1))
        return make_app(*a, **kw)

    monkeypatch.setattr(gputop.ui.app, "make_app", make_app_later)
    delivered: list[Snapshot] = []

    def run(self: GputopApp, **kw: Any) -> None:
        early = self.sampler
        assert isinstance(early, EarlySampler)
        early._target = delivered.append  # instead of the app's message queue
        wait_until(lambda: len(early.history) >= 1)  # read and enriched while "Textual loads"
        early.start()  # as on_mount does
        wait_until(lambda: bool(delivered))

    monkeypatch.setattr(GputopApp, "run", run)
    assert run_dashboard(args()) == 0
    assert read_first == [True]
    assert delivered and delivered[0].seq == 1  # the first frame's data, there at mount
    assert delivered[0].processes  # enriched: it has its process rows
    assert source.release.is_set()  # closed


def test_the_dashboard_loads_no_chart_library_before_its_first_frame() -> None:
    loaded = modules_after("import gputop.ui.app")
    assert "textual" in loaded
    assert {m for m in loaded if m.split(".")[0] in ("plotext", "textual_plotext")} == set()
    assert "gputop.ui.widgets.plot" not in loaded


def test_a_stopped_early_sampler_delivers_nothing() -> None:
    early = EarlySampler(FakeSource(), interval_s=0.05)
    assert wait_until(lambda: len(early.history) >= 1)
    got: list[Snapshot] = []
    early.factory(FakeSource(), got.append, 0.05)
    early.stop()
    early.start()
    time.sleep(0.1)
    assert got == []
    assert not early.sampler._thread.is_alive()
