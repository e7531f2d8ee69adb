"""The kill audit log's start-up check: an unwritable log fails when gputop starts, not at the
first signal (the dashboard builds its Killer, and imports gputop.engine.kill, only when first
needed)."""

from __future__ import annotations

import os
from pathlib import Path

from gputop.engine.private_file import UnsafeFile, open_private
from gputop.errors import UsageError


def check_audit_log(path: str | Path) -> None:
    """Create ``path`` (0600) if absent and check gputop may append to it; else UsageError."""
    try:
        os.close(open_private(path, append=True))
    except UnsafeFile as exc:
        raise UsageError(f"cannot write audit log {path}: {exc.reason}") from None
