"""gputop inside a container without the host's PIDs: one line says what is missing and why."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from gputop.cli import main
from gputop.engine import enrich as enrich_module
from gputop.engine.containers import hidden_pids_note, own_container
from gputop.engine.enrich import enrich
from gputop.engine.model import Container, GpuProcess, ProcessType, ProcState
from tests.fakes import make_gpu, make_snapshot

ID = "5e" * 32
# Waits for a line on stdin (the test moves it into a cgroup meanwhile), then says where it is.
WHERE_AM_I = (
    "import sys; sys.stdin.readline(); from gputop.engine.containers import own_container; "
    "print(own_container())"
)


def test_gputop_finds_the_container_it_runs_in_from_its_real_cgroup(
    make_cgroup: Callable[[str], Path],
) -> None:
    group = make_cgroup(f"gputop-test-{uuid.uuid4().hex[:8]}/system.slice/docker-{ID}.scope")
    proc = subprocess.Popen(
        [sys.executable, "-c", WHERE_AM_I],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    (group / "cgroup.procs").write_text(str(proc.pid))
    out, _ = proc.communicate("\n", timeout=60)
    assert out.strip() == repr(Container("docker", ID))


def _vanished_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_driver_pid_this_container_cannot_see_gets_the_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A PID the driver lists that is not in this PID namespace (a host PID seen from a container).
    pid = _vanished_pid()
    listed = GpuProcess(pid=pid, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=1 << 30)
    snap = make_snapshot(gpus=(make_gpu(0, processes=(listed,)),))
    monkeypatch.setattr(enrich_module, "_own_container", lambda: Container("docker", ID))
    # In its own PID namespace (on the host it would be shown as exited: tests/engine/test_exited).
    monkeypatch.setattr(enrich_module, "_sees_driver_pids", lambda: False)
    got = enrich(snap)
    assert got.processes[0].state is ProcState.NAMESPACE
    assert got.processes[0].used_memory_bytes == 1 << 30  # still shown with its memory
    note = got.hidden_pids_note
    assert note is not None and f"docker {ID[:12]}" in note and "--pid=host" in note
    # On the host, or with the simulated driver's stand-in PIDs: no note.
    monkeypatch.setattr(enrich_module, "_own_container", lambda: None)
    assert enrich(snap).hidden_pids_note is None
    monkeypatch.setattr(enrich_module, "_own_container", lambda: Container("docker", ID))
    simulated = replace(snap, system=replace(snap.system, simulated=True))
    assert enrich(simulated).hidden_pids_note is None


def test_once_and_json_carry_the_note(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(enrich_module, "_own_container", lambda: Container("docker", ID))
    monkeypatch.setattr(enrich_module, "_sees_driver_pids", lambda: False)  # its own PID namespace
    real_enrich = enrich_module.enrich

    def as_on_a_real_box(snapshot, **kwargs):  # type: ignore[no-untyped-def]
        system = replace(snapshot.system, simulated=False)
        return real_enrich(replace(snapshot, system=system), **kwargs)

    monkeypatch.setattr(enrich_module, "enrich", as_on_a_real_box)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--demo=dgx", "--once", "-p"]) == 0
    out, err = capsys.readouterr()
    (note,) = [line for line in err.splitlines() if "--pid=host" in line]
    assert note.startswith("gputop: note: gputop runs in a container (docker ")
    assert "--pid=host" not in out  # stdout stays the one-liner scripts parse
    assert main(["--demo=dgx", "--json"]) == 0
    assert "--pid=host" in json.loads(capsys.readouterr().out)["hidden_pids_note"]


def test_own_container_from_the_runtimes_marker_files(tmp_path: Path) -> None:
    # Docker on cgroup v2 gives a container its own cgroup namespace: its cgroup says "0::/".
    proc_root = tmp_path / "proc"
    (proc_root / "self").mkdir(parents=True)
    (proc_root / "self" / "cgroup").write_text("0::/\n")
    root = tmp_path / "root"
    root.mkdir()
    assert own_container(str(proc_root), str(root)) is None
    (root / ".dockerenv").touch()
    found = own_container(str(proc_root), str(root))
    assert found is not None and found.runtime == "docker"
    (proc_root / "self" / "cgroup").write_text(f"0::/system.slice/docker-{ID}.scope\n")
    assert own_container(str(proc_root), str(root)) == Container("docker", ID)


def test_hidden_pids_note_only_in_a_container_with_hidden_pids() -> None:
    me = Container("docker", ID)
    assert hidden_pids_note(0, me) is None
    assert hidden_pids_note(3, None) is None
    note = hidden_pids_note(1, me)
    assert note is not None and "1 GPU process show" in note and "hostPID: true" in note
