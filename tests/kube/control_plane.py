"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK with simulated nodes, each a local process built by tools/get_k8s.py.

The API server runs as a production one would: TLS with a CA of its own (made with openssl),
client-certificate authentication, RBAC authorization, the default admission plugins and
service-account tokens signed by a key made here. The controller manager and the scheduler log in
with their own system identities, so they get only their bootstrap RBAC grants. Pod IPs come from
KWOK out of POD_CIDR, inside 127.0.0.0/8, so that a local process can listen on a pod's address.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

POD_CIDR = "127.64.0.0/16"
SERVICE_CIDR = "10.0.0.0/24"
"""ClusterIPs are only records here: nothing routes them and nothing is sent to them."""
NODE_IP = "127.0.0.1"
NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_COUNT = 2
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
START_TIMEOUT_S = 90.0
"""Each component is ready in 1-10 s on 2 busy cores; 90 s means it will not come up."""
STOP_TIMEOUT_S = 15.0
POLL_INTERVAL_S = 0.2
CERT_DAYS = 2
LOG_TAIL_LINES = 30
PROCESS_IMAGES = ("shoal.test/shoal:process", "shoal.test/shoal-spark:process")
E2E_IMAGES = ("shoal:e2e", "shoal:e2e-roll", "shoal-spark:e2e", "shoal-e2e-tests:e2e")
"""The images tests/e2e/run-kind.sh builds; the runner plays them too (tests/kube/test_kind_steps.py)."""
"""Pods of these images are run as local processes by tests/kube/pod_runner.py; KWOK's pod stages
(Running, Ready, Job completion, deletion) skip them, as kubelet's work is the runner's there."""
OPENSSL_TIMEOUT_S = 30.0


class ControlPlaneError(Exception):
    """A component did not start; the message carries the tail of its log."""


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=OPENSSL_TIMEOUT_S)


