"""RocketMQ 4.9.7's Java client with AclClientRPCHook, and mqadmin with conf/tools.yml, against a Shoal
broker with aclEnable: good keys pass; a wrong secret, an unknown key, a missing permission and a
non-white address fail cleanly with the broker's reason; the hook's signatures equal ours."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from shoal.client import Admin, ClientSettings
from shoal.protocol.acl_signature import Credentials, signature_of

ADMIN = Credentials("javaAdmin1", "javaAdminSecret")
USER = Credentials("javaUser01", "javaUserSecret")
PLAIN_ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: javaAdmin1
    secretKey: javaAdminSecret
    admin: true
  - accessKey: javaUser01
    secretKey: javaUserSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["JavaAclTopic=PUB|SUB", "JavaReadOnly=SUB"]
"""


@pytest.fixture(scope="module")
def acl_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("acl") / "plain_acl.yml"
    path.write_text(PLAIN_ACL)
    return path


@pytest.fixture(scope="module")
def shoal(acl_file: Path, shoal_with: Any) -> Any:
    """One ASYNC_FLUSH cluster whose broker has aclEnable; two topics created by the admin."""
    cluster = shoal_with(
        {
            "aclEnable": "true",
            "plainAclFile": str(acl_file),
            "accessKey": ADMIN.access_key,
            "secretKey": ADMIN.secret_key,
            "autoCreateTopicEnable": "false",
        }
    )

    async def create() -> None:
        async with Admin(cluster.namesrv_addr, client_settings=ClientSettings(credentials=ADMIN)) as admin:
            for topic in ("JavaAclTopic", "JavaReadOnly"):
                await admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=2, write_queue_nums=2)

    asyncio.run(create())
    return cluster


def keys(credentials: Credentials) -> dict[str, str]:
    return {"accessKey": credentials.access_key, "secretKey": credentials.secret_key}


def test_the_java_hook_signs_as_shoal_does(java: Any) -> None:
    """AclClientRPCHook's Signature over ASCII and non-ASCII fields and a body equals signature_of's."""
    fields = {"topic": "TopicTest", "queueId": "3", "b": "中文", "Z": "ünï"}
    result = java.run(
        "AclClients",
        {"mode": "sign", "code": 10, "body": "body-bytes", **keys(USER), **{f"f.{k}": v for k, v in fields.items()}},
    )
    [signed] = result.of("signed")
    sent = {k: v for k, v in signed["fields"].items() if k != "Signature"}
    assert sent == {**fields, "AccessKey": USER.access_key}
    assert signed["signature"] == signature_of(sent, b"body-bytes", USER.secret_key)


def test_producer_with_good_keys_sends_and_bad_ones_fail_with_the_reason(java: Any, shoal: Any) -> None:
    """Good keys: SEND_OK. Wrong secret, unknown key, a SUB-only topic: each send fails naming why."""
    base = {"mode": "produce", "namesrv": shoal.namesrv_addr, "group": "JavaAclProducer", "count": 2}
    good = java.run("AclClients", {**base, "topic": "JavaAclTopic", **keys(USER)})
    assert [line["status"] for line in good.of("sent")] == ["SEND_OK", "SEND_OK"], good.stderr
    cases = [
        (
            Credentials(USER.access_key, "notTheSecret"),
            "JavaAclTopic",
            f"Check signature failed for accessKey={USER.access_key}",
        ),
        (Credentials("nobodyHere", "whatever1"), "JavaAclTopic", "No acl config for nobodyHere"),
        (USER, "JavaReadOnly", "No default permission for topic:JavaReadOnly"),
    ]
    for credentials, topic, reason in cases:
        bad = java.run("AclClients", {**base, "topic": topic, **keys(credentials)})
        assert not bad.of("sent"), bad.events
        errors = bad.of("error")
        text = [f"{line['message']} {line['cause']}" for line in errors]
        assert len(errors) == 2 and all(reason in line for line in text), errors
        assert "CODE: 16" in text[0], text[0]


