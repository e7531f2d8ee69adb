"""UI test fixtures: a fixed time zone (times on screen) and no blinking cursors."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The header shows the sample's local time of day: make it the same everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def _no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blinking cursors make screenshots depend on timing (as harlequin does)."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "cursor_blink", False)
