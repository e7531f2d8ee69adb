"""run_dashboard: options reach the app, the source is always closed, bad themes are refused."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

import gputop.sources
from gputop.errors import UsageError
from gputop.ui import run_dashboard
from gputop.ui.app import GputopApp
from tests.fakes import FakeSource


def args(**overrides: Any) -> argparse.Namespace:
    base = {
        "demo": None,
        "scenario": None,
        "interval": 2.0,
        "theme": None,
        "audit_log": None,
        "readonly": False,
        "no_color": False,
    }
    return argparse.Namespace(**(base | overrides))


@pytest.fixture
def fake_source(monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    source = FakeSource()
    monkeypatch.setattr(gputop.sources, "source_from_args", lambda a, **options: source)
    return source


def test_options_reach_the_app_and_the_source_is_closed(
    fake_source: FakeSource, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran: list[GputopApp] = []
    monkeypatch.setattr(GputopApp, "run", lambda self, **kw: ran.append(self))
    log = tmp_path / "audit.jsonl"
    assert run_dashboard(args(readonly=False, audit_log=str(log), theme="nord")) == 0
    app = ran[0]
    assert app.interval_s == 2.0 and app.requested_theme == "nord"
    assert app.killer is not None and app.killer.audit_log == log
    assert fake_source.release.is_set()  # FakeSource.close() was called


def test_readonly_builds_no_killer(
    fake_source: FakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[GputopApp] = []
    monkeypatch.setattr(GputopApp, "run", lambda self, **kw: ran.append(self))
    run_dashboard(args(readonly=True))
    assert ran[0].killer is None and ran[0].readonly


def test_unknown_theme_is_a_usage_error_and_the_driver_is_closed(
    fake_source: FakeSource,
) -> None:
    # The driver process starts first (it opens the driver while Textual loads): a bad theme
    # found then closes it again.
    with pytest.raises(UsageError, match="unknown theme 'nope'"):
        run_dashboard(args(theme="nope"))
    assert fake_source.release.is_set()


def test_unwritable_audit_log_is_a_usage_error_and_closes_the_source(
    fake_source: FakeSource, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="cannot write audit log"):
        run_dashboard(args(audit_log=str(tmp_path / "missing" / "audit.jsonl")))
    assert fake_source.release.is_set()


def test_no_color_flag_sets_no_color_for_textual(
    fake_source: FakeSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    monkeypatch.setattr(os, "environ", environ)  # run_dashboard sets NO_COLOR: keep it here
    seen: list[bool] = []
    monkeypatch.setattr(GputopApp, "run", lambda self, **kw: seen.append(self.no_color))
    run_dashboard(args(no_color=True))
    assert seen == [True]
    assert environ["NO_COLOR"] == "1"
