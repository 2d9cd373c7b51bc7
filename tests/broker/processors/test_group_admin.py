"""Consumer-group administration on a real broker over real sockets: subscription group updates and
deletes, producer connections, who consumes a topic, offset resets pushed to consumers
(RESET_CONSUMER_CLIENT_OFFSET) and CONSUME_MESSAGE_DIRECTLY relayed to one consumer.

A "consumer" here is a raw remoting connection that heartbeats like one and records what the broker
sends it; the last test runs shoal's own PushConsumer through a reset."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from shoal.client import (
    ClientSettings,
    ConsumeFromWhere,
    ConsumerSettings,
    ConsumeStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from shoal.formats.message_id import decode_offset_msg_id
from shoal.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode, make_request, make_response
from shoal.protocol.bodies import (
    ConsumerData,
    GroupList,
    HeartbeatData,
    MessageQueue,
    ProducerConnection,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionData,
)
from shoal.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    CustomHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    SendMessageRequestHeaderV2,
    UpdateConsumerOffsetRequestHeader,
)
from shoal.remoting import RemotingClient, RemotingConnection
from tests.conftest import Cluster, async_wait_until
from tests.ports import free_broker_port, free_port

pytestmark = pytest.mark.slow

TIMEOUT_S = 20.0
CLIENT_SETTINGS = ClientSettings(client_ip="127.0.0.1", route_refresh_interval_s=1.0, heartbeat_interval_s=0.5)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One NameServer + Broker for the module (tests use their own topics and groups)."""
    running = Cluster(tmp_path_factory.mktemp("group_admin"), free_port(), free_broker_port(), free_port())
    running.start_namesrv()
    running.start_broker()
    yield running
    running.stop_all()


