"""Fixtures for engine tests: a spawner that always cleans up, and a device directory of our own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engine.spawn import Spawner


@pytest.fixture
def spawner() -> Iterator[Spawner]:
    s = Spawner()
    try:
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def dev_dir(tmp_path: Path) -> Path:
    """A device directory of our own with nvidia0, nvidiactl and a file that must not match."""
    d = tmp_path / "dev"
    d.mkdir()
    for name in ("nvidia0", "nvidiactl", "other0"):
        (d / name).write_bytes(b"\0" * 4096)
    return d