def test_push_consumer_with_good_keys_consumes_and_bad_keys_get_nothing(java: Any, shoal: Any) -> None:
    """A push consumer with the user's keys receives what was sent; with a wrong secret it receives nothing."""
    sent = java.run(
        "AclClients",
        {
            "mode": "produce",
            "namesrv": shoal.namesrv_addr,
            "group": "JavaAclProducer",
            "topic": "JavaAclTopic",
            "count": 3,
            **keys(USER),
        },
    )
    assert len(sent.of("sent")) == 3
    base = {"mode": "consume", "namesrv": shoal.namesrv_addr, "topic": "JavaAclTopic", "count": 3}
    bad = java.run(
        "AclClients",
        {**base, "group": "JavaAclBadGroup", "timeoutMs": 6000, **keys(Credentials(USER.access_key, "notTheSecret"))},
    )
    assert bad.of("done")[0]["received"] == 0
    good = java.run("AclClients", {**base, "group": "JavaAclGroup", "timeoutMs": 40000, **keys(USER)})
    assert good.of("done")[0]["received"] >= 3, good.stderr


def test_an_unsigned_client_is_refused_unless_its_address_is_white(java: Any, shoal: Any, acl_file: Path) -> None:
    """Produce without a hook: "No accessKey is configured"; with 127.0.0.1 globally white it sends."""
    args = {
        "namesrv": shoal.namesrv_addr,
        "group": "JavaPlainProducer",
        "topic": "JavaAclTopic",
        "mode": "sync",
        "count": 1,
        "retries": 0,
    }
    refused = java.run("Produce", args)
    assert not refused.of("sent")
    assert "No accessKey is configured" in str(refused.of("error")[0]["cause"]), refused.events
    staging = acl_file.with_suffix(".tmp")
    staging.write_text(PLAIN_ACL.replace("globalWhiteRemoteAddresses: []", 'globalWhiteRemoteAddresses: ["127.0.0.1"]'))
    staging.replace(acl_file)
    try:
        time.sleep(1.5)  # the broker polls the file every 500 ms
        allowed = java.run("Produce", args)
        assert [line["status"] for line in allowed.of("sent")] == ["SEND_OK"], allowed.events
    finally:
        staging.write_text(PLAIN_ACL)
        staging.replace(acl_file)
        time.sleep(1.5)


def mqadmin_with_tools_yml(java: Any, home: Path, credentials: Credentials, *args: str) -> str:
    """mqadmin with ROCKETMQ_HOME=`home`, whose conf/tools.yml holds `credentials` (what MQAdminStartup reads)."""
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copy(java.lib.parent / "conf" / "logback_tools.xml", conf / "logback_tools.xml")
    (conf / "tools.yml").write_text(f"accessKey: {credentials.access_key}\nsecretKey: {credentials.secret_key}\n")
    command = java.command("org.apache.rocketmq.tools.command.MQAdminStartup", {}, None)
    result = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        stdin=subprocess.DEVNULL,
        env={"ROCKETMQ_HOME": str(home), "PATH": "/usr/bin:/bin"},
    )
    return result.stdout + result.stderr


def test_mqadmin_reads_tools_yml_and_admin_commands_need_the_admin(java: Any, shoal: Any, tmp_path: Path) -> None:
    """updateTopic with the admin's tools.yml succeeds; with the user's it is refused as non-admin;
    with a wrong secret the signature check names the key."""
    args = ("updateTopic", "-n", shoal.namesrv_addr, "-b", shoal.broker_addr, "-t", "MqadminAclTopic")
    created = mqadmin_with_tools_yml(java, tmp_path / "admin", ADMIN, *args)
    assert f"create topic to {shoal.broker_addr} success." in created, created
    refused = mqadmin_with_tools_yml(java, tmp_path / "user", USER, *args)
    assert "Need admin permission for request code=17" in refused, refused
    wrong = mqadmin_with_tools_yml(java, tmp_path / "wrong", Credentials(ADMIN.access_key, "wrongSecret"), *args)
    assert f"Check signature failed for accessKey={ADMIN.access_key}" in wrong, wrong
