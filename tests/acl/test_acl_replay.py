"""A Broker with aclEnable in a real process against replayed admin signatures: the signature covers
a request's fields and body, not its code, so an attacker who saw an admin's request could resend
it under another code. The broker refuses an admin code carrying a signature it saw with another
code (NO_PERMISSION, one log line), and still takes retries and fresh admin requests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.client import Admin, ClientSettings
from shoal.protocol import RequestCode, ResponseCode
from shoal.protocol.acl_signature import Credentials
from shoal.protocol.headers import CreateTopicRequestHeader, DeleteTopicRequestHeader
from shoal.remoting import RemotingClient
from tests.acl.conftest import ADMIN, PLAIN_ACL, write_acl
from tests.conftest import Cluster

pytestmark = pytest.mark.asyncio

ACL_PREFIX = "org.apache.rocketmq.acl.common.AclException: "
MAINTENANCE = Credentials("shoalMaintenance", "maintenanceSecret1")
"""A second admin account that sends nothing but CLEAN_EXPIRED_CONSUMEQUEUE."""


def signed_by(credentials: Credentials, fields: dict[str, str]) -> dict[str, str]:
    """`fields` with AccessKey and Signature, as the admin's client sent them (and a sniffer saw them)."""
    signed = dict(fields)
    credentials.sign(signed, None)
    return signed


async def topics_on(cluster: Cluster) -> set[str]:
    async with Admin(cluster.namesrv_addr, client_settings=ClientSettings(credentials=ADMIN)) as admin:
        return set(await admin.broker_topic_configs(cluster.broker_addr))


def refusal_lines(cluster: Cluster, code: int) -> list[str]:
    lines = cluster.logs["broker"].read_text().splitlines()
    return [line for line in lines if f"ACL refused request code {code} " in line]


async def test_a_signed_create_topic_replayed_as_delete_topic_is_refused_and_the_topic_stays(
    acl_cluster_factory: Callable[..., Cluster],
) -> None:
    """Goal: a create's signature cannot delete. Method: send a signed UPDATE_AND_CREATE_TOPIC, resend
    its exact fields and signature as DELETE_TOPIC_IN_BROKER (refused, logged once, topic kept), resend
    it as the create (a retry: passes), then delete with the admin's own signed request (passes)."""
    cluster = acl_cluster_factory()
    create = CreateTopicRequestHeader(
        topic="ReplayTopic",
        default_topic="TBW102",
        read_queue_nums=2,
        write_queue_nums=2,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    captured = signed_by(ADMIN, create.to_ext_fields())
    attacker = RemotingClient()  # no credentials: it sends the captured fields as they are
    try:
        response = await attacker.invoke(cluster.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, captured)
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert "ReplayTopic" in await topics_on(cluster)

        response = await attacker.invoke(cluster.broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, captured)
        assert response.code == ResponseCode.NO_PERMISSION
        assert (response.remark or "").startswith(
            f"{ACL_PREFIX}Signature of accessKey={ADMIN.access_key} came with request code=17 "
        )
        assert "ReplayTopic" in await topics_on(cluster), "the replay deleted nothing"
        [line] = refusal_lines(cluster, RequestCode.DELETE_TOPIC_IN_BROKER)
        assert "refused for request code=215" in line

        response = await attacker.invoke(cluster.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, captured)
        assert response.code == ResponseCode.SUCCESS, "the same code again is a retry, not refused"
    finally:
        await attacker.close()

    admin = RemotingClient(credentials=ADMIN)
    try:
        fields = DeleteTopicRequestHeader(topic="ReplayTopic").to_ext_fields()
        response = await admin.invoke(cluster.broker_addr, RequestCode.DELETE_TOPIC_IN_BROKER, fields)
        assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await admin.close()
    assert "ReplayTopic" not in await topics_on(cluster)
    assert cluster.alive("broker")


async def test_a_field_less_admin_request_replayed_as_clean_expired_consume_queue_is_refused(
    acl_cluster_factory: Callable[..., Cluster], acl_file: Path
) -> None:
    """Goal: the signature every field-less request of an account shares cannot clean. Method: the
    admin's signed GET_BROKER_RUNTIME_INFO, then its fields as CLEAN_EXPIRED_CONSUMEQUEUE (refused,
    logged once, nothing cleaned); an admin account that sent no other field-less request cleans."""
    maintenance_account = f"{{accessKey: {MAINTENANCE.access_key}, secretKey: {MAINTENANCE.secret_key}, admin: true}}"
    write_acl(acl_file, f"{PLAIN_ACL}  - {maintenance_account}\n")
    cluster = acl_cluster_factory()
    captured = signed_by(ADMIN, {})
    assert set(captured) == {"AccessKey", "Signature"}
    attacker = RemotingClient()
    try:
        response = await attacker.invoke(cluster.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, captured)
        assert response.code == ResponseCode.SUCCESS, response.remark

        response = await attacker.invoke(cluster.broker_addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, captured)
        assert response.code == ResponseCode.NO_PERMISSION
        assert f"came with request code={RequestCode.GET_BROKER_RUNTIME_INFO} " in (response.remark or "")
        assert len(refusal_lines(cluster, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)) == 1

        response = await attacker.invoke(cluster.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO, captured)
        assert response.code == ResponseCode.SUCCESS, "reads with it still pass"
        maintenance = signed_by(MAINTENANCE, {})
        response = await attacker.invoke(cluster.broker_addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, maintenance)
        assert response.code == ResponseCode.SUCCESS, response.remark
    finally:
        await attacker.close()
    log_text = cluster.logs["broker"].read_text()
    assert log_text.count("cleanExpiredConsumeQueue by ") == 1, "only the maintenance account's clean ran"
    assert cluster.alive("broker")
