"""Broker spec.acl / spec.tls through the real kopf handlers (KMock for the Kubernetes API): Secrets
mounted and hashed, a changed Secret rolling the pod template, a missing one reported; and the
operator's Topic reconcile against a real NameServer and broker started from the very broker.conf,
namesrv.conf and entrypoint the operator's pods use, with ACL and TLS enforcing."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kmock as km
import pytest

from shoal.client import Admin, ClientSettings, ClientTlsSettings, Credentials
from shoal.operator import limits, manifests
from shoal.operator.spec import broker_spec_from
from shoal.protocol import ResponseCode
from tests.conftest import Cluster
from tests.operator import test_handlers as harness
from tests.operator.conftest import ALLOWED_ROOTS
from tests.operator.test_handlers import (
    BROKER_PATH,
    NAMESPACE,
    broker_body,
    broker_status,
    condition_of,
    get_object,
    post,
    running_operator,
    seed_cluster,
    seed_security,
    wait_until,
)
from tests.operator.test_handlers_live import LIVE_WAIT_S, TOPIC_PATH, Poker, topic_cr, topic_ready, topic_status
from tests.ports import free_broker_port, free_port
from tests.tls_certs import TlsFiles, make_tls_files

kube_api = harness.kube_api
_handlers_registered = harness._handlers_registered

ENTRYPOINT = Path(__file__).resolve().parents[2] / "broker_image" / "entrypoint.sh"
OPERATOR = Credentials("shoal-operator", "operator-secret-1")
BROKER = Credentials("orders-broker", "broker-secret-1")
APP = Credentials("orders-app", "app-secret-1")
PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: {OPERATOR.access_key}
    secretKey: {OPERATOR.secret_key}
    admin: true
  - accessKey: {BROKER.access_key}
    secretKey: {BROKER.secret_key}
    admin: true
  - accessKey: {APP.access_key}
    secretKey: {APP.secret_key}
    admin: false
    defaultTopicPerm: PUB|SUB
"""


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def stateful_set_annotations(api: km.KubernetesEmulator, name: str = "orders-g0") -> dict[str, str]:
    stateful_set = get_object(api, "apps/v1/statefulsets", NAMESPACE, name) or {}
    return dict(stateful_set.get("spec", {}).get("template", {}).get("metadata", {}).get("annotations") or {})


# ---------------------------------------------------------------- KMock only