class FakeConsumer:
    """A remoting connection that heartbeats as consumer `client_id` of `group` on `topic` and keeps
    every request the broker sends it; it answers CONSUME_MESSAGE_DIRECTLY with `answer_body`."""

    def __init__(self, group: str, topic: str, client_id: str) -> None:
        self.group, self.topic, self.client_id = group, topic, client_id
        self.received: list[RemotingCommand] = []
        self.answer_body = b'{"autoCommit":true,"consumeResult":"CR_SUCCESS","order":false,"spentTimeMills":1}'
        self.client = RemotingClient(handler=self._handle)

    async def _handle(self, connection: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        self.received.append(request)
        if request.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            return make_response(request, ResponseCode.SUCCESS, body=self.answer_body)
        return None

    async def heartbeat(self, address: str, language: LanguageCode = LanguageCode.JAVA) -> None:
        subscription = SubscriptionData(topic=self.topic)
        data = HeartbeatData(
            client_id=self.client_id,
            consumer_data_set=(ConsumerData(self.group, subscription_data_set=(subscription,)),),
        )
        connection = await self.client.connection(address)
        request = make_request(
            RequestCode.HEART_BEAT, opaque=self.client.next_opaque(), body=data.to_json(), language=language
        )
        response = await connection.request(request, TIMEOUT_S)
        assert response.code == ResponseCode.SUCCESS, response.remark

    def of(self, code: int) -> list[RemotingCommand]:
        return [request for request in self.received if request.code == code]

    def has(self, code: int) -> bool:
        return any(request.code == code for request in self.received)


@asynccontextmanager
async def admin_client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    try:
        yield client
    finally:
        await client.close()


async def call(
    client: RemotingClient, address: str, code: int, header: CustomHeader | None = None, body: bytes | None = None
) -> RemotingCommand:
    return await client.invoke(address, code, header.to_ext_fields() if header else None, body, timeout_s=TIMEOUT_S)


async def create_topic(client: RemotingClient, cluster: Cluster, topic: str, queues: int) -> None:
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    response = await call(client, cluster.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
    assert response.code == ResponseCode.SUCCESS, response.remark


async def send(client: RemotingClient, cluster: Cluster, topic: str, queue_id: int, body: bytes) -> str:
    """SEND_MESSAGE_V2 to one queue; the offset message id."""
    header = SendMessageRequestHeaderV2(
        producer_group="PID_group_admin",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp_ms=int(time.time() * 1000),
        flag=0,
    )
    response = await call(client, cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, header, body)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return response.ext_fields["msgId"]


async def commit(client: RemotingClient, cluster: Cluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    for queue_id, offset in offsets.items():
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, commit_offset=offset
        )
        response = await call(client, cluster.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)
        assert response.code == ResponseCode.SUCCESS, response.remark


def reset_header(topic: str, group: str, timestamp_ms: int, force: bool) -> ResetOffsetRequestHeader:
    return ResetOffsetRequestHeader(topic=topic, group=group, timestamp_ms=timestamp_ms, is_force=force)


def test_update_group_stores_a_valid_config_and_refuses_bad_ones(cluster: Cluster) -> None:
    """Goal: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP stores the body as sent and answers SYSTEM_ERROR with a reason for a
    missing, non-JSON or mistyped body, a bad group name or a retryQueueNums no topic may have. Method: each case."""
    address = cluster.broker_addr
    valid = {"groupName": "GID_update", "consumeEnable": False, "retryMaxTimes": 2, "brokerId": 1}

    async def run() -> None:
        async with admin_client() as client:
            refusals = {
                None: "no subscription group config in the body",
                b"{not json": "invalid JSON",
                json.dumps({**valid, "retryMaxTimes": "many"}).encode(): "bad subscription group config",
                json.dumps({**valid, "groupName": "bad name!"}).encode(): "bad name!",
                json.dumps({**valid, "retryQueueNums": 5000}).encode(): "retryQueueNums 5000 is out of range 0..1024",
            }
            for body, remark in refusals.items():
                response = await call(client, address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
                assert response.code == ResponseCode.SYSTEM_ERROR, body
                assert remark in (response.remark or ""), (body, response.remark)
            response = await call(
                client, address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(valid).encode()
            )
            assert response.code == ResponseCode.SUCCESS, response.remark
            listed = await call(client, address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            stored = json.loads(bytes(listed.body or b"{}"))["subscriptionGroupTable"]["GID_update"]
            assert (stored["consumeEnable"], stored["retryMaxTimes"], stored["brokerId"]) == (False, 2, 1)
            assert (stored["retryQueueNums"], stored["consumeBroadcastEnable"]) == (1, True)  # absent: defaults

    asyncio.run(run())


def test_delete_group_of_an_unknown_group_succeeds_and_a_missing_name_is_refused(cluster: Cluster) -> None:
    """Goal: DELETE_SUBSCRIPTIONGROUP of a group that does not exist is no error (RocketMQ logs it); without
    groupName the header is refused. Method: both requests."""

    async def run() -> None:
        async with admin_client() as client:
            header = DeleteSubscriptionGroupRequestHeader(group_name="GID_never_there", remove_offset=True)
            response = await call(client, cluster.broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, header)
            assert response.code == ResponseCode.SUCCESS, response.remark
            response = await call(client, cluster.broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "groupName" in (response.remark or "")

    asyncio.run(run())


def test_producer_connections_and_the_groups_consuming_a_topic(cluster: Cluster) -> None:
    """Goal: GET_PRODUCER_CONNECTION_LIST lists a live producer's client id and version, and refuses an unknown group;
    QUERY_TOPIC_CONSUME_BY_WHO joins subscribed groups and groups with committed offsets. Method: a shoal Producer,
    a heartbeating consumer and a committed offset."""
    topic = "T_consumed_by"

    async def run() -> None:
        async with admin_client() as client:
            await create_topic(client, cluster, topic, 1)
            producer = Producer("PID_connections", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
            await producer.start()
            try:
                await producer.send(Message(topic, b"x"))
                header = GetProducerConnectionListRequestHeader(producer_group="PID_connections")

                async def listed() -> bool:  # the producer heartbeats to the broker once it knows its route
                    found = await call(client, cluster.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
                    return found.code == ResponseCode.SUCCESS

                await async_wait_until(listed, TIMEOUT_S, what="the producer's connection")
                response = await call(client, cluster.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
                (connection,) = ProducerConnection.from_json(response.body or b"{}").connection_set
                assert connection.client_id == producer.client_id
                assert connection.client_addr.startswith("127.0.0.1:") and connection.version > 0
            finally:
                await producer.shutdown()
            header = GetProducerConnectionListRequestHeader(producer_group="PID_nobody")
            response = await call(client, cluster.broker_addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, header)
            assert (response.code, response.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "the producer group[PID_nobody] not exist",
            )

            consumer = FakeConsumer("GID_subscribed", topic, "127.0.0.1@fake-who")
            await consumer.heartbeat(cluster.broker_addr)
            await commit(client, cluster, "GID_committed", topic, {0: 0})
            header_who = QueryTopicConsumeByWhoRequestHeader(topic=topic)
            response = await call(client, cluster.broker_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, header_who)
            assert response.code == ResponseCode.SUCCESS, response.remark
            groups = GroupList.from_json(response.body or b"{}").group_list
            assert {"GID_subscribed", "GID_committed"} <= set(groups)
            await consumer.client.close()

    asyncio.run(run())


def test_reset_offset_refuses_an_unknown_topic_a_group_without_offsets_and_an_offline_group(cluster: Cluster) -> None:
    """Goal: INVOKE_BROKER_TO_RESET_OFFSET answers SYSTEM_ERROR for a topic this broker lacks or a queue the group
    never committed, and CONSUMER_NOT_ONLINE when no consumer of the group is connected. Method: the three cases."""
    topic, group = "T_reset_refusals", "GID_reset_refusals"
    address = cluster.broker_addr

    async def run() -> None:
        async with admin_client() as client:
            await create_topic(client, cluster, topic, 2)
            response = await call(
                client, address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_header("T_absent", group, 0, True)
            )
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "no topic in this broker. topic=T_absent" in (response.remark or "")
            await commit(client, cluster, group, topic, {0: 0})  # queue 1 never committed
            response = await call(
                client, address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_header(topic, group, 0, True)
            )
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert f"no committed offset on queue 1 of topic {topic}" in (response.remark or "")
            await commit(client, cluster, group, topic, {1: 0})
            response = await call(
                client, address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset_header(topic, group, 0, True)
            )
            assert response.code == ResponseCode.CONSUMER_NOT_ONLINE
            assert f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic}" in (
                response.remark or ""
            )

    asyncio.run(run())


def test_reset_offset_pushes_the_table_to_every_live_consumer(cluster: Cluster) -> None:
    """Goal: the broker computes each queue's offset (timestamp -1 = max offset; without isForce never forward) and
    sends it oneway as RESET_CONSUMER_CLIENT_OFFSET to each consumer, the list form to a C++ admin's request; the
    answer holds the same table. Method: queue 0 with 3 messages committed at 1, queue 1 empty; two consumers."""
    topic, group = "T_reset_push", "GID_reset_push"
    address = cluster.broker_addr

    async def run() -> None:
        async with admin_client() as client:
            await create_topic(client, cluster, topic, 2)
            for index in range(3):
                await send(client, cluster, topic, 0, b"m%d" % index)
            await commit(client, cluster, group, topic, {0: 1, 1: 0})
            consumers = [FakeConsumer(group, topic, f"127.0.0.1@fake-{n}") for n in range(2)]
            for consumer in consumers:
                await consumer.heartbeat(address)
            mq0, mq1 = MessageQueue(topic, "broker-a", 0), MessageQueue(topic, "broker-a", 1)
            expected = {False: {mq0: 1, mq1: 0}, True: {mq0: 3, mq1: 0}}
            for force, table in expected.items():
                header = reset_header(topic, group, -1, force)
                response = await call(client, address, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
                assert response.code == ResponseCode.SUCCESS, response.remark
                assert ResetOffsetBody.from_json(response.body or b"{}").offset_table == table
                for consumer in consumers:
                    await async_wait_until(
                        functools.partial(consumer.has, RequestCode.RESET_CONSUMER_CLIENT_OFFSET),
                        TIMEOUT_S,
                        what="RESET_CONSUMER_CLIENT_OFFSET",
                    )
                    push = consumer.of(RequestCode.RESET_CONSUMER_CLIENT_OFFSET).pop()
                    consumer.received.remove(push)
                    assert push.is_oneway
                    pushed = ResetOffsetRequestHeader.from_ext_fields(push.ext_fields)
                    assert (pushed.topic, pushed.group, pushed.timestamp_ms) == (topic, group, -1)
                    assert ResetOffsetBody.from_json(push.body or b"{}").offset_table == table

            connection = await client.connection(address)
            request = make_request(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                opaque=client.next_opaque(),
                ext_fields=reset_header(topic, group, 0, True).to_ext_fields(),
                language=LanguageCode.CPP,
            )
            response = await connection.request(request, TIMEOUT_S)
            assert response.code == ResponseCode.SUCCESS, response.remark
            await async_wait_until(
                functools.partial(consumers[0].has, RequestCode.RESET_CONSUMER_CLIENT_OFFSET), TIMEOUT_S
            )
            (push,) = consumers[0].of(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
            assert json.loads(bytes(push.body or b"{}"))["offsetTable"][0] == {
                "brokerName": "broker-a",
                "offset": 0,
                "queueId": 0,
                "topic": topic,
            }
            assert ResetOffsetBodyForC.from_json(push.body or b"{}").offset_table == {mq0: 0, mq1: 0}
            for consumer in consumers:
                await consumer.client.close()

    asyncio.run(run())


def test_consume_message_directly_is_relayed_to_the_named_consumer(cluster: Cluster) -> None:
    """Goal: CONSUME_MESSAGE_DIRECTLY reaches the named consumer with the stored record as body and brokerName added,
    and its answer comes back; an unknown client or message id gets SYSTEM_ERROR. Method: a fake consumer answers."""
    topic, group = "T_direct", "GID_direct"
    address = cluster.broker_addr

    async def run() -> None:
        async with admin_client() as client:
            await create_topic(client, cluster, topic, 1)
            msg_id = await send(client, cluster, topic, 0, b"direct-body")
            consumer = FakeConsumer(group, topic, "127.0.0.1@fake-direct")
            await consumer.heartbeat(address)
            header = ConsumeMessageDirectlyResultRequestHeader(
                consumer_group=group, client_id=consumer.client_id, msg_id=msg_id
            )
            response = await call(client, address, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
            assert (response.code, bytes(response.body or b"")) == (ResponseCode.SUCCESS, consumer.answer_body)
            (forwarded,) = consumer.of(RequestCode.CONSUME_MESSAGE_DIRECTLY)
            assert forwarded.ext_fields["brokerName"] == "broker-a"
            assert forwarded.ext_fields["msgId"] == msg_id
            body = bytes(forwarded.body or b"")
            assert b"direct-body" in body
            assert int.from_bytes(body[:4], "big") == len(body)  # TOTALSIZE: one whole stored record
            _host, physical = decode_offset_msg_id(msg_id)
            assert int.from_bytes(body[28:36], "big") == physical  # PHYSICALOFFSET field of the record

            for bad, remark in (
                ({"client_id": "127.0.0.1@nobody", "msg_id": msg_id}, f"The Consumer <{group}> <127.0.0.1@nobody>"),
                ({"client_id": consumer.client_id, "msg_id": "not-a-message-id"}, "can not find message"),
            ):
                header = ConsumeMessageDirectlyResultRequestHeader(consumer_group=group, **bad)
                response = await call(client, address, RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
                assert response.code == ResponseCode.SYSTEM_ERROR
                assert remark in (response.remark or ""), response.remark
            await consumer.client.close()

    asyncio.run(run())


def test_shoal_push_consumer_consumes_again_after_a_reset(cluster: Cluster) -> None:
    """Goal: shoal's PushConsumer applies RESET_CONSUMER_CLIENT_OFFSET: after a reset to before the first message it
    consumes every message again. Method: 4 messages consumed and committed, reset by time, count deliveries."""
    topic, group = "T_client_reset", "GID_client_reset"
    settings = ConsumerSettings(rebalance_interval_s=1.0, offset_persist_interval_s=0.5, shutdown_await_s=5.0)
    delivered: Counter[str] = Counter()

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        delivered.update(message.body.decode() for message in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    async def run() -> None:
        async with admin_client() as client:
            await create_topic(client, cluster, topic, 2)
            before_ms = int(time.time() * 1000) - 1
            producer = Producer("PID_client_reset", cluster.namesrv_addr, client_settings=CLIENT_SETTINGS)
            await producer.start()
            bodies = [f"r{index}" for index in range(4)]
            for body in bodies:
                await producer.send(Message(topic, body.encode()))
            await producer.shutdown()
            consumer = PushConsumer(
                group,
                cluster.namesrv_addr,
                listener=listener,
                consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                settings=settings,
                client_settings=CLIENT_SETTINGS,
            )
            consumer.subscribe(topic)
            await consumer.start()
            try:
                await async_wait_until(lambda: all(delivered[body] == 1 for body in bodies), TIMEOUT_S, what="all")

                async def all_committed() -> bool:
                    response = await call(client, cluster.broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
                    offsets = json.loads(bytes(response.body or b"{}"))["offsetTable"].get(f"{topic}@{group}", {})
                    return sum(offsets.values()) == len(bodies) and len(offsets) == 2

                await async_wait_until(all_committed, TIMEOUT_S, what="every queue committed")
                header = reset_header(topic, group, before_ms, True)
                response = await call(client, cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
                assert response.code == ResponseCode.SUCCESS, response.remark
                await async_wait_until(lambda: all(delivered[body] == 2 for body in bodies), TIMEOUT_S, what="again")
            finally:
                await consumer.shutdown()

    asyncio.run(run())
