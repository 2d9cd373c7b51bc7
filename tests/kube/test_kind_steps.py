"""tests/e2e/run-kind.sh's steps 4-6 against this control plane, with the process runner in place of kind's
nodes: `helm install` with the e2e image (the runner plays the operator's pod, in-cluster with the chart's
ServiceAccount), tests/e2e/manifests/{namespace,broker,topic}.yaml until `kubectl wait` says Ready, then
tests/e2e/test_kind.py as the Job of manifests/runner.yaml, inside the cluster as on kind. Only kind can
show what needs containers: images, Pod Security on real pods, network isolation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.kube.conftest import Helm
from tests.kube.control_plane import ControlPlane
from tests.kube.pod_runner import PodRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
E2E_DIR = REPO_ROOT / "tests" / "e2e"
OPERATOR_NAMESPACE = "shoal-system"
NAMESPACE = "shoal-e2e"
SPARK_IMAGE = "shoal-spark:e2e"
READY_TIMEOUT_S = 240
TESTS_TIMEOUT_S = 1200
TEARDOWN_TIMEOUT_S = 80
STREAM_NODE_PLACEHOLDER = "__SHOAL_E2E_STREAM_NODE__"


@pytest.fixture(scope="module")
def e2e_cluster(
    shoal_crds: ControlPlane, pod_runner: PodRunner, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """Steps 4 and 5 of run-kind.sh: the chart with the e2e image, then the e2e Broker and Topic Ready,
    and the StreamAnalysis test's claim."""
    plane = shoal_crds
    helm = Helm.for_cluster(plane, tmp_path_factory.mktemp("helm-e2e"), OPERATOR_NAMESPACE)
    helm("install", "shoal", str(REPO_ROOT / "charts" / "shoal"), "--create-namespace",
         "--set", "image.repository=shoal", "--set", "image.tag=e2e", "--set", "image.pullPolicy=IfNotPresent",
         "--set", "hostRoots={/var/lib/shoal}", "--wait", "--timeout=180s")  # fmt: skip
    try:
        plane.kubectl("apply", "-f", str(E2E_DIR / "manifests" / "namespace.yaml"))
        plane.kubectl(
            "apply", "-f", str(E2E_DIR / "manifests" / "broker.yaml"), "-f", str(E2E_DIR / "manifests" / "topic.yaml")
        )
        for what in ("broker/e2e", "topic/e2e-events"):
            result = plane.kubectl(
                "wait", "--for=condition=Ready", what, "-n", NAMESPACE, f"--timeout={READY_TIMEOUT_S}s", check=False
            )
            assert result.returncode == 0, f"{what}: {result.stderr}\n{_operator_log(pod_runner)}"
        # The StreamAnalysis test's claim, its PV pinned to one node as run-kind.sh pins it to a worker.
        stream_state = (E2E_DIR / "manifests" / "stream-state.yaml").read_text()
        plane.kubectl("apply", "-f", "-", input_text=stream_state.replace(STREAM_NODE_PLACEHOLDER, plane.node_names[0]))
        yield plane
    finally:
        plane.kubectl("delete", "jobs,storeanalyses,streamanalyses,topics,brokers", "--all", "-n", NAMESPACE,
                      f"--timeout={TEARDOWN_TIMEOUT_S}s", check=False)  # fmt: skip
        plane.kubectl("delete", "namespace", NAMESPACE, f"--timeout={TEARDOWN_TIMEOUT_S}s", check=False)
        plane.kubectl("delete", "persistentvolume", "shoal-e2e-stream-state", "--ignore-not-found", check=False)
        helm.uninstall_quietly("shoal")
        plane.kubectl("delete", "namespace", OPERATOR_NAMESPACE, f"--timeout={TEARDOWN_TIMEOUT_S}s", check=False)


def _operator_log(runner: PodRunner) -> str:
    logs = sorted((runner.work_dir / "logs").glob(f"{OPERATOR_NAMESPACE}_shoal-operator-*_operator.log"))
    return logs[-1].read_text(errors="replace")[-4000:] if logs else "(no operator log)"


def test_kind_suite_runs_as_a_job_inside_the_cluster(e2e_cluster: ControlPlane, pod_runner: PodRunner) -> None:
    """Step 6: manifests/runner.yaml with the Spark image; the Job's pytest runs every test of
    tests/e2e/test_kind.py in-cluster (NameServer by its Service name, brokers by pod IP) and passes."""
    plane = e2e_cluster
    runner_yaml = (E2E_DIR / "manifests" / "runner.yaml").read_text().replace("__SHOAL_E2E_SPARK_IMAGE__", SPARK_IMAGE)
    plane.kubectl("apply", "-f", "-", input_text=runner_yaml)

    def finished() -> bool:
        status = json.loads(plane.kubectl("get", "job", "e2e-runner", "-n", NAMESPACE, "-o", "json").stdout)["status"]
        return bool(status.get("succeeded") or status.get("failed"))

    wait_until(finished, TESTS_TIMEOUT_S, interval_s=5, what="the e2e-runner Job to finish")
    status = json.loads(plane.kubectl("get", "job", "e2e-runner", "-n", NAMESPACE, "-o", "json").stdout)["status"]
    (log,) = sorted((pod_runner.work_dir / "logs").glob(f"{NAMESPACE}_e2e-runner-*_pytest.log"))
    output = log.read_text(errors="replace")
    assert status.get("succeeded") == 1, f"{output[-6000:]}\noperator:\n{_operator_log(pod_runner)}"
    summary = output.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary and "failed" not in summary, output[-3000:]
