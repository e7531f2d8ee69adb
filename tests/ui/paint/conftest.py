"""The paint tests test the fast paths: they start with them on, whatever GPUTOP_PLAIN_TEXTUAL says.

Tests of the fallbacks turn ``gputop.ui.paint.PLAIN_TEXTUAL`` on themselves.
"""

from __future__ import annotations

import pytest

from gputop.ui import paint


@pytest.fixture(autouse=True)
def _fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paint, "PLAIN_TEXTUAL", False)
