"""Fixtures for tests against a real Kubernetes control plane (control_plane.py), started once for this folder.

This folder is to the CRDs, the chart and the operator what tests/interop/java is to the broker: the
same artefacts as the unit tests (tests/operator with KMock, tests/charts offline) met by the real
counterpart, here kube-apiserver with RBAC and admission, the controllers, the scheduler and KWOK.
The binaries come from tools/get_k8s.py (`make test` builds them first; the fixture builds them if
`go` is there). kubectl and helm are the ones tools/get_helm.py puts in .venv/bin.
Without a way to get them, these tests skip with the reason, except under CI=true, where they fail.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.kube.control_plane import E2E_IMAGES, PROCESS_IMAGES, ControlPlane
from tests.kube.kube_api import KubeApi
from tests.kube.pod_runner import PodRunner
from tests.kube.pod_sandbox import e2e_tests_image, shoal_image, spark_image

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "crds"
ESTABLISH_TIMEOUT_S = 60
HELM_COMMAND_TIMEOUT_S = 240


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("shoal_tools_get_k8s", REPO_ROOT / "tools" / "get_k8s.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _root_conftest() -> ModuleType:
    """tests/conftest.py as pytest loaded it (free_port keeps its handed-out set there)."""
    path = (REPO_ROOT / "tests" / "conftest.py").resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return module
    raise AssertionError(f"{path} is not loaded")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI=true: the tests against a real API server must run)")
    pytest.skip(reason)


def venv_tool(name: str) -> Path | None:
    """`name` next to this interpreter (.venv/bin), else in the repo's .venv/bin, else on PATH."""
    for candidate in (Path(sys.executable).parent / name, REPO_ROOT / ".venv" / "bin" / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None


@pytest.fixture(scope="session")
def k8s_bin() -> Path:
    """The folder of kube-apiserver, etcd, kwok & co. (built by tools/get_k8s.py on first use)."""
    get_k8s = _load_tool()
    if get_k8s.cached_bin() is None and shutil.which("go") is None:
        _unavailable("go is not on PATH and the control plane is not built (python3 tools/get_k8s.py)")
    try:
        bin_dir: Path = get_k8s.ensure_binaries()
    except get_k8s.GetK8sError as error:
        _unavailable(f"tools/get_k8s.py failed: {error}")
    return bin_dir


_RUNNING: list[ControlPlane] = []
"""The started control plane, for pytest_runtest_teardown to stop once the last test here is done."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the control plane after this folder's last test (and its module fixtures' teardown) instead of
    letting it idle (about 1 GB and a share of a core) through the rest of the suite: without
    __init__.py files, pytest's package scope is the session."""
    try:
        return (yield)
    finally:
        here = Path(__file__).parent
        if _RUNNING and (nextitem is None or here not in Path(nextitem.path).parents):
            _RUNNING.pop().stop()


@pytest.fixture(scope="session")
def control_plane(k8s_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK with two Ready nodes."""
    if shutil.which("openssl") is None:
        _unavailable("openssl is not on PATH (it makes the control plane's certificates)")
    kubectl = venv_tool("kubectl")
    if kubectl is None:
        _unavailable("kubectl is not in .venv/bin nor on PATH (python3 tools/get_helm.py)")
    assert kubectl is not None
    plane = ControlPlane(
        bin_dir=k8s_bin,
        work_dir=tmp_path_factory.mktemp("kube"),
        kubectl_binary=kubectl,
        free_port=_root_conftest().free_port,
    )
    plane.start()
    _RUNNING.append(plane)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def shoal_crds(control_plane: ControlPlane) -> ControlPlane:
    """The control plane with crds/ applied and Established (as `kubectl apply -f crds/` does it)."""
    control_plane.kubectl("apply", "-f", str(CRD_DIR))
    control_plane.kubectl("wait", "--for=condition=Established", "crd", "--all", f"--timeout={ESTABLISH_TIMEOUT_S}s")
    return control_plane


SHOAL_PROCESS_IMAGE, SPARK_PROCESS_IMAGE = PROCESS_IMAGES
SMALL_STORE_CONFIG = {"mappedFileSizeCommitLog": str(64 * 1024 * 1024), "maxIndexNum": "100000"}
"""spec.config for Brokers of the process runner: 64 MiB segments and a 22 MB IndexFile, not 1 GiB and
420 MB per broker pod (both allocated on disk at start; every pod's volumes stay under the runner's folder)."""


def admin_api(plane: ControlPlane) -> KubeApi:
    assert plane.pki is not None
    admin = plane.pki.identity("shoal-test-admin", "system:masters")
    return KubeApi(plane.server, str(plane.pki.ca_cert), str(admin.cert), str(admin.key))


@pytest.fixture(scope="module")
def pod_runner(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodRunner]:
    """The process runner (pod_runner.py) playing kubelet for pods of the Shoal image on the KWOK nodes,
    for one test module: its sandboxes need mount namespaces, so root and unshare."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("nsenter") is None:
        _unavailable("the process runner needs root, unshare and nsenter (a mount namespace per container)")
    work_dir = tmp_path_factory.mktemp("runner")
    runner = PodRunner(
        admin_api(control_plane),
        work_dir,
        control_plane.node_names,
        {
            SHOAL_PROCESS_IMAGE: shoal_image(),
            SPARK_PROCESS_IMAGE: spark_image(),
            # tests/e2e/run-kind.sh's images: the broker image (twice, for the roll), Spark's, the tests'.
            **dict(zip(E2E_IMAGES, (shoal_image(), shoal_image(), spark_image(), e2e_tests_image()), strict=True)),
        },
        control_plane.server,
    )
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()


class Helm:
    """The helm binary with its homes in a temporary folder, acting in one namespace as the cluster's admin."""

    def __init__(self, binary: Path, home: Path, kubeconfig: Path, namespace: str) -> None:
        self.binary = binary
        self.namespace = namespace
        self.env = {
            **os.environ,
            "HOME": str(home),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
            "KUBECONFIG": str(kubeconfig),
        }

    @classmethod
    def for_cluster(cls, plane: ControlPlane, home: Path, namespace: str) -> Helm:
        binary = venv_tool("helm")
        if binary is None:
            pytest.fail("helm not found in .venv/bin nor on PATH: run `python3 tools/get_helm.py`")
        assert binary is not None
        return cls(binary, home, plane.kubeconfig, namespace)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.binary), *args, "--namespace", self.namespace],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=HELM_COMMAND_TIMEOUT_S,
            check=False,
            cwd=REPO_ROOT,
        )

    def __call__(self, *args: str) -> str:
        result = self.run(*args)
        assert result.returncode == 0, f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
        return result.stdout

    def manifest(self, release: str) -> list[dict[str, Any]]:
        return [doc for doc in yaml.safe_load_all(self("get", "manifest", release)) if doc]

    def uninstall_quietly(self, release: str) -> None:
        """Teardown: remove the release if a test left it installed."""
        self.run("uninstall", release, "--ignore-not-found", "--wait")
