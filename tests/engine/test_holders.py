"""scan_holders on real processes holding our own device files, and on a fake /proc tree."""

from __future__ import annotations

import ast
import os
import pwd
from pathlib import Path

import pytest

from gputop.engine.holders import NOT_ROOT_NOTE, held_by, scan_holders
from tests.engine.fake_proc import PYTHON_MAPS, add_pid
from tests.engine.spawn import HOLD, MAP_AND_CLOSE, Spawner


def test_open_device_file_is_found(spawner: Spawner, dev_dir: Path) -> None:
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    scan = scan_holders(str(dev_dir))
    assert scan.holders[proc.pid] == (str(dev_dir / "nvidia0"),)
    assert scan.scanned > 1
    if os.geteuid() == 0:
        assert scan.note is None or "not root" not in scan.note


def test_mapped_device_file_is_found_after_fd_closed(spawner: Spawner, dev_dir: Path) -> None:
    proc = spawner.ready(MAP_AND_CLOSE, str(dev_dir / "nvidiactl"))
    fds = {os.readlink(f"/proc/{proc.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{proc.pid}/fd")}
    assert str(dev_dir / "nvidiactl") not in fds  # only the mapping is left
    assert scan_holders(str(dev_dir)).holders[proc.pid] == (str(dev_dir / "nvidiactl"),)


def test_other_files_are_not_holders(spawner: Spawner, dev_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "nvidia0"  # right name, wrong directory
    elsewhere.write_bytes(b"x")
    a = spawner.ready(HOLD, str(dev_dir / "other0"))
    b = spawner.ready(HOLD, str(elsewhere))
    holders = scan_holders(str(dev_dir)).holders
    assert a.pid not in holders
    assert b.pid not in holders


def test_fake_proc_tree(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    proc = tmp_path / "proc"
    python = PYTHON_MAPS
    maps_line = f"7f00-7f01 rw-s 00000000 00:05 123   {dev}/nvidia-uvm (deleted)\n"
    add_pid(proc, 10, {"0": "/dev/null", "5": f"{dev}/nvidia1"}, python)
    add_pid(proc, 11, {}, python + maps_line)
    add_pid(proc, 12, {"3": "socket:[1234]"}, python)
    # No memory map: a kernel thread or a zombie, which hold no files; its fds are not read.
    add_pid(proc, 13, {"5": f"{dev}/nvidia0"}, "")
    (proc / "self").mkdir()  # not a PID: ignored
    scan = scan_holders(str(dev), proc_root=str(proc))
    assert scan.holders == {10: (f"{dev}/nvidia1",), 11: (f"{dev}/nvidia-uvm",)}
    assert scan.scanned == 4
    assert scan.denied == 0


def test_missing_proc_root_is_a_note(tmp_path: Path) -> None:
    scan = scan_holders(str(tmp_path), proc_root=str(tmp_path / "absent"))
    assert scan.holders == {}
    assert scan.note is not None
    assert "cannot read" in scan.note


def test_not_root_says_so_once(spawner: Spawner, dev_dir: Path) -> None:
    if os.geteuid() != 0:
        assert scan_holders(str(dev_dir)).note == NOT_ROOT_NOTE
        return
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user to scan as")
    root_holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # drop to nobody and scan for real, in a forked copy of this process
        try:
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            scan = scan_holders(str(dev_dir))
            os.write(write_end, repr((sorted(scan.holders), scan.note, scan.denied)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        text = pipe.read()
    os.waitpid(child, 0)
    holders, note, denied = ast.literal_eval(text)
    assert root_holder.pid not in holders  # a root process's fds are hidden from nobody
    assert note == NOT_ROOT_NOTE
    assert denied > 1


def test_denied_as_root_is_worded_differently(dev_dir: Path) -> None:
    scan = scan_holders(str(dev_dir), euid=0)
    if scan.denied:
        assert scan.note is not None
        assert "even as root" in scan.note
    else:
        assert scan.note is None


def test_held_by_one_pid(dev_dir: Path) -> None:
    assert held_by(os.getpid(), str(dev_dir)) == ()
    with open(dev_dir / "nvidiactl", "rb"):
        assert held_by(os.getpid(), str(dev_dir)) == (str(dev_dir / "nvidiactl"),)
