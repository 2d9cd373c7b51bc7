"""GET_BROKER_CONSUME_STATS (317, mqadmin brokerConsumeStats) on a real broker over real sockets,
asked with Shoal's own Admin: every subscription group's ConsumeStats per topic it committed
offsets on, as RocketMQ 4.9.7's AdminBrokerProcessor.fetchAllConsumeStatsInBroker builds them."""

from __future__ import annotations

import asyncio

import pytest

from shoal.client import (
    Admin,
    ClientSettings,
    Message,
    MessageQueue,
    MQBrokerError,
    Producer,
    PullConsumer,
    PullStatus,
)
from shoal.protocol import ConsumeStats, ConsumeStatsList, OffsetWrapper
from tests.conftest import Cluster, async_wait_until

pytestmark = pytest.mark.slow

BROKER_NAME = "broker-a"  # the embedded broker.conf's
PLAIN, ORDERED = "StatsPlain", "StatsOrdered"
SENT_PER_QUEUE = {(PLAIN, 0): 3, (PLAIN, 1): 2, (ORDERED, 0): 4}
WAIT_S = 20.0
SETTINGS = ClientSettings(client_ip="127.0.0.1", heartbeat_interval_s=0.2)
"""Heartbeats every 200 ms: the broker learns a consumer's subscriptions at once."""


def by_group(stats: ConsumeStatsList) -> dict[str, dict[str, ConsumeStats]]:
    """group -> topic -> its ConsumeStats (each ConsumeStats of the list covers one topic)."""
    groups: dict[str, dict[str, ConsumeStats]] = {}
    for entry in stats.consume_stats_list:
        for group, per_topic in entry.items():
            groups[group] = {next(iter(item.offset_table)).topic: item for item in per_topic}
    return groups


async def send_to_each_queue(cluster: Cluster) -> None:
    async with Producer("PID_stats", cluster.namesrv_addr, client_settings=SETTINGS) as producer:
        for (topic, queue_id), count in SENT_PER_QUEUE.items():
            mq = MessageQueue(topic=topic, broker_name=BROKER_NAME, queue_id=queue_id)
            for index in range(count):
                await producer.send(Message(topic, b"stats-%d" % index), queue=mq)


async def store_times(consumer: PullConsumer) -> dict[tuple[str, int], list[int]]:
    """(topic, queue id) -> the store timestamp of each message, in queue order."""
    times: dict[tuple[str, int], list[int]] = {}
    for topic in (PLAIN, ORDERED):
        for mq in await consumer.fetch_message_queues(topic):
            sent = SENT_PER_QUEUE.get((topic, mq.queue_id), 0)

            async def dispatched(mq: MessageQueue = mq, sent: int = sent) -> bool:
                return await consumer.max_offset(mq) >= sent  # a loaded broker dispatches after the answer

            await async_wait_until(dispatched, WAIT_S, 0.05, what=f"{mq} dispatched")
            result = await consumer.pull(mq, "*", 0)
            assert result.status is PullStatus.FOUND, (mq, result.status)
            times[(topic, mq.queue_id)] = [message.store_timestamp_ms for message in result.messages]
    return times


