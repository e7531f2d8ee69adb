"""Containers and pods from /proc/PID/cgroup: recorded texts of each runtime, and real cgroups."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.engine import containers
from gputop.engine.containers import ContainerNames, container_of, parse_cgroup
from gputop.engine.model import Container
from gputop.engine.procs import ProcReader
from tests.engine.spawn import Spawner

ID = "3f4e" * 16
POD_UID = "8a1b2c3d-4e5f-6789-abcd-ef0123456789"
V1_OTHERS = "".join(f"{n}:{c}:/\n" for n, c in ((8, "pids"), (7, "blkio"), (3, "cpuset")))

RECORDED = [
    # (what, /proc/PID/cgroup, runtime, id, name, pod uid)
    ("docker, systemd driver", f"0::/system.slice/docker-{ID}.scope\n", "docker", ID, None, None),
    (
        "docker, cgroupfs driver, cgroup v1",
        f"12:memory:/docker/{ID}\n{V1_OTHERS}1:name=systemd:/docker/{ID}\n",
        "docker",
        ID,
        None,
        None,
    ),
    (
        "Kubernetes on containerd, systemd driver",
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
        f"{POD_UID.replace('-', '_')}.slice/cri-containerd-{ID}.scope\n",
        "containerd",
        ID,
        None,
        POD_UID,
    ),
    (
        "Kubernetes, cgroupfs driver, cgroup v1",
        f"{V1_OTHERS}4:memory:/kubepods/burstable/pod{POD_UID}/{ID}\n",
        "kubernetes",
        ID,
        None,
        POD_UID,
    ),
    (
        "Kubernetes on CRI-O",
        "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
        f"{POD_UID.replace('-', '_')}.slice/crio-{ID}.scope\n",
        "cri-o",
        ID,
        None,
        POD_UID,
    ),
    (
        "rootless Podman",
        "0::/user.slice/user-1000.slice/user@1000.service/user.slice/"
        f"libpod-{ID}.scope/container\n",
        "podman",
        ID,
        None,
        None,
    ),
    ("Podman, cgroupfs", f"0::/libpod_parent/libpod-{ID}/ctr\n", "podman", ID, None, None),
    (
        "systemd-nspawn",
        "0::/machine.slice/systemd-nspawn@debian\\x2dbox.service/payload\n",
        "nspawn",
        "debian-box",
        "debian-box",
        None,
    ),
    (
        "machinectl",
        "0::/machine.slice/machine-fedora.scope/payload\n",
        "nspawn",
        "fedora",
        "fedora",
        None,
    ),
    ("LXC", "0::/lxc.payload.web1/init.scope\n", "lxc", "web1", "web1", None),
]


@pytest.mark.parametrize(
    ("text", "runtime", "ident", "name", "pod_uid"),
    [r[1:] for r in RECORDED],
    ids=[r[0] for r in RECORDED],
)
def test_each_runtimes_cgroup_names_its_container(
    text: str, runtime: str, ident: str, name: str | None, pod_uid: str | None
) -> None:
    found = parse_cgroup(text)
    assert found == Container(runtime, ident, name=name, pod_uid=pod_uid)


@pytest.mark.parametrize(
    "text",
    [
        "0::/user.slice/user-1000.slice/session-3.scope\n",  # a login session
        "0::/system.slice/nvidia-persistenced.service\n",  # a service
        "0::/machine.slice/machine-qemu\\x2d1\\x2dvm.scope/libvirt\n",  # a VM's helper
        f"0::/system.slice/docker-{ID}.scope.bak\n",  # not the runtime's name
        f"0::/docker/{ID[:40]}\n",  # not an id
        "0::/\n",
        "",
        "garbage without colons",
    ],
)
def test_a_process_outside_containers_has_none(text: str) -> None:
    assert parse_cgroup(text) is None


def test_short_id_and_label() -> None:
    plain = Container("docker", ID)
    assert plain.short_id == ID[:12] and plain.label == ID[:12]
    assert Container("docker", ID, name="trainer").label == "trainer"
    assert Container("lxc", "web1", name="web1").short_id == "web1"


def test_hostile_machine_names_are_cleaned() -> None:
    found = parse_cgroup("0::/lxc.payload.a\x1b[2Jb\u202e/init.scope\n")
    assert found is not None
    assert "\x1b" not in found.id and "\u202e" not in found.id
    assert "\x1b" not in (found.name or "")


@pytest.mark.parametrize(
    ("relative", "runtime", "pod_uid"),
    [
        (f"system.slice/docker-{ID}.scope", "docker", None),
        (
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
            f"{POD_UID.replace('-', '_')}.slice/cri-containerd-{ID}.scope",
            "containerd",
            POD_UID,
        ),
    ],
)
def test_a_real_process_in_a_real_cgroup_is_found_in_its_container(
    make_cgroup: Callable[[str], Path],
    spawner: Spawner,
    relative: str,
    runtime: str,
    pod_uid: str | None,
) -> None:
    group = make_cgroup(f"gputop-test-{uuid.uuid4().hex[:8]}/{relative}")
    proc = spawner.start("import time; time.sleep(60)")
    assert container_of(proc.pid) is None
    (group / "cgroup.procs").write_text(str(proc.pid))
    try:
        assert container_of(proc.pid) == Container(runtime, ID, pod_uid=pod_uid)
    finally:
        proc.kill()
        proc.wait()


def test_container_of_a_gone_pid_is_none(spawner: Spawner) -> None:
    proc = spawner.start("pass")
    proc.wait()
    assert container_of(proc.pid) is None


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_names_come_from_the_runtimes_files(tmp_path: Path) -> None:
    other = "9c" * 32
    (tmp_path / f"var/log/pods/ml-team_trainer-7f9c_{POD_UID}/worker").mkdir(parents=True)
    logs = tmp_path / "var/log/containers"
    logs.mkdir(parents=True)
    (logs / f"trainer-7f9c_ml-team_worker-{ID}.log").touch()
    docker = tmp_path / f"var/lib/docker/containers/{other}"
    docker.mkdir(parents=True)
    (docker / "config.v2.json").write_text(json.dumps({"Name": "/jupyter\x1b[31m"}))
    podman = tmp_path / "home/ann/.local/share/containers/storage/overlay-containers"
    podman.mkdir(parents=True)
    third = "7d" * 32
    (podman / "containers.json").write_text(json.dumps([{"id": third, "names": ["finetune"]}]))
    clock = _Clock()
    names = ContainerNames(str(tmp_path), clock=clock)

    pod = names.name(Container("containerd", ID, pod_uid=POD_UID))
    assert (pod.name, pod.pod, pod.namespace) == ("worker", "trainer-7f9c", "ml-team")
    named = names.name(Container("docker", other)).name
    assert named is not None and named.startswith("jupyter") and "\x1b" not in named
    assert names.name(Container("podman", third)).name == "finetune"
    unknown = names.name(Container("docker", "1a" * 32))
    assert unknown.name is None and unknown.label == "1a" * 6

    # The listing is reused for NAMES_EVERY_S, then read again.
    new_uid = str(uuid.UUID(int=7))
    (tmp_path / f"var/log/pods/infer_server-0_{new_uid}").mkdir()
    later = Container("containerd", "2b" * 32, pod_uid=new_uid)
    assert names.name(later).pod is None
    clock.now += containers.NAMES_EVERY_S
    assert (names.name(later).pod, names.name(later).namespace) == ("server-0", "infer")


def test_the_process_reader_gives_each_process_its_container(
    make_cgroup: Callable[[str], Path], spawner: Spawner, tmp_path: Path
) -> None:
    logs = tmp_path / "var/log/containers"
    logs.mkdir(parents=True)
    (logs / f"trainer-0_ml_worker-{ID}.log").touch()
    group = make_cgroup(f"gputop-test-{uuid.uuid4().hex[:8]}/system.slice/docker-{ID}.scope")
    inside, outside = (spawner.start("import time; time.sleep(60)") for _ in range(2))
    (group / "cgroup.procs").write_text(str(inside.pid))
    try:
        reader = ProcReader(containers=ContainerNames(str(tmp_path)))
        # From /proc (read_many) and from psutil (a fresh reading) alike.
        for infos in (
            reader.read_many([inside.pid, outside.pid]),
            {p: reader.read(p, fresh=True) for p in (inside.pid, outside.pid)},
        ):
            box = infos[inside.pid].container
            assert box is not None and (box.runtime, box.id, box.name) == ("docker", ID, "worker")
            assert infos[outside.pid].container is None
        # Kept between full readings, as the command line is.
        assert reader.read_many([inside.pid])[inside.pid].container == box
    finally:
        inside.kill()
        inside.wait()