@dataclass(frozen=True)
class Identity:
    """A client certificate signed by the cluster CA: CN is the user, O the group."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    service_account_key: Path
    service_account_public_key: Path

    @classmethod
    def create(cls, directory: Path) -> Pki:
        """A CA, the API server's serving certificate (SANs for loopback and the in-cluster names)
        and the service-account signing key pair."""
        directory.mkdir(parents=True, exist_ok=True)
        pki = cls(
            ca_cert=directory / "ca.crt",
            ca_key=directory / "ca.key",
            serving_cert=directory / "apiserver.crt",
            serving_key=directory / "apiserver.key",
            service_account_key=directory / "sa.key",
            service_account_public_key=directory / "sa.pub",
        )
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", str(CERT_DAYS), "-subj", "/CN=shoal-test-ca",
            "-keyout", str(pki.ca_key), "-out", str(pki.ca_cert),
        )  # fmt: skip
        names = "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc"
        pki._sign(pki.serving_cert, pki.serving_key, "/CN=kube-apiserver", f"subjectAltName={names}\n"
                  "extendedKeyUsage=serverAuth\n")  # fmt: skip
        _openssl("genrsa", "-out", str(pki.service_account_key), "2048")
        _openssl("rsa", "-in", str(pki.service_account_key), "-pubout", "-out", str(pki.service_account_public_key))
        return pki

    def identity(self, user: str, group: str | None = None) -> Identity:
        """A client certificate for `user` (in `group`), written next to the CA once."""
        safe = user.replace(":", "_")
        identity = Identity(self.ca_cert.parent / f"{safe}.crt", self.ca_cert.parent / f"{safe}.key")
        if not identity.cert.exists():
            subject = f"/O={group}/CN={user}" if group else f"/CN={user}"
            self._sign(identity.cert, identity.key, subject, "extendedKeyUsage=clientAuth\n")
        return identity

    def _sign(self, cert: Path, key: Path, subject: str, extensions: str) -> None:
        request = cert.with_suffix(".csr")
        extfile = cert.with_suffix(".ext")
        extfile.write_text(extensions)
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", str(key), "-out", str(request))
        _openssl(
            "x509", "-req", "-in", str(request), "-CA", str(self.ca_cert), "-CAkey", str(self.ca_key),
            "-CAcreateserial", "-days", str(CERT_DAYS), "-extfile", str(extfile), "-out", str(cert),
        )  # fmt: skip


def write_kubeconfig(path: Path, server: str, ca_cert: Path, user: str, credentials: dict[str, str]) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "shoal-test", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "shoal-test", "context": {"cluster": "shoal-test", "user": user}}],
        "current-context": "shoal-test",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-LOG_TAIL_LINES:])


@dataclass
class ControlPlane:
    """Start with start(), stop with stop(); `kubeconfig` is the admin's (group system:masters)."""

    bin_dir: Path
    work_dir: Path
    kubectl_binary: Path
    free_port: Callable[[], int]
    components: list[Component] = field(default_factory=list)
    server: str = ""
    pki: Pki | None = None
    kubeconfig: Path = Path()
    node_names: tuple[str, ...] = ()

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        pki = self.pki = Pki.create(self.work_dir / "pki")
        etcd_url = self._start_etcd()
        api_port = self.free_port()
        self.server = f"https://127.0.0.1:{api_port}"
        admin = pki.identity("shoal-test-admin", "system:masters")
        self.kubeconfig = self._client_kubeconfig("admin", admin)
        self._spawn(
            "kube-apiserver",
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--secure-port", str(api_port), "--advertise-address", "127.0.0.1",
            # The built-in endpoint reconciler refuses a loopback advertise address; nothing in these
            # tests reaches the API server through the `kubernetes` Service.
            "--endpoint-reconciler-type", "none",
            "--tls-cert-file", str(pki.serving_cert), "--tls-private-key-file", str(pki.serving_key),
            "--client-ca-file", str(pki.ca_cert),
            "--authorization-mode", "RBAC",
            # On top of the default plugins: what hardened clusters (OpenShift among them) enable. Setting
            # blockOwnerDeletion on a child then needs `update` on the owner's finalizers subresource.
            "--enable-admission-plugins", "OwnerReferencesPermissionEnforcement",
            "--service-account-issuer", SERVICE_ACCOUNT_ISSUER,
            "--service-account-key-file", str(pki.service_account_public_key),
            "--service-account-signing-key-file", str(pki.service_account_key),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--allow-privileged",
        )  # fmt: skip
        self._wait_healthy("kube-apiserver", f"{self.server}/readyz", admin)
        for program, user in (
            ("kube-controller-manager", "system:kube-controller-manager"),
            ("kube-scheduler", "system:kube-scheduler"),
        ):
            kubeconfig = self._client_kubeconfig(program, pki.identity(user))
            port = self.free_port()
            extra: Sequence[str] = ()
            if program == "kube-controller-manager":
                extra = (
                    "--service-account-private-key-file", str(pki.service_account_key),
                    "--root-ca-file", str(pki.ca_cert),
                    "--use-service-account-credentials",
                )  # fmt: skip
            self._spawn(
                program,
                "--kubeconfig", str(kubeconfig),
                "--authentication-kubeconfig", str(kubeconfig), "--authorization-kubeconfig", str(kubeconfig),
                "--bind-address", "127.0.0.1", "--secure-port", str(port),
                "--leader-elect=false",
                *extra,
            )  # fmt: skip
            self._wait_healthy(program, f"https://127.0.0.1:{port}/healthz", None)
        self._start_kwok()

    def _start_etcd(self) -> str:
        client_port, peer_port = self.free_port(), self.free_port()
        client_url, peer_url = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            "--data-dir", str(self.work_dir / "etcd"),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"default={peer_url}",
            # A test cluster lives for one pytest session: durability buys nothing, fsync costs seconds.
            "--unsafe-no-fsync",
            "--log-level", "warn",
        )  # fmt: skip
        self._wait_healthy("etcd", f"{client_url}/health", None)
        return client_url

    def _kwok_stages(self) -> Path:
        """KWOK's stages with the pod stages narrowed to pods of no image in PROCESS_IMAGES."""
        stages = [s for s in yaml.safe_load_all((self.bin_dir / "kwok-stages.yaml").read_text()) if s]
        for stage in stages:
            if stage["spec"]["resourceRef"]["kind"] == "Pod":
                stage["spec"]["selector"]["matchExpressions"].append(
                    {"key": ".spec.containers.[].image", "operator": "NotIn", "values": [*PROCESS_IMAGES, *E2E_IMAGES]}
                )
        path = self.work_dir / "kwok-stages.yaml"
        path.write_text(yaml.safe_dump_all(stages))
        return path

    def _start_kwok(self) -> None:
        self._spawn(
            "kwok",
            "--config", str(self._kwok_stages()),
            "--kubeconfig", str(self.kubeconfig),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector", f"{NODE_ANNOTATION}=fake",
            "--cidr", POD_CIDR,
            "--node-ip", NODE_IP,
            "--server-address", "",
        )  # fmt: skip
        self.node_names = tuple(f"kwok-node-{index}" for index in range(NODE_COUNT))
        for name in self.node_names:
            node = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {NODE_ANNOTATION: "fake"},
                    "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
                },
            }
            self.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(node))
        self.kubectl("wait", "--for=condition=Ready", "node", *self.node_names, f"--timeout={int(START_TIMEOUT_S)}s")

    def _client_kubeconfig(self, name: str, identity: Identity) -> Path:
        assert self.pki is not None
        credentials = {"client-certificate": str(identity.cert), "client-key": str(identity.key)}
        return write_kubeconfig(self.work_dir / f"{name}.kubeconfig", self.server, self.pki.ca_cert, name, credentials)

    def _spawn(self, name: str, *args: str) -> Component:
        log = self.work_dir / "logs" / f"{name}.log"
        binary = self.bin_dir / name
        with log.open("wb") as output:
            process = subprocess.Popen(
                [str(binary), *args],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                # kwok reads ~/.kwok; keep it in the session's folder.
                env={**os.environ, "HOME": str(self.work_dir)},
                start_new_session=True,
            )
        component = Component(name, process, log)
        self.components.append(component)
        return component

    def _wait_healthy(self, name: str, url: str, identity: Identity | None) -> None:
        component = next(c for c in self.components if c.name == name)
        context: ssl.SSLContext | None = None
        if url.startswith("https://"):
            assert self.pki is not None
            context = ssl.create_default_context(cafile=str(self.pki.ca_cert))
            if identity is not None:
                context.load_cert_chain(str(identity.cert), str(identity.key))
            else:
                # The controllers serve /healthz on a self-signed certificate of their own.
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
        deadline = time.monotonic() + START_TIMEOUT_S
        last_error = ""
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(f"{name} exited with {component.process.returncode}:\n{component.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=5, context=context) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError) as error:
                last_error = str(error)
            time.sleep(POLL_INTERVAL_S)
        raise ControlPlaneError(
            f"{name} not healthy at {url} within {START_TIMEOUT_S} s ({last_error}):\n{component.log_tail()}"
        )

    def kubectl(
        self, *args: str, input_text: str | None = None, check: bool = True, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """kubectl against this cluster (as the admin unless `kubeconfig` says otherwise)."""
        result = subprocess.run(
            [str(self.kubectl_binary), "--kubeconfig", str(kubeconfig or self.kubeconfig), *args],
            input=input_text if input_text is not None else "",
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def get_json(self, namespace: str, *what: str) -> dict[str, Any]:
        """`kubectl get WHAT -n NAMESPACE -o json`, parsed."""
        found: dict[str, Any] = json.loads(self.kubectl("get", *what, "-n", namespace, "-o", "json").stdout)
        return found

    def pod_ready(self, namespace: str, name: str) -> bool:
        """The pod exists, is not being deleted (a StatefulSet may be making it again) and is Ready."""
        result = self.kubectl("get", "pod", name, "-n", namespace, "-o", "json", check=False)
        if result.returncode != 0:
            return False
        pod = json.loads(result.stdout)
        conditions = pod.get("status", {}).get("conditions") or []
        alive = not pod["metadata"].get("deletionTimestamp")
        return alive and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def stop(self) -> None:
        """SIGTERM every component, newest first (KWOK before the API server before etcd), then SIGKILL."""
        for component in reversed(self.components):
            if component.process.poll() is None:
                component.process.send_signal(signal.SIGTERM)
            try:
                component.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    component.process.kill()
                component.process.wait()
        self.components.clear()
