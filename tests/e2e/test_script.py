"""Checks of the e2e harness that run everywhere: run-kind.sh parses and skips cleanly without its
tools, and the kind config and e2e manifests are valid (kubernetes-validate strict for built-in
kinds, the CRD schemas and the operator's own spec parser for Broker and Topic)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

E2E_DIR = Path(__file__).resolve().parent
REPO_ROOT = E2E_DIR.parents[1]
SCRIPT = E2E_DIR / "run-kind.sh"
KUBERNETES_VERSION = "1.30.0"
SCRIPT_TIMEOUT_S = 30
HOST_ROOT = "/var/lib/shoal"
NODES_PLACEHOLDER = "__SHOAL_E2E_NODES_DIR__"
SKIPPING_TOOLS = ("kind", "docker", "podman")


def _documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _crd_schema(kind: str) -> dict[str, Any]:
    crd = yaml.safe_load((REPO_ROOT / "crds" / f"{kind.lower()}.yaml").read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _path_without(tools: tuple[str, ...]) -> str:
    """The current PATH minus every directory holding one of `tools`."""
    kept = [
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not any((Path(d) / t).exists() for t in tools)
    ]
    return os.pathsep.join(kept)


def _run_script(path: str, *, ci: bool = False) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash, "bash is required"
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    return subprocess.run(
        [bash, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
        env={**env, "PATH": path, **({"CI": "true"} if ci else {})},
        check=False,
    )


def test_run_kind_script_parses() -> None:
    """`bash -n` accepts run-kind.sh."""
    result = subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


def test_run_kind_script_skips_without_kind_or_a_container_engine() -> None:
    """With kind, docker and podman off PATH the script exits 0 at once and says why it skipped."""
    result = _run_script(_path_without(SKIPPING_TOOLS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("SKIP: kind is not installed"), result.stdout
    assert "kind create cluster" not in result.stdout + result.stderr


def test_run_kind_script_fails_instead_of_skipping_under_ci() -> None:
    """CI=true: a missing tool is a failure (exit 1) that names it, never a skip."""
    result = _run_script(_path_without(SKIPPING_TOOLS), ci=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith("FAIL: kind is not installed"), result.stdout
    assert "SKIP" not in result.stdout


def test_run_kind_script_skips_when_the_engine_daemon_is_unreachable(tmp_path: Path) -> None:
    """kind present but `docker info` failing (no daemon): SKIP naming the engine, exit 0."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name, body in (("kind", "exit 0"), ("docker", 'echo "Cannot connect to the Docker daemon" >&2; exit 1')):
        stub = fake_bin / name
        stub.write_text(f"#!/bin/sh\n{body}\n")
        stub.chmod(0o755)
    result = _run_script(f"{fake_bin}{os.pathsep}{_path_without(SKIPPING_TOOLS)}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("SKIP: docker is installed but its daemon is not reachable"), result.stdout


def test_kind_config_mounts_the_host_root_on_every_node() -> None:
    """1 control plane + 2 workers, each with an extraMount at the chart's hostPath root."""
    (config,) = _documents(E2E_DIR / "kind-config.yaml")
    assert config["kind"] == "Cluster" and config["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    assert [node["role"] for node in config["nodes"]] == ["control-plane", "worker", "worker"]
    host_paths = []
    for node in config["nodes"]:
        (mount,) = node["extraMounts"]
        assert mount["containerPath"] == HOST_ROOT
        assert mount["hostPath"].startswith(NODES_PLACEHOLDER + "/")
        host_paths.append(mount["hostPath"])
    assert len(set(host_paths)) == len(host_paths), "nodes must not share a host directory"
    script = SCRIPT.read_text()
    assert NODES_PLACEHOLDER in script, "run-kind.sh must substitute the placeholder"
    for path in host_paths:
        assert f"$WORK/nodes/{path.rsplit('/', 1)[1]}" in script, f"run-kind.sh does not create {path}"
    chart_values = yaml.safe_load((REPO_ROOT / "charts" / "shoal" / "values.yaml").read_text())
    assert HOST_ROOT in chart_values["hostRoots"]


@pytest.mark.parametrize("manifest", sorted(p.name for p in (E2E_DIR / "manifests").glob("*.yaml")))
def test_e2e_manifests_are_valid(manifest: str) -> None:
    """Built-in kinds pass kubernetes-validate (strict); Broker and Topic pass their CRD schema."""
    for doc in _documents(E2E_DIR / "manifests" / manifest):
        if doc["apiVersion"].startswith("shoal.io/"):
            jsonschema.validate(doc, _crd_schema(doc["kind"]))
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        assert doc["metadata"].get("namespace", "shoal-e2e") == "shoal-e2e" or doc["kind"] == "Namespace"


def test_e2e_broker_is_one_master_and_one_sync_slave_the_operator_accepts() -> None:
    """The e2e Broker passes the operator's own checks (the CEL rules' Python twin) with the chart's roots."""
    from shoal.operator.spec import broker_spec_from, topic_spec_from

    (broker,) = _documents(E2E_DIR / "manifests" / "broker.yaml")
    spec = broker_spec_from({**broker, "metadata": {**broker["metadata"], "uid": "e2e", "generation": 1}}, (HOST_ROOT,))
    assert spec.groups == 1 and spec.replicas_per_group == 2
    assert broker["spec"]["replication"]["mode"] == "Sync"
    assert broker["spec"]["storage"]["hostPath"]["root"] == HOST_ROOT
    (topic,) = _documents(E2E_DIR / "manifests" / "topic.yaml")
    topic_spec_from(topic)
    assert topic["spec"]["clusterRef"]["name"] == broker["metadata"]["name"]


def test_runner_job_matches_the_script_and_the_tests() -> None:
    """The Job runs the image run-kind.sh builds, and sets only SHOAL_E2E_* variables test_kind.py reads."""
    docs = _documents(E2E_DIR / "manifests" / "runner.yaml")
    (job,) = [doc for doc in docs if doc["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    script = SCRIPT.read_text()
    assert f"\nbuild {container['image']} -f " in script
    assert f"job {job['metadata']['name']}" in script
    assert "tests/e2e/test_kind.py" in container["args"]
    tests = (E2E_DIR / "test_kind.py").read_text()
    for item in container["env"]:
        if item["name"].startswith("SHOAL_E2E_"):
            assert f'"{item["name"]}"' in tests or item["name"] == "SHOAL_E2E_KUBECONFIG", item["name"]
    broker_image = yaml.safe_load((E2E_DIR / "manifests" / "broker.yaml").read_text())["spec"]["image"]
    assert f"\nbuild {broker_image} -f " in script
    roll_image = next(i["value"] for i in container["env"] if i["name"] == "SHOAL_E2E_ROLL_IMAGE")
    assert f"tag {broker_image} {roll_image}" in script
    spark_image = next(i["value"] for i in container["env"] if i["name"] == "SHOAL_E2E_SPARK_IMAGE")
    assert spark_image.startswith("__") and f"s|{spark_image}|$SPARK_IMAGE|" in script, "placeholder not substituted"


def test_test_image_dockerfile_copies_existing_paths() -> None:
    """Every COPY source in tests/e2e/Dockerfile exists in the repository (the build context)."""
    sources = re.findall(r"^COPY\s+(\S+)\s+\S+$", (E2E_DIR / "Dockerfile").read_text(), flags=re.MULTILINE)
    assert sources
    for source in sources:
        assert (REPO_ROOT / source).exists(), source
