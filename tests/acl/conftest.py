"""ACL fixtures: a plain_acl.yml and a NameServer + Broker with aclEnable, in real processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal.protocol.acl_signature import Credentials
from tests.conftest import Cluster
from tests.ports import free_broker_port, free_port

ADMIN = Credentials("shoalAdmin", "adminSecret1")
USER = Credentials("shoalUser1", "userSecret1")
"""USER may publish and subscribe AclTopic, subscribe ReadOnlyTopic, and use every group but DeniedGroup."""

PLAIN_ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: shoalAdmin
    secretKey: adminSecret1
    admin: true
  - accessKey: shoalUser1
    secretKey: userSecret1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["AclTopic=PUB|SUB", "ReadOnlyTopic=SUB", "TBW102=PUB"]
    groupPerms: ["DeniedGroup=DENY"]
"""


def write_acl(path: Path, text: str) -> None:
    """Replace the file in one rename, as editors and Kubernetes do (the watcher sees a new inode)."""
    staging = path.with_suffix(".tmp")
    staging.write_text(text)
    staging.replace(path)


def start_namesrv_with(cluster: Cluster, conf: dict[str, str]) -> None:
    path = cluster.root / "namesrv.conf"
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    cluster._spawn(
        "namesrv",
        ["namesrv", "-c", str(path), "--host", "127.0.0.1", "--port", str(cluster.namesrv_port)],
        cluster.namesrv_port,
        "NameServer listening",
    )


@pytest.fixture
def acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "plain_acl.yml"
    path.write_text(PLAIN_ACL)
    return path


@pytest.fixture
def acl_cluster_factory(tmp_path: Path, acl_file: Path) -> Iterator[Callable[..., Cluster]]:
    """Start a NameServer (ACL optional) and a Broker with aclEnable and admin credentials."""
    started: list[Cluster] = []

    def start(*, namesrv_acl: bool = False, broker_conf: dict[str, str] | None = None) -> Cluster:
        root = tmp_path / f"cluster{len(started)}"
        root.mkdir()
        cluster = Cluster(root, free_port(), free_broker_port(), free_port())
        started.append(cluster)
        if namesrv_acl:
            start_namesrv_with(cluster, {"aclEnable": "true", "plainAclFile": str(acl_file)})
        else:
            cluster.start_namesrv()
        conf = {
            "aclEnable": "true",
            "plainAclFile": str(acl_file),
            "accessKey": ADMIN.access_key,
            "secretKey": ADMIN.secret_key,
            "autoCreateTopicEnable": "false",
            **(broker_conf or {}),
        }
        cluster.start_broker(conf)
        return cluster

    yield start
    for cluster in started:
        cluster.stop_all()