@pytest.mark.asyncio
async def test_acl_and_tls_secrets_are_mounted_and_a_renewed_certificate_changes_the_pod_template(
    kube_api: km.KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: the Secrets reach the pods and a changed one rolls them. Method: a Broker naming an ACL
    Secret and a cert-manager Certificate; its StatefulSet mounts both and carries their hash; the
    TLS Secret's key is replaced (as cert-manager renews) and the Broker touched: the hash changes,
    so the StatefulSet gets a new revision that the ordered roll applies slaves first."""
    monkeypatch.setenv("SHOAL_NETWORK_POLICY", harness.NETWORK_POLICY_ENV)
    security = seed_security(kube_api)
    await seed_cluster(kube_api)
    poke = Poker(kube_api, f"{BROKER_PATH}/orders")
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, broker_body(**security))
        await wait_until(
            lambda: (
                get_object(kube_api, "networking.k8s.io/v1/networkpolicies", NAMESPACE, "orders-brokers") is not None
            )
        )
        first = stateful_set_annotations(kube_api)[manifests.ANNOTATION_SECRETS_HASH]
        pod = (get_object(kube_api, "apps/v1/statefulsets", NAMESPACE, "orders-g0") or {})["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["acl"]["secret"]["secretName"] == "orders-acl"
        assert volumes["tls"]["secret"]["secretName"] == "orders-tls-keys", "the Certificate's secretName"
        config = get_object(kube_api, "v1/configmaps", NAMESPACE, "orders-g0-config") or {}
        assert "aclEnable=true\n" in config["data"]["broker.conf"]

        seed_security(kube_api, tls_key=b64("RENEWED KEY"))
        await poke()
        await wait_until(
            lambda: stateful_set_annotations(kube_api).get(manifests.ANNOTATION_SECRETS_HASH) not in (None, first)
        )
        name_servers = stateful_set_annotations(kube_api, "orders-ns")
        assert (
            name_servers[manifests.ANNOTATION_SECRETS_HASH]
            == stateful_set_annotations(kube_api)[manifests.ANNOTATION_SECRETS_HASH]
        )


@pytest.mark.asyncio
async def test_a_missing_secret_is_reported_and_nothing_is_created_until_it_exists(
    kube_api: km.KubernetesEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goal: a Broker naming an absent Secret says so instead of starting pods that cannot mount it.
    Method: create the Broker first: Ready=False SecretsUnavailable naming the Secret, no
    StatefulSet; then create the Secrets: the retry (shortened here) creates the children."""
    monkeypatch.setattr(limits, "RETRY_DELAY_S", 0.5)
    await seed_cluster(kube_api)
    body = broker_body(acl={"secretName": "orders-acl"}, tls={"secretName": "orders-tls-keys"})
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, body)
        await wait_until(lambda: "conditions" in broker_status(kube_api))
        ready = condition_of(broker_status(kube_api), "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "SecretsUnavailable")
        assert "Secret mq/orders-acl does not exist" in ready["message"]
        assert "Secret mq/orders-tls-keys does not exist" in ready["message"]
        assert get_object(kube_api, "apps/v1/statefulsets", NAMESPACE, "orders-g0") is None
        seed_security(kube_api)
        await wait_until(lambda: get_object(kube_api, "apps/v1/statefulsets", NAMESPACE, "orders-g0") is not None)
        await wait_until(lambda: condition_of(broker_status(kube_api), "Ready")["reason"] != "SecretsUnavailable")


# ---------------------------------------------------------------- real NameServer and broker


def _mounted_files(root: Path, tls: TlsFiles) -> tuple[Path, Path]:
    """What the pods' Secret volumes hold: plain_acl.yml + the broker's keys, and tls.crt/key + ca.crt."""
    acl_dir, tls_dir = root / "acl", root / "tls"
    acl_dir.mkdir()
    tls_dir.mkdir()
    (acl_dir / "plain_acl.yml").write_text(PLAIN_ACL)
    (acl_dir / "accessKey").write_text(BROKER.access_key)
    (acl_dir / "secretKey").write_text(BROKER.secret_key)
    (tls_dir / "tls.crt").write_bytes(tls.server_cert.read_bytes())
    (tls_dir / "tls.key").write_bytes(tls.server_key.read_bytes())
    (tls_dir / "ca.crt").write_bytes(tls.ca.read_bytes())
    return acl_dir, tls_dir


def _local(conf: str, acl_dir: Path, tls_dir: Path, overrides: dict[str, str]) -> str:
    """The operator's conf with the mount paths moved to this test's directories, and local ports."""
    text = conf.replace(manifests.ACL_MOUNT_PATH, str(acl_dir)).replace(manifests.TLS_MOUNT_PATH, str(tls_dir))
    return text + "".join(f"{key}={value}\n" for key, value in overrides.items())


@pytest.fixture
def secure_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, TlsFiles, dict[str, Any]]]:
    """A NameServer and a master started from manifests.name_server_conf / broker_conf of a Broker with
    spec.acl and spec.tls (Enforcing), the broker.conf rendered by the image's entrypoint (which adds
    the broker's own keys from the mounted ACL Secret); returns it, the certificates and the Broker body."""
    tls = make_tls_files(tmp_path / "certs")
    acl_dir, tls_dir = _mounted_files(tmp_path, tls)
    cluster = Cluster(tmp_path / "cluster", free_port(), free_broker_port(), free_port())
    cluster.root.mkdir()
    body = broker_body(
        nameServer={"replicas": 0, "external": [cluster.namesrv_addr]},
        acl={"secretName": "orders-acl"},
        tls={"secretName": "orders-tls"},
        replicasPerGroup=1,
        replication={"mode": "Async"},
        storage={"type": "Ephemeral"},
    )
    body["spec"]["clusterName"] = "orders"
    spec = broker_spec_from(body, ALLOWED_ROOTS)
    namesrv_conf = cluster.root / "namesrv.conf"
    namesrv_conf.write_text(_local(manifests.name_server_conf(spec), acl_dir, tls_dir, {}))
    config_dir = cluster.root / "config"
    config_dir.mkdir()
    local = {
        "listenPort": str(cluster.broker_port),
        "haListenPort": str(free_port()),
        "metricsPort": str(cluster.metrics_port),
        "storePathRootDir": str(cluster.store_dir),
        "listenHost": "127.0.0.1",
        "metricsHost": "127.0.0.1",
        "brokerIP1": "127.0.0.1",
        "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
    }
    (config_dir / "broker.conf").write_text(_local(manifests.broker_conf(spec, 0), acl_dir, tls_dir, local))
    (config_dir / "broker-0.conf").write_text(manifests.broker_conf_for_ordinal(spec, 0))
    rendered = subprocess.run(
        ["sh", str(ENTRYPOINT), "render-broker-conf"],
        env={
            "PATH": "/usr/bin:/bin",
            "POD_NAME": "orders-g0-0",
            "SHOAL_CONFIG_DIR": str(config_dir),
            "SHOAL_RENDERED_DIR": str(cluster.root / "rendered"),
            "SHOAL_ACL_DIR": str(acl_dir),
        },
        capture_output=True,
        text=True,
        check=True,
    )
    broker_conf = Path(rendered.stdout.strip())
    assert broker_conf.stat().st_mode & 0o077 == 0, "the rendered broker.conf holds a secret key: owner only"
    assert f"accessKey={BROKER.access_key}\n" in broker_conf.read_text()
    try:
        cluster._spawn(
            "namesrv",
            ["namesrv", "-c", str(namesrv_conf), "--host", "127.0.0.1", "--port", str(cluster.namesrv_port)],
            cluster.namesrv_port,
            "NameServer listening",
        )
        cluster._spawn(
            "broker",
            ["broker", "-c", str(broker_conf)],
            cluster.broker_port,
            f"listening on port {cluster.broker_port}",
        )
        yield cluster, tls, body
    finally:
        cluster.stop_all()


