"""A Broker with aclEnable in a real process: good keys pass; a wrong secret, an unknown key, a
missing permission, a non-admin admin request and a non-white address get NO_PERMISSION with a remark
naming what was missing; plain_acl.yml reloads on change, a malformed one keeps the old rules; the
broker keeps serving and nothing stored changes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.client import Admin, ClientSettings, Message, MQBrokerError, Producer
from shoal.protocol import FrameDecoder, RequestCode, ResponseCode, encode_frame_bytes, make_request
from shoal.protocol.acl_signature import Credentials
from shoal.protocol.headers import GetMaxOffsetRequestHeader
from shoal.remoting import RemotingClient
from tests.acl.conftest import ADMIN, PLAIN_ACL, USER, write_acl
from tests.conftest import Cluster, async_wait_until

pytestmark = pytest.mark.asyncio

ACL_PREFIX = "org.apache.rocketmq.acl.common.AclException: "


async def max_offset(cluster: Cluster, credentials: Credentials | None, topic: str = "AclTopic") -> tuple[int, str]:
    client = RemotingClient(credentials=credentials)
    try:
        fields = GetMaxOffsetRequestHeader(topic=topic, queue_id=0).to_ext_fields()
        response = await client.invoke(cluster.broker_addr, RequestCode.GET_MAX_OFFSET, fields)
        return response.code, response.remark or ""
    finally:
        await client.close()


async def create_topic(cluster: Cluster, credentials: Credentials | None, topic: str) -> None:
    async with Admin(cluster.namesrv_addr, client_settings=ClientSettings(credentials=credentials)) as admin:
        await admin.create_topic(topic, broker_addr=cluster.broker_addr, read_queue_nums=2, write_queue_nums=2)


async def send(cluster: Cluster, credentials: Credentials | None, topic: str, body: bytes) -> str:
    producer = Producer(
        "AclProducerGroup", cluster.namesrv_addr, client_settings=ClientSettings(credentials=credentials)
    )
    await producer.start()
    try:
        return (await producer.send(Message(topic, body))).msg_id
    finally:
        await producer.shutdown()


async def test_good_keys_pass_and_each_missing_piece_is_refused_by_name(
    acl_cluster_factory: Callable[..., Cluster],
) -> None:
    """Admin creates, the user sends; wrong secret, unknown key, no key, DENY topic, non-admin create
    each get NO_PERMISSION naming the cause, on the VIP port too; refusals store nothing."""
    cluster = acl_cluster_factory()
    await create_topic(cluster, ADMIN, "AclTopic")
    await create_topic(cluster, ADMIN, "ReadOnlyTopic")
    await send(cluster, USER, "AclTopic", b"one")

    cases = [
        (None, "No accessKey is configured"),
        (Credentials("noSuchKey", "whatever1"), "No acl config for noSuchKey"),
        (Credentials(USER.access_key, "wrongSecret"), f"Check signature failed for accessKey={USER.access_key}"),
    ]
    for credentials, remark in cases:
        code, text = await max_offset(cluster, credentials)
        assert code == ResponseCode.NO_PERMISSION and text == ACL_PREFIX + remark
    assert await max_offset(cluster, USER) == (ResponseCode.SUCCESS, "")
    vip = Cluster(cluster.root, cluster.namesrv_port, cluster.broker_port - 2, cluster.metrics_port)
    assert await max_offset(vip, None) == (ResponseCode.NO_PERMISSION, ACL_PREFIX + "No accessKey is configured")
    assert await max_offset(vip, USER) == (ResponseCode.SUCCESS, "")

    with pytest.raises(MQBrokerError) as refused:
        await send(cluster, USER, "ReadOnlyTopic", b"x")
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "No default permission for topic:ReadOnlyTopic" in (refused.value.remark or "")

    with pytest.raises(MQBrokerError) as refused:
        await create_topic(cluster, USER, "NotAllowedTopic")
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert f"Need admin permission for request code=17, but accessKey={USER.access_key} is not" in str(refused.value)

    for credentials in (None, Credentials(USER.access_key, "wrongSecret")):
        with pytest.raises(MQBrokerError):
            await send(cluster, credentials, "AclTopic", b"refused")
    assert await max_offset(cluster, ADMIN) == (ResponseCode.SUCCESS, "")
    client = RemotingClient(credentials=ADMIN)
    try:
        fields = GetMaxOffsetRequestHeader(topic="AclTopic", queue_id=0).to_ext_fields()
        totals = 0
        for queue in range(2):
            fields["queueId"] = str(queue)
            response = await client.invoke(cluster.broker_addr, RequestCode.GET_MAX_OFFSET, fields)
            totals += int(response.ext_fields["offset"])
    finally:
        await client.close()
    assert totals == 1, "only the permitted send was stored"
    assert cluster.alive("broker")


async def test_white_addresses_admit_unsigned_peers_and_others_stay_out(
    acl_cluster_factory: Callable[..., Cluster], acl_file: Path
) -> None:
    """A global white pattern for 127.0.0.* lets an unsigned request in; one for 127.0.0.2 does not
    (the test connects from 127.0.0.1), and the refusal names the missing key."""
    cluster = acl_cluster_factory()
    write_acl(
        acl_file, PLAIN_ACL.replace("globalWhiteRemoteAddresses: []", 'globalWhiteRemoteAddresses: ["127.0.0.2"]')
    )
    await asyncio.sleep(1.5)
    assert (await max_offset(cluster, None, "TBW102"))[0] == ResponseCode.NO_PERMISSION
    write_acl(
        acl_file, PLAIN_ACL.replace("globalWhiteRemoteAddresses: []", 'globalWhiteRemoteAddresses: ["127.0.0.*"]')
    )
    for _ in range(40):
        if (await max_offset(cluster, None, "TBW102"))[0] == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.1)
    assert (await max_offset(cluster, None, "TBW102"))[0] == ResponseCode.SUCCESS


async def test_reload_on_change_and_a_malformed_file_keeps_the_last_rules(
    acl_cluster_factory: Callable[..., Cluster], acl_file: Path
) -> None:
    """A new account works within a second of the write; then a file that is not YAML, and one with a
    wrong type, are logged and ignored: the last good rules keep serving."""
    cluster = acl_cluster_factory()
    newcomer = Credentials("newcomer1", "newcomerSecret")
    assert (await max_offset(cluster, newcomer, "TBW102"))[0] == ResponseCode.NO_PERMISSION
    write_acl(acl_file, PLAIN_ACL + "  - {accessKey: newcomer1, secretKey: newcomerSecret, admin: true}\n")
    for _ in range(40):
        if (await max_offset(cluster, newcomer, "TBW102"))[0] == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.1)
    assert (await max_offset(cluster, newcomer, "TBW102"))[0] == ResponseCode.SUCCESS

    write_acl(acl_file, "accounts: [\n  - {accessKey: broken\n")
    await asyncio.sleep(1.5)
    write_acl(acl_file, "accounts:\n  - {accessKey: newcomer1, secretKey: [not, text]}\n")
    await asyncio.sleep(1.5)
    assert (await max_offset(cluster, newcomer, "TBW102"))[0] == ResponseCode.SUCCESS
    assert (await max_offset(cluster, USER, "AclTopic"))[0] == ResponseCode.SUCCESS
    log = cluster.log("broker")
    assert "ACL: keeping the last good rules" in log and "not YAML at line" in log and "secretKey: expected text" in log
    assert cluster.alive("broker")


async def test_a_namesrv_with_acl_takes_registration_only_from_an_admin(
    acl_cluster_factory: Callable[..., Cluster],
) -> None:
    """The broker registers with its admin keys and is routed; an unsigned or non-admin REGISTER_BROKER
    and WIPE_WRITE_PERM_OF_BROKER are refused; route queries stay open to anyone."""
    cluster = acl_cluster_factory(namesrv_acl=True)
    await create_topic(cluster, ADMIN, "AclTopic")
    async with Admin(cluster.namesrv_addr) as anonymous:
        route = await anonymous.topic_route("AclTopic")
    assert route.broker_datas and route.broker_datas[0].broker_addrs[0] == cluster.broker_addr
    for credentials, remark in (
        (None, "No accessKey is configured"),
        (USER, "Need admin permission for request code=103"),
    ):
        client = RemotingClient(credentials=credentials)
        try:
            fields = {
                "brokerName": "broker-a",
                "brokerAddr": "127.0.0.1:1",
                "clusterName": "DefaultCluster",
                "haServerAddr": "127.0.0.1:2",
                "brokerId": "0",
                "compressed": "false",
                "bodyCrc32": "0",
            }
            response = await client.invoke(cluster.namesrv_addr, RequestCode.REGISTER_BROKER, fields, b"{}")
            assert response.code == ResponseCode.NO_PERMISSION and remark in (response.remark or "")
            response = await client.invoke(
                cluster.namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
            )
            assert response.code == ResponseCode.NO_PERMISSION
        finally:
            await client.close()
    async with Admin(cluster.namesrv_addr) as anonymous:
        route = await anonymous.topic_route("AclTopic")
    assert route.broker_datas[0].broker_addrs[0] == cluster.broker_addr


async def test_requests_read_together_are_each_checked_and_answered(
    acl_cluster_factory: Callable[..., Cluster],
) -> None:
    """Frames arriving in one write are checked together before any is processed (the broker's
    batched check): each still gets its own answer, in the right place: the signed ones succeed,
    the unsigned and the wrongly signed are refused by name, an unknown code is unknown (not
    refused), and only the signed send is stored."""
    cluster = acl_cluster_factory()
    await create_topic(cluster, ADMIN, "AclTopic")
    wrong = Credentials(USER.access_key, "wrongSecret")
    offset_fields = GetMaxOffsetRequestHeader(topic="AclTopic", queue_id=0).to_ext_fields()
    send_fields = {
        "a": "AclProducerGroup", "b": "AclTopic", "c": "TBW102", "d": "4", "e": "0", "f": "0",
        "g": "1700000000000", "h": "0", "i": "", "j": "0", "k": "false", "m": "false",
    }  # fmt: skip
    plan = [
        (RequestCode.GET_MAX_OFFSET, USER, offset_fields, None, ResponseCode.SUCCESS, ""),
        (RequestCode.GET_MAX_OFFSET, None, offset_fields, None, ResponseCode.NO_PERMISSION, "No accessKey"),
        (RequestCode.SEND_MESSAGE_V2, wrong, send_fields, b"forged", ResponseCode.NO_PERMISSION, "Check signature"),
        (9999, USER, offset_fields, None, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "not supported"),
        (RequestCode.SEND_MESSAGE_V2, USER, send_fields, b"kept", ResponseCode.SUCCESS, ""),
        (RequestCode.GET_MAX_OFFSET, USER, offset_fields, None, ResponseCode.SUCCESS, ""),
    ]
    frames = b""
    for opaque, (code, credentials, fields, body, _, _) in enumerate(plan, start=1):
        request = make_request(code, opaque=opaque, ext_fields=fields, body=body)
        if credentials is not None:
            credentials.sign(request.ext_fields, body)
        frames += encode_frame_bytes(request)
    reader, writer = await asyncio.open_connection("127.0.0.1", cluster.broker_port)
    try:
        writer.write(frames)  # one write: the broker reads several frames at once
        decoder = FrameDecoder()
        answers: dict[int, tuple[int, str]] = {}
        while len(answers) < len(plan):
            data = await asyncio.wait_for(reader.read(65536), 10.0)
            assert data, "the broker closed the connection"
            answers |= {answer.opaque: (answer.code, answer.remark or "") for answer in decoder.feed(data)}
    finally:
        writer.close()
    for opaque, (_, _, _, _, code, remark) in enumerate(plan, start=1):
        assert answers[opaque][0] == code and remark in answers[opaque][1], (opaque, answers[opaque])
    stored = await max_offset(cluster, ADMIN)
    assert stored[0] == ResponseCode.SUCCESS
    client = RemotingClient(credentials=ADMIN)
    totals: list[int] = []

    async def dispatched() -> bool:
        # The ConsumeQueues are written by the dispatch after the send's answer (as RocketMQ's reput
        # service does), so the stored count is awaited; a stored forgery would precede the signed
        # send in the CommitLog and be dispatched first, so it would show in the total.
        total = 0
        for queue in range(2):
            fields = {**offset_fields, "queueId": str(queue)}
            total += int(
                (await client.invoke(cluster.broker_addr, RequestCode.GET_MAX_OFFSET, fields)).ext_fields["offset"]
            )
        totals.append(total)
        return total >= 1

    try:
        await async_wait_until(dispatched, what="the signed send in a ConsumeQueue")
    finally:
        await client.close()
    assert totals[-1] == 1, "only the signed send was stored"
