"""Run code in a fresh interpreter on this checkout's gputop: which modules it loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules_after(code: str) -> set[str]:
    """The names in ``sys.modules`` once ``code`` has run in a new Python process."""
    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's gputop
    )
    return set(out.stdout.split())
