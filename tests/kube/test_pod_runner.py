"""The process runner as kubelet: a pod of the Shoal image becomes a real `shoal namesrv` on its pod IP with
its ConfigMap mounted where the pod says, Ready comes from its readinessProbe, deletion stops the process
before the pod goes, and a Job's pod runs its command to completion so the Job controller completes it."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.conftest import wait_until
from tests.kube.conftest import SHOAL_PROCESS_IMAGE
from tests.kube.control_plane import ControlPlane
from tests.kube.pod_runner import PodRunner

NAMESPACE = "runner"
WAIT_S = 60
NAME_SERVER_PORT = 9876


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane, pod_runner: PodRunner) -> Iterator[str]:
    control_plane.kubectl("create", "namespace", NAMESPACE)
    wait_until(
        lambda: control_plane.kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False).returncode == 0,
        WAIT_S,
        what="the namespace's default ServiceAccount (the controller manager makes it)",
    )
    try:
        yield NAMESPACE
    finally:
        control_plane.kubectl("delete", "namespace", NAMESPACE, f"--timeout={WAIT_S}s", check=False)


def _apply(plane: ControlPlane, *objects: dict[str, Any]) -> None:
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(objects))


def _pod(plane: ControlPlane, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(plane.kubectl("get", "pod", name, "-n", NAMESPACE, "-o", "json").stdout)
    return found


def _listening(ip: str, port: int) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=1):
            return True
    except OSError:
        return False


def test_a_name_server_pod_runs_on_its_pod_ip_and_becomes_ready(
    control_plane: ControlPlane, pod_runner: PodRunner, namespace: str
) -> None:
    """A bare pod with args [namesrv], a fieldRef env, a ConfigMap volume and a tcpSocket readinessProbe:
    `kubectl wait --for=condition=Ready` returns, the process listens on the pod IP only, and an exec in
    its sandbox sees the ConfigMap at the mountPath."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo", "namespace": namespace},
              "data": {"greeting": "hello"}}  # fmt: skip
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ns-0", "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "nameserver",
                    "image": SHOAL_PROCESS_IMAGE,
                    "args": ["namesrv"],
                    "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                    "readinessProbe": {
                        "exec": {"command": ["sh", "-c", "grep -q hello /etc/demo/greeting && test $POD_NAME = ns-0"]},
                        "periodSeconds": 1,
                    },
                    "livenessProbe": {"tcpSocket": {"port": NAME_SERVER_PORT}},
                    "volumeMounts": [{"name": "demo", "mountPath": "/etc/demo"}],
                }
            ],
            "volumes": [{"name": "demo", "configMap": {"name": "demo"}}],
        },
    }
    _apply(control_plane, config, pod)
    control_plane.kubectl("wait", "--for=condition=Ready", "pod/ns-0", "-n", namespace, f"--timeout={WAIT_S}s")
    ip = _pod(control_plane, "ns-0")["status"]["podIP"]
    assert ip.startswith("127.65.")
    wait_until(lambda: _listening(ip, NAME_SERVER_PORT), WAIT_S, what="the NameServer on its pod IP")
    assert not _listening("127.0.0.1", NAME_SERVER_PORT) or ip == "127.0.0.1"
    starts = pod_runner.events_of("start", f"{namespace}/ns-0")
    assert [e.container for e in starts] == ["nameserver"]

    control_plane.kubectl("delete", "pod", "ns-0", "-n", namespace, f"--timeout={WAIT_S}s")
    assert not _listening(ip, NAME_SERVER_PORT)
    stops = pod_runner.events_of("stop", f"{namespace}/ns-0")
    assert stops and stops[0].detail == "grace 30 s", stops


def test_a_job_pod_runs_to_completion_and_the_job_completes(
    control_plane: ControlPlane, pod_runner: PodRunner, namespace: str
) -> None:
    """A Job whose command writes to an emptyDir shared with its init container: the runner runs both,
    sets the pod Succeeded and the Job controller marks the Job complete; a failing Job fails."""

    def job(name: str, script: str) -> dict[str, Any]:
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "initContainers": [{"name": "init", "image": SHOAL_PROCESS_IMAGE,
                                            "command": ["sh", "-c", "echo ready > /scratch/marker"],
                                            "volumeMounts": [{"name": "work", "mountPath": "/scratch"}]}],
                        "containers": [{"name": "main", "image": SHOAL_PROCESS_IMAGE,
                                        "command": ["sh", "-c", script],
                                        "volumeMounts": [{"name": "work", "mountPath": "/scratch"}]}],
                        "volumes": [{"name": "work", "emptyDir": {}}],
                    }
                },
            },
        }  # fmt: skip

    _apply(control_plane, job("ok", "grep -q ready /scratch/marker && shoal --help > /dev/null"), job("bad", "exit 3"))
    control_plane.kubectl("wait", "--for=condition=Complete", "job/ok", "-n", namespace, f"--timeout={WAIT_S}s")
    control_plane.kubectl("wait", "--for=condition=Failed", "job/bad", "-n", namespace, f"--timeout={WAIT_S}s")
    exits = {e.pod.rsplit("/", 1)[1].rsplit("-", 1)[0] + ":" + e.container: e.detail
             for e in pod_runner.events_of("exit", f"{namespace}/")}  # fmt: skip
    assert exits == {"ok:init": "code 0", "ok:main": "code 0", "bad:init": "code 0", "bad:main": "code 3"}, exits