def seed_real_secrets(api: km.KubernetesEmulator, tls: TlsFiles) -> None:
    api.objects["v1/secrets", NAMESPACE, "orders-acl"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "orders-acl", "namespace": NAMESPACE},
        "data": {
            "plain_acl.yml": b64(PLAIN_ACL),
            "brokerAccessKey": b64(BROKER.access_key),
            "brokerSecretKey": b64(BROKER.secret_key),
        },
    }
    api.objects["v1/secrets", NAMESPACE, "orders-tls"] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": "orders-tls", "namespace": NAMESPACE},
        "data": {
            "tls.crt": b64(tls.server_cert.read_bytes()),
            "tls.key": b64(tls.server_key.read_bytes()),
            "ca.crt": b64(tls.ca.read_bytes()),
        },
    }


async def live_topic(cluster: Cluster, tls: TlsFiles) -> Any:
    """The topic's config on the broker, read over TLS as the operator's admin account."""
    settings = ClientSettings(
        credentials=OPERATOR,
        tls=ClientTlsSettings(enable=True, test_mode=False, auth_server=True, trust_cert_path=str(tls.ca)),
    )
    async with Admin(cluster.namesrv_addr, client_settings=settings) as admin:
        return (await admin.broker_topic_configs(cluster.broker_addr)).get("OrdersCreated")


def credentials_dir(root: Path, credentials: Credentials) -> Path:
    """What the chart mounts from operatorCredentials.secretName."""
    directory = root / "operator-credentials"
    directory.mkdir()
    (directory / "accessKey").write_text(credentials.access_key + "\n")
    (directory / "secretKey").write_text(credentials.secret_key + "\n")
    return directory


@pytest.mark.asyncio
async def test_topic_cr_works_with_acl_and_tls_enforcing(
    kube_api: km.KubernetesEmulator,
    secure_cluster: tuple[Cluster, TlsFiles, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Goal: Topic CRs keep working with ACL and TLS on. Method: the operator, with the chart's
    credentials directory, reconciles a Topic on the real cluster: it connects over TLS (trusting
    the TLS Secret's ca.crt), signs as its admin account, and the topic exists on the broker."""
    cluster, tls, body = secure_cluster
    monkeypatch.setenv("SHOAL_ADMIN_CREDENTIALS_DIR", str(credentials_dir(tmp_path, OPERATOR)))
    seed_real_secrets(kube_api, tls)
    await seed_cluster(kube_api)
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, body)
        await post(kube_api, TOPIC_PATH, topic_cr(readQueueNums=4, writeQueueNums=4))
        await wait_until(lambda: topic_ready(kube_api)[0] == "True", LIVE_WAIT_S)
    assert topic_ready(kube_api)[1] == "Created"
    assert topic_status(kube_api)["brokers"] == ["orders-g0"]
    created = await live_topic(cluster, tls)
    assert (created.read_queue_nums, created.write_queue_nums) == (4, 4)


@pytest.mark.parametrize("account", ["none", "not-admin"])
@pytest.mark.asyncio
async def test_topic_cr_is_refused_without_the_operators_admin_account(
    kube_api: km.KubernetesEmulator,
    secure_cluster: tuple[Cluster, TlsFiles, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    account: str,
) -> None:
    """Goal: the ACL really guards what the operator does. Method: no operatorCredentials (unsigned),
    or a non-admin account: the Topic reports Ready=False ClusterUnreachable with the broker's
    refusal, and no topic is created."""
    cluster, tls, body = secure_cluster
    directory = tmp_path / "absent" if account == "none" else credentials_dir(tmp_path, APP)
    monkeypatch.setenv("SHOAL_ADMIN_CREDENTIALS_DIR", str(directory))
    seed_real_secrets(kube_api, tls)
    await seed_cluster(kube_api)
    async with running_operator(kube_api):
        await post(kube_api, BROKER_PATH, body)
        await post(kube_api, TOPIC_PATH, topic_cr())
        await wait_until(lambda: topic_ready(kube_api)[0] == "False", LIVE_WAIT_S)
    ready = next(c for c in topic_status(kube_api)["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "ClusterUnreachable"
    assert f"response code {ResponseCode.NO_PERMISSION.value} " in ready["message"], ready["message"]
    assert await live_topic(cluster, tls) is None
