"""Real users for the tests, added for a block and removed after, even on failure.

``useradd --badname`` (``--badnames`` in later shadow releases) takes names its default rules
refuse: markup, CJK. Only root can add one; the tests that need it skip otherwise.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator

import pytest


def _useradd(name: str, uid: int | None) -> subprocess.CompletedProcess[str]:
    extra = [] if uid is None else ["-u", str(uid)]
    for flag in ("--badnames", "--badname"):  # later shadow; shadow 4.13 (Debian 12)
        done = subprocess.run(
            ["useradd", flag, "-M", "-N", "-s", "/usr/sbin/nologin", *extra, name],
            capture_output=True,
            text=True,
            check=False,
        )
        if "unrecognized option" not in done.stderr:
            return done
    return done


@contextlib.contextmanager
def added_user(name: str, *, uid: int | None = None) -> Iterator[pwd.struct_passwd]:
    """A user called ``name`` (no home, no login) for the block; a skip where none can be added.

    One left by a run that was killed is removed first. Its processes must be gone before the
    block ends: userdel refuses a user still running, and that fails the test.
    """
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("adding a user needs root and useradd")
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        subprocess.run(["userdel", name], capture_output=True, check=False)
    done = _useradd(name, uid)
    if done.returncode != 0:
        pytest.skip(f"useradd refuses {name!r}: {done.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        gone = subprocess.run(["userdel", name], capture_output=True, text=True, check=False)
        assert gone.returncode == 0, f"userdel {name!r} failed: {gone.stderr.strip()}"
