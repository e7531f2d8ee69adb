"""Which container (and Kubernetes pod) a process runs in, from /proc/PID/cgroup alone.

Runtimes name a container's cgroup after its id: ``docker-<id>.scope`` or ``/docker/<id>``
(Docker), ``cri-containerd-<id>.scope`` (containerd), ``crio-<id>.scope`` (CRI-O),
``libpod-<id>.scope`` (Podman), ``machine-<name>.scope`` or ``systemd-nspawn@<name>.service``
(systemd-nspawn), ``lxc.payload.<name>`` (LXC); a Kubernetes pod's cgroup carries the pod's UID
(``pod<uid>`` or ``kubepods-...-pod<uid_with_underscores>.slice``). No runtime CLI or socket is
ever asked: names come from the runtimes' own files where this user may read them
(:class:`ContainerNames`), else a container is shown by its short id.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from gputop.engine.model import Container, is_runtime_id
from gputop.engine.sanitize import clean

_ID = r"([0-9a-f]{64})"
# (runtime, pattern on one cgroup path); the last component that matches names the container.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("docker", re.compile(rf"^docker-{_ID}\.scope$")),
    ("containerd", re.compile(rf"^cri-containerd-{_ID}\.scope$")),
    ("cri-o", re.compile(rf"^crio-{_ID}\.scope$")),
    ("podman", re.compile(rf"^libpod-{_ID}\.scope$")),
    ("podman", re.compile(rf"^libpod-{_ID}$")),
    ("nspawn", re.compile(r"^systemd-nspawn@(.+)\.service$")),
    ("lxc", re.compile(r"^lxc\.payload\.(.+)$")),
)
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_MACHINE = re.compile(r"^machine-(.+)\.scope$")


def _unescape(name: str) -> str:
    """systemd's unit-name escaping (``\\x2d`` is ``-``)."""
    return re.sub(r"\\x([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), name)


def _from_path(path: str) -> Container | None:
    parts = [p for p in path.split("/") if p]
    pod_uid = None
    for part in parts:
        if m := _POD.search(part):
            pod_uid = m.group(1).replace("_", "-")
    for i in range(len(parts) - 1, -1, -1):
        part = parts[i]
        parent = parts[i - 1] if i > 0 else ""
        for runtime, pattern in _PATTERNS:
            if m := pattern.match(part):
                ident = _unescape(m.group(1))
                return Container(runtime, clean(ident), pod_uid=pod_uid)
        # cgroupfs drivers: /docker/<id>, /lxc/<name> (v1 and v2 alike).
        if i == 1 and parent == "docker" and is_runtime_id(part):
            return Container("docker", part, pod_uid=pod_uid)
        if i == 1 and parent == "lxc":
            return Container("lxc", clean(part), name=clean(part))
        if pod_uid is not None and is_runtime_id(part):
            return Container("kubernetes", part, pod_uid=pod_uid)
        if parent == "machine.slice" and (m := _MACHINE.match(part)):
            name = _unescape(m.group(1))
            if not name.startswith("qemu-"):  # a libvirt VM, not a container
                return Container("nspawn", clean(name), name=clean(name))
    return None


def parse_cgroup(text: str) -> Container | None:
    """The container named by a /proc/PID/cgroup text (cgroup v1 or v2), None if none (pure).

    v2's unified line (``0::``) first; on v1, the first controller line that names one.
    """
    lines = [line.split(":", 2) for line in text.splitlines() if line.count(":") >= 2]
    lines.sort(key=lambda f: f[0] != "0")
    for fields in lines:
        found = _from_path(fields[2])
        if found is not None:
            if found.runtime in ("nspawn", "lxc") and found.name is None:
                found = replace(found, name=found.id)  # the id is the machine's name
            return found
    return None


def container_of(pid: int | str, proc_root: str = "/proc") -> Container | None:
    """The container of one process from its /proc/PID/cgroup (None: none, or unreadable)."""
    # os.read, not open(): half the cost, and this runs for every full reading of a process.
    try:
        fd = os.open(f"{proc_root}/{pid}/cgroup", os.O_RDONLY)
    except (OSError, ValueError):
        return None
    try:
        raw = os.read(fd, 65536)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _parsed_cgroup(raw)


@functools.lru_cache(maxsize=256)
def _parsed_cgroup(raw: bytes) -> Container | None:
    """parse_cgroup of a file's bytes, kept: a box's processes share a few cgroups (the
    refreshes of 5,000 GPU processes parse the same text again and again)."""
    return parse_cgroup(raw.decode("utf-8", "surrogateescape"))


def own_container(proc_root: str = "/proc", root: str = "/") -> Container | None:
    """The container gputop itself runs in, None on the host.

    Its cgroup path names it unless the runtime gave it a cgroup namespace (Docker's default on
    cgroup v2: ``0::/``); then the files runtimes put in a container say so, and Docker and
    Podman make its host name the short id.
    """
    found = container_of("self", proc_root)
    if found is not None:
        return found
    for marker, runtime in (("/.dockerenv", "docker"), ("/run/.containerenv", "podman")):
        if os.path.exists(os.path.join(root, marker.lstrip("/"))):
            return Container(runtime, clean(socket.gethostname()))
    if os.path.isdir(os.path.join(root, "var/run/secrets/kubernetes.io")):
        return Container("kubernetes", clean(socket.gethostname()))
    return None


def hidden_pids_note(hidden: int, me: Container | None) -> str | None:
    """One line for ``hidden`` GPU processes of other PID namespaces, when gputop runs in a
    container (``me``): what is missing and how to fix it. None on the host or with none hidden."""
    if not hidden or me is None:
        return None
    return (
        f"gputop runs in a container ({me.runtime} {me.label}) that cannot see the host's "
        f"processes: {hidden} GPU process{'es' if hidden != 1 else ''} show only memory and the "
        "driver's name; run it with --pid=host (hostPID: true on Kubernetes) or on the host"
    )


# A runtime's state files, read to name containers: at most this much of one file.
_MAX_STATE_BYTES = 4 * 1024 * 1024
NAMES_EVERY_S = 10.0  # how long a listing of the runtimes' state is reused


class ContainerNames:
    """Names for containers and pods from the runtimes' own files, read at most every
    ``NAMES_EVERY_S`` (a listing, not a file per process):

    - Kubernetes: ``/var/log/pods/<namespace>_<pod>_<uid>/`` (the kubelet's log layout) and
      ``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``;
    - Docker: ``/var/lib/docker/containers/<id>/config.v2.json`` (its "Name");
    - Podman: ``containers.json`` of root's and each home's storage (its "names").

    ``root`` is prepended to every path (tests; gputop in a container with the host's / mounted).
    Unreadable files are skipped: the container keeps its short id.
    """

    def __init__(self, root: str = "/", clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self._clock = clock
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._pods: dict[str, tuple[str, str]] = {}  # pod uid -> (namespace, pod)
        self._by_id: dict[str, tuple[str, str | None, str | None]] = {}  # id -> (name, pod, ns)
        self._docker: dict[str, str | None] = {}  # id -> name (None: unreadable), bounded below

    def _path(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def name(self, container: Container) -> Container:
        """``container`` with its name, pod and namespace filled where the runtime's files say."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= NAMES_EVERY_S:
                self._read_at = now
                self._pods = self._read_pods()
                self._by_id = self._read_kube_containers() | self._read_podman()
            name, pod, namespace = self._by_id.get(container.id, (None, None, None))
            if container.pod_uid is not None and container.pod_uid in self._pods:
                namespace, pod = self._pods[container.pod_uid]
            if name is None and container.runtime == "docker":
                name = self._docker_name(container.id)
        return replace(
            container,
            name=container.name or name,
            pod=pod or container.pod,
            namespace=namespace or container.namespace,
        )

    def _read_pods(self) -> dict[str, tuple[str, str]]:
        pods = {}
        for entry in _listdir(self._path("/var/log/pods")):
            fields = entry.split("_")
            if len(fields) == 3:
                namespace, pod, uid = fields
                pods[uid] = (clean(namespace), clean(pod))
        return pods

    def _read_kube_containers(self) -> dict[str, tuple[str, str | None, str | None]]:
        out: dict[str, tuple[str, str | None, str | None]] = {}
        for entry in _listdir(self._path("/var/log/containers")):
            m = re.match(r"^(.+)_(.+)_(.+)-([0-9a-f]{64})\.log$", entry)
            if m:
                pod, namespace, name, ident = m.groups()
                out[ident] = (clean(name), clean(pod), clean(namespace))
        return out

    def _read_podman(self) -> dict[str, tuple[str, str | None, str | None]]:
        stores = ["/var/lib/containers/storage"]
        stores += [
            os.path.join("/home", home, ".local/share/containers/storage")
            for home in _listdir(self._path("/home"))
        ]
        out: dict[str, tuple[str, str | None, str | None]] = {}
        for store in stores:
            data = _read_json(self._path(f"{store}/overlay-containers/containers.json"))
            for item in data if isinstance(data, list) else []:
                if not isinstance(item, dict):
                    continue
                ident, names = item.get("id"), item.get("names")
                if isinstance(ident, str) and isinstance(names, list) and names:
                    out[ident] = (clean(str(names[0])), None, None)
        return out

    def _docker_name(self, ident: str) -> str | None:
        if ident not in self._docker:
            if len(self._docker) >= 4096:  # bounded: containers come and go on a long run
                self._docker.clear()
            data = _read_json(self._path(f"/var/lib/docker/containers/{ident}/config.v2.json"))
            name = data.get("Name") if isinstance(data, dict) else None
            self._docker[ident] = clean(name.lstrip("/")) if isinstance(name, str) else None
        return self._docker[ident]


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_json(path: str) -> object:
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_STATE_BYTES + 1)
    except OSError:
        return None
    if len(raw) > _MAX_STATE_BYTES:
        return None
    import json  # here: only a box with containers to name needs it, not every dashboard

    try:
        return json.loads(raw)
    except ValueError:
        return None