def test_broker_consume_stats_lists_every_groups_lag_per_topic_and_filters_order_and_subscriptions(
    cluster: Cluster,
) -> None:
    """Goal: brokerConsumeStats answers RocketMQ's ConsumeStatsList (broker address, per group and
    topic the max and committed offset of every write queue and the store time of the last message
    consumed, the lag summed), with isOrder keeping ordered topics only and an online group listing
    only the topics it subscribes to. Method: a plain and an ordered topic, sends to known queues,
    offsets committed by two pull consumers, Admin.broker_consume_stats before and after one leaves."""

    async def scenario() -> None:
        addr = cluster.broker_addr
        async with Admin(cluster.namesrv_addr, client_settings=SETTINGS) as admin:
            await admin.create_topic(PLAIN, broker_addr=addr, read_queue_nums=2, write_queue_nums=2)
            await admin.create_topic(ORDERED, broker_addr=addr, read_queue_nums=1, write_queue_nums=1, order=True)
            await send_to_each_queue(cluster)
            async with PullConsumer("GroupAll", cluster.namesrv_addr, client_settings=SETTINGS) as everything:
                times = await store_times(everything)
                assert {key: len(stamps) for key, stamps in times.items()} == SENT_PER_QUEUE
                committed = {(PLAIN, 0): 1, (PLAIN, 1): 2, (ORDERED, 0): 4}
                for (topic, queue_id), offset in committed.items():
                    mq = MessageQueue(topic=topic, broker_name=BROKER_NAME, queue_id=queue_id)
                    await everything.update_offset(mq, offset)

                async def subscribed_to_both() -> bool:  # an online group lists only what it subscribes to
                    try:  # asked at the brokers of %RETRY%GroupAll, routed once the broker registered it
                        connection = await admin.consumer_connections("GroupAll")
                    except MQBrokerError:
                        return False
                    return set(connection.subscriptions) == {PLAIN, ORDERED}

                await async_wait_until(subscribed_to_both, WAIT_S, 0.05, what="a heartbeat with both subscriptions")

                stats = await admin.broker_consume_stats(addr)
                assert stats.broker_addr == addr
                assert stats.total_diff == 2  # PLAIN queue 0: 3 sent, 1 consumed; no other group committed
                groups = by_group(stats)
                expected = {
                    topic: {
                        MessageQueue(topic=topic, broker_name=BROKER_NAME, queue_id=queue_id): OffsetWrapper(
                            broker_offset=SENT_PER_QUEUE[(topic, queue_id)],
                            consumer_offset=offset,
                            last_timestamp_ms=times[(topic, queue_id)][offset - 1],
                        )
                        for (named, queue_id), offset in committed.items()
                        if named == topic
                    }
                    for topic in (PLAIN, ORDERED)
                }
                assert {topic: item.offset_table for topic, item in groups["GroupAll"].items()} == expected
                assert all(item.consume_tps >= 0 for item in groups["GroupAll"].values())
                assert all(not per_topic for group, per_topic in groups.items() if group != "GroupAll")

                ordered_only = await admin.broker_consume_stats(addr, order_only=True)
                assert set(by_group(ordered_only)["GroupAll"]) == {ORDERED}
                assert ordered_only.total_diff == 0

                await subscription_filter(admin, cluster, addr)

    asyncio.run(scenario())


async def subscription_filter(admin: Admin, cluster: Cluster, addr: str) -> None:
    """A group online with subscriptions lists only those topics; once it leaves, all it committed."""
    picky = PullConsumer("GroupPicky", cluster.namesrv_addr, client_settings=SETTINGS)
    await picky.start()
    try:
        await picky.fetch_message_queues(PLAIN)  # its subscription: PLAIN only
        await picky.update_offset(MessageQueue(topic=PLAIN, broker_name=BROKER_NAME, queue_id=0), 3)
        await picky.update_offset(MessageQueue(topic=ORDERED, broker_name=BROKER_NAME, queue_id=0), 1)

        async def only_plain_listed() -> bool:  # once a heartbeat carried the subscription
            listed = by_group(await admin.broker_consume_stats(addr)).get("GroupPicky", {})
            return set(listed) == {PLAIN}

        await async_wait_until(only_plain_listed, WAIT_S, 0.05, what="GroupPicky listing PLAIN only")
        # GroupAll's 2, and GroupPicky's PLAIN queue 1 that it never committed (2 messages)
        assert (await admin.broker_consume_stats(addr)).total_diff == 2 + 2
    finally:
        await picky.shutdown()  # UNREGISTER_CLIENT: the group is no longer online
    stats = await admin.broker_consume_stats(addr)
    assert set(by_group(stats)["GroupPicky"]) == {PLAIN, ORDERED}
    assert stats.total_diff == 2 + 2 + 3  # and ORDERED: 4 sent, 1 committed
