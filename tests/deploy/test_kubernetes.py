"""deploy/kubernetes: the manifests parse, validate against Kubernetes' own schemas (when
kubernetes-validate, which bundles them, is installed), hang together (Service -> pods ->
ServiceMonitor), and the container runs a `gputop export` command line our parser accepts."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml

from gputop.cli import build_parser
from gputop.commands.export import parse_listen
from tests.deploy.conftest import DEPLOY

KUBE = DEPLOY / "kubernetes"
REPO = DEPLOY.parent
K8S_VERSIONS = ("1.29.0", "1.33.0")  # an older supported release and a recent one


def _docs(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((KUBE / name).read_text()) if doc]


def _kind(kind: str) -> dict[str, Any]:
    [doc] = [
        d
        for name in ("daemonset.yaml", "servicemonitor.yaml")
        for d in _docs(name)
        if d["kind"] == kind
    ]
    return doc


def _container() -> dict[str, Any]:
    [container] = _kind("DaemonSet")["spec"]["template"]["spec"]["containers"]
    return container


def _expanded(container: dict[str, Any]) -> list[str]:
    """The command as the kubelet runs it: $(VAR) replaced by the container's env (a node name
    for a fieldRef)."""
    env = {e["name"]: e.get("value", "gpu-node-7") for e in container.get("env", [])}
    return [re.sub(r"\$\((\w+)\)", lambda m: env[m[1]], arg) for arg in container["command"]]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_manifests_validate_against_the_kubernetes_schemas(version: str) -> None:
    validator = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    for doc in _docs("daemonset.yaml"):
        validator.validate(doc, version, strict=True)  # raises ValidationError with the path
    # a ServiceMonitor is a CRD of the Prometheus Operator: the bundled schemas do not know it
    [monitor] = _docs("servicemonitor.yaml")
    with pytest.raises(validator.SchemaNotFoundError):
        validator.validate(monitor, version, strict=True)


def test_a_broken_manifest_fails_the_schema_validation() -> None:
    validator = pytest.importorskip("kubernetes_validate", reason="pip install kubernetes-validate")
    daemonset = _kind("DaemonSet")
    daemonset["spec"]["template"]["spec"]["hostPid"] = True  # misspelt field
    with pytest.raises(validator.ValidationError):
        validator.validate(daemonset, K8S_VERSIONS[-1], strict=True)


def test_the_container_runs_a_gputop_export_command_line_we_accept() -> None:
    container = _container()
    argv = _expanded(container)
    assert argv[:2] == ["gputop", "export"]
    args = build_parser().parse_args(argv[1:])
    assert args.command == "export"
    assert args.hostname == "gpu-node-7"  # the node's name, not the pod's
    listen = parse_listen(args.listen)
    assert not listen.loopback  # reachable from Prometheus
    [port] = container["ports"]
    assert (port["name"], port["containerPort"]) == ("metrics", listen.port) == ("metrics", 9400)
    probe = container["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["port"]) == ("/metrics", "metrics")


def test_a_command_line_we_do_not_accept_is_caught() -> None:
    """What the test above relies on: our parser refuses a wrong option (exit 2)."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["export", "--listen-address", "0.0.0.0:9400"])
    assert exited.value.code == 2


def test_the_pod_sees_the_hosts_processes_and_takes_no_gpu() -> None:
    pod = _kind("DaemonSet")["spec"]["template"]["spec"]
    assert pod["hostPID"] is True
    assert pod["runtimeClassName"] == "nvidia"
    container = _container()
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    resources = container.get("resources", {})
    for part in ("requests", "limits"):
        assert "nvidia.com/gpu" not in resources.get(part, {})
    assert {"SYS_PTRACE"} <= set(container["securityContext"]["capabilities"]["add"])
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/var/log/pods"]["readOnly"] is True


def test_service_and_servicemonitor_select_the_exporter() -> None:
    daemonset, service, monitor = _kind("DaemonSet"), _kind("Service"), _kind("ServiceMonitor")
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [port] = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    namespace = service["metadata"]["namespace"]
    assert daemonset["metadata"]["namespace"] == namespace
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [namespace]
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == (port["name"], "/metrics")


def test_the_dockerfile_copies_what_exists_and_runs_the_exporter() -> None:
    lines = (KUBE / "Dockerfile").read_text().splitlines()
    for line in lines:
        if line.startswith("COPY "):
            *sources, _dest = line.split()[1:]
            for source in sources:
                assert (REPO / source).exists(), source
    entry = next(line for line in lines if line.startswith("ENTRYPOINT "))
    cmd = next(line for line in lines if line.startswith("CMD "))
    argv = yaml.safe_load(entry.removeprefix("ENTRYPOINT ")) + yaml.safe_load(
        cmd.removeprefix("CMD ")
    )
    assert argv[0] == "gputop"
    assert build_parser().parse_args(argv[1:]).command == "export", shlex.join(argv)
