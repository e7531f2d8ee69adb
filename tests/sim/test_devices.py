"""The simulated box's private device folder, made and removed with plain os calls."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from gputop.sim import devices


def test_the_folder_is_made_where_tempfile_would_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile asks the environment again
    assert devices.temp_dir() == tempfile.gettempdir() == str(tmp_path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert devices.temp_dir() == tempfile.gettempdir()


def test_a_private_folder_is_fresh_0700_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    dev = devices.make_private(2)
    other = devices.make_private(2)
    root = os.path.dirname(dev)
    assert dev != other and os.path.dirname(root) == str(tmp_path)
    assert os.path.basename(root).startswith(f"{devices.PREFIX}{os.getpid()}-")
    assert stat.S_IMODE(os.stat(root).st_mode) == stat.S_IMODE(os.stat(dev).st_mode) == 0o700
    assert sorted(os.listdir(dev)) == ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    devices.remove(dev)
    assert not os.path.exists(root) and os.path.isdir(os.path.dirname(other))
    devices.remove(other)
    assert os.listdir(tmp_path) == []


def test_removing_a_folder_never_follows_a_link(tmp_path: Path) -> None:
    target = tmp_path / "not-ours"
    (target / "inner").mkdir(parents=True)
    (target / "keep").write_text("x")
    ours = tmp_path / "ours"
    (ours / "dev").mkdir(parents=True)
    (ours / "dev" / "nvidia0").write_text("")
    (ours / "dev" / "link").symlink_to(target)
    (tmp_path / "link-to-ours").symlink_to(target)
    devices.remove_tree(str(tmp_path / "link-to-ours"))
    devices.remove_tree(str(ours))
    assert not ours.exists()
    assert (target / "keep").is_file() and (target / "inner").is_dir()
