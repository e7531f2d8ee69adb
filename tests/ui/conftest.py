"""UI test fixtures: no blinking cursors (the time zone is pinned in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blinking cursors make screenshots depend on timing (as harlequin does)."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "cursor_blink", False)
