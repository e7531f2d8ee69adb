"""UI test fixtures: no blinking cursors (the time zone is pinned in tests/conftest.py), and the
process table's numbers drawn on every snapshot."""

from __future__ import annotations

import pytest

from gputop.ui.widgets import process_table

# The product's cadence of the process table's numbers, before the fixture below pins it.
PRODUCT_TABLE_REFRESH_S = process_table.TABLE_REFRESH_S


@pytest.fixture(autouse=True)
def _no_blink(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blinking cursors make screenshots depend on timing (as harlequin does)."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "cursor_blink", False)


@pytest.fixture(autouse=True)
def _table_every_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table draws every snapshot's numbers: most UI tests post snapshots a second apart and
    check what each one shows. tests/ui/test_table_cadence.py tests the product's cadence."""
    monkeypatch.setattr(process_table, "TABLE_REFRESH_S", 0.0)
