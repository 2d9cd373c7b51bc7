"""A Broker with spec.acl and spec.tls (Enforcing) whose pods are real `shoal namesrv` / `shoal broker`
processes (pod_runner.py plays kubelet, Secret volumes included): the brokers register with their own
keys over TLS at the ACL-enabled NameServer, the operator (the chart's ServiceAccount, its own admin
account from files, trusting the TLS Secret's CA) makes a Topic CR's topic, an application account sends
over TLS, and a changed ACL Secret restarts the slave before the master."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from shoal.client import Admin, ClientSettings, ClientTlsSettings, Credentials, Message, Producer
from shoal.client.errors import MQClientError
from tests.conftest import wait_until
from tests.kube.conftest import SHOAL_PROCESS_IMAGE, SMALL_STORE_CONFIG, Helm
from tests.kube.control_plane import ControlPlane, write_kubeconfig
from tests.kube.pod_runner import PodRunner
from tests.tls_certs import TlsFiles, make_tls_files

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART = REPO_ROOT / "charts" / "shoal"
RELEASE = "secprocs"
OPERATOR_NAMESPACE = "shoal-secprocs"
NAMESPACE = "secure-fleet"
CLUSTER = "vault"
READY_TIMEOUT_S = 240
STOP_TIMEOUT_S = 15.0
OPERATOR = Credentials("shoal-operator", "operator-secret-1")
BROKER = Credentials("vault-broker", "broker-secret-1")
APP = Credentials("vault-app", "app-secret-1")


def plain_acl(*extra: Credentials) -> str:
    accounts = [
        {"accessKey": OPERATOR.access_key, "secretKey": OPERATOR.secret_key, "admin": True},
        {"accessKey": BROKER.access_key, "secretKey": BROKER.secret_key, "admin": True},
        {
            "accessKey": APP.access_key,
            "secretKey": APP.secret_key,
            "admin": False,
            "defaultTopicPerm": "DENY",
            "topicPerms": ["Vaulted=PUB|SUB", "TBW102=PUB"],
        },
    ]
    accounts += [{"accessKey": c.access_key, "secretKey": c.secret_key, "admin": False} for c in extra]
    return cast("str", yaml.safe_dump({"globalWhiteRemoteAddresses": [], "accounts": accounts}))


@dataclass
class Operator:
    process: subprocess.Popen[bytes]
    log: Path
    tls: TlsFiles

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def _secret(name: str, data: dict[str, bytes], kind: str = "Opaque") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {key: base64.b64encode(value).decode() for key, value in data.items()},
    }


def acl_secret(*extra: Credentials) -> dict[str, Any]:
    return _secret(
        f"{CLUSTER}-acl",
        {
            "plain_acl.yml": plain_acl(*extra).encode(),
            "brokerAccessKey": BROKER.access_key.encode(),
            "brokerSecretKey": BROKER.secret_key.encode(),
        },
    )


@pytest.fixture(scope="module")
def operator(
    shoal_crds: ControlPlane, pod_runner: PodRunner, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    """The chart (operatorCredentials set) and the operator run locally with its ServiceAccount's token and
    the credentials files the chart would mount; the namespace goes while the runner still runs its pods."""
    plane = shoal_crds
    home = tmp_path_factory.mktemp("operator-secprocs")
    tls = make_tls_files(home / "certs")
    plane.kubectl("create", "namespace", OPERATOR_NAMESPACE)
    plane.kubectl("create", "namespace", NAMESPACE)
    plane.kubectl(
        "create", "secret", "generic", "operator-acl", "-n", OPERATOR_NAMESPACE,
        f"--from-literal=accessKey={OPERATOR.access_key}", f"--from-literal=secretKey={OPERATOR.secret_key}",
    )  # fmt: skip
    helm = Helm.for_cluster(plane, home / "helm", OPERATOR_NAMESPACE)
    helm(
        "install", RELEASE, str(CHART), "--wait", "--timeout=180s",
        "--set", f"watchNamespaces={{{NAMESPACE}}}", "--set", "operatorCredentials.secretName=operator-acl",
        "--set", "storageClass.create=false",
    )  # fmt: skip
    (account,) = [o["metadata"]["name"] for o in helm.manifest(RELEASE) if o["kind"] == "ServiceAccount"]
    token = plane.kubectl("create", "token", account, "-n", OPERATOR_NAMESPACE, "--duration=2h").stdout.strip()
    assert plane.pki is not None
    kubeconfig = write_kubeconfig(home / "kubeconfig", plane.server, plane.pki.ca_cert, account, {"token": token})
    credentials = home / "operator-credentials"
    credentials.mkdir()
    (credentials / "accessKey").write_text(OPERATOR.access_key)
    (credentials / "secretKey").write_text(OPERATOR.secret_key)
    log = home / "operator.log"
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SHOAL_WATCH_NAMESPACES": NAMESPACE,
        "SHOAL_ALLOWED_HOSTPATH_ROOTS": "/var/lib/shoal",
        "SHOAL_ADMIN_CREDENTIALS_DIR": str(credentials),
        "SHOAL_LOG_LEVEL": "INFO",
    }
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "shoal.operator"], stdout=output, stderr=subprocess.STDOUT, env=env, cwd=home
        )
    try:
        yield Operator(process, log, tls)
    finally:
        plane.kubectl("delete", "topics,brokers", "--all", "-n", NAMESPACE, "--timeout=80s", check=False)
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        plane.kubectl("delete", "namespace", NAMESPACE, "--timeout=80s", check=False)
        helm.uninstall_quietly(RELEASE)
        plane.kubectl("delete", "namespace", OPERATOR_NAMESPACE, "--wait=false", check=False)


def _get(plane: ControlPlane, *what: str) -> dict[str, Any]:
    return plane.get_json(NAMESPACE, *what)


def _wait_ready(plane: ControlPlane, operator: Operator, what: str) -> None:
    result = plane.kubectl(
        "wait", "--for=condition=Ready", what, "-n", NAMESPACE, f"--timeout={READY_TIMEOUT_S}s", check=False
    )
    assert result.returncode == 0, f"{what} not Ready: {result.stderr}\noperator log:\n{operator.output()[-4000:]}"


def _client(operator: Operator, credentials: Credentials) -> ClientSettings:
    trusted = ClientTlsSettings(enable=True, test_mode=False, auth_server=True, trust_cert_path=str(operator.tls.ca))
    return ClientSettings(credentials=credentials, tls=trusted)


def _name_server(plane: ControlPlane) -> str:
    return f"{_get(plane, 'pod', f'{CLUSTER}-ns-0')['status']['podIP']}:9876"


def test_secure_broker_of_real_processes_serves_a_topic_cr(shoal_crds: ControlPlane, operator: Operator) -> None:
    """Both brokers register (signed with the ACL Secret's broker keys, over TLS, at a NameServer with
    aclEnable and enforcing TLS), the Broker becomes Ready, a Topic CR is created by the operator's
    account, the application account sends to it over TLS, and a plain connection gets nothing."""
    plane = shoal_crds
    tls = operator.tls
    secrets = [
        acl_secret(),
        _secret(
            f"{CLUSTER}-tls",
            {
                "tls.crt": tls.server_cert.read_bytes(),
                "tls.key": tls.server_key.read_bytes(),
                "ca.crt": tls.ca.read_bytes(),
            },
            "kubernetes.io/tls",
        ),
    ]
    body = yaml.safe_load((REPO_ROOT / "examples" / "cluster.yaml").read_text())
    body["metadata"] = {"name": CLUSTER, "namespace": NAMESPACE}
    body["spec"].update(
        image=SHOAL_PROCESS_IMAGE,
        nameServer={"replicas": 1},
        replication={"mode": "Async"},
        storage={"type": "Ephemeral", "size": "1Gi"},
        config={"autoCreateTopicEnable": "false", **SMALL_STORE_CONFIG},
        acl={"secretName": f"{CLUSTER}-acl"},
        tls={"secretName": f"{CLUSTER}-tls", "mode": "Enforcing"},
    )
    topic = {
        "apiVersion": "shoal.io/v1alpha1",
        "kind": "Topic",
        "metadata": {"name": "vaulted", "namespace": NAMESPACE},
        "spec": {"clusterRef": {"name": CLUSTER}, "topicName": "Vaulted", "readQueueNums": 4, "writeQueueNums": 4},
    }
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all([*secrets, body, topic]))
    _wait_ready(plane, operator, f"broker/{CLUSTER}")
    _wait_ready(plane, operator, "topic/vaulted")

    async def check() -> None:
        name_server = _name_server(plane)
        async with Admin([name_server], client_settings=_client(operator, OPERATOR)) as admin:
            info = await admin.cluster_info()
            assert sorted(info.broker_addr_table[f"{CLUSTER}-g0"].broker_addrs) == [0, 1]
        producer = Producer("PID_vault", [name_server], client_settings=_client(operator, APP))
        async with producer:
            result = await producer.send(Message("Vaulted", b"sealed"))
            assert result.status.name == "SEND_OK", result
        async with Admin([name_server]) as plain:
            try:
                await asyncio.wait_for(plain.cluster_info(), 10)
            except (MQClientError, OSError, TimeoutError):
                pass  # enforcing closes a plain connection
            else:
                raise AssertionError("a plain connection was served by an enforcing NameServer")

    asyncio.run(check())


def test_a_changed_acl_secret_restarts_the_slave_before_the_master(
    shoal_crds: ControlPlane, operator: Operator, pod_runner: PodRunner
) -> None:
    """A new account in plain_acl.yml changes the Secret's hash in the pod template: the operator deletes
    the slave pod first and the master once the slave is back (the runner's stop events give the order);
    the Broker is Ready again with the new account usable."""
    plane = shoal_crds
    newcomer = Credentials("vault-newcomer", "newcomer-secret-1")
    before = len(pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-"))
    plane.kubectl("apply", "-f", "-", input_text=yaml.safe_dump(acl_secret(newcomer)))

    def rolled() -> bool:
        return len(pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-")) >= before + 2

    wait_until(rolled, READY_TIMEOUT_S, what="both broker pods restarted")
    stops = [e.pod.rsplit("/", 1)[1] for e in pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-")[before:]]
    assert stops[:2] == [f"{CLUSTER}-g0-1", f"{CLUSTER}-g0-0"], stops
    slave_ready = pod_runner.events_of("ready", f"{NAMESPACE}/{CLUSTER}-g0-1")[-1]
    master_stop = pod_runner.events_of("stop", f"{NAMESPACE}/{CLUSTER}-g0-0")[-1]
    assert slave_ready.time_s < master_stop.time_s
    # polled, not `kubectl wait`: that fails "not found" while the StatefulSet makes the pod again
    wait_until(lambda: plane.pod_ready(NAMESPACE, f"{CLUSTER}-g0-0"), READY_TIMEOUT_S, what="the new master pod Ready")
    _wait_ready(plane, operator, f"broker/{CLUSTER}")

    async def newcomer_is_known() -> None:
        async with Admin([_name_server(plane)], client_settings=_client(operator, newcomer)) as admin:
            await admin.cluster_info()  # route queries are open; the broker check below needs the account
            master = (await admin.cluster_info()).broker_addr_table[f"{CLUSTER}-g0"].broker_addrs[0]
            await admin.broker_topic_configs(master)

    asyncio.run(newcomer_is_known())
