"""DefaultMQPushConsumer (Apache RocketMQ 4.9.7, Java) against shoal namesrv + broker, ASYNC_FLUSH and SYNC_FLUSH."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, cast

REBALANCE_TIMEOUT_S = 60.0
"""The Java client rebalances on NOTIFY_CONSUMER_IDS_CHANGED, and every 20 s regardless."""
CONSUME_TIMEOUT_S = 60.0


def create_topic(java: Any, shoal: Any, topic: str, queues: int = 8) -> None:
    result = java.run(
        "Admin",
        {
            "namesrv": shoal.namesrv_addr,
            "op": "createTopic",
            "broker": shoal.broker_addr,
            "topic": topic,
            "queues": queues,
        },
    )
    assert not result.of("error"), result.events


def produce(java: Any, shoal: Any, topic: str, count: int, **extra: object) -> list[dict[str, Any]]:
    result = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": count, **extra}
    )
    assert not result.of("error"), result.events
    sent: list[dict[str, Any]] = result.of("sent")
    assert len(sent) == count
    return sent


def allocation(consumer: Any, topic: str) -> list[int]:
    """The queue ids the consumer last reported for `topic` ([] before its first rebalance)."""
    lines = [line for line in consumer.of("allocated") if line["topic"] == topic]
    return list(lines[-1]["queueIds"]) if lines else []


def wait_balanced(consumers: list[Any], topic: str, queues: int) -> None:
    """Until the consumers' allocations partition the queues as evenly as AllocateMessageQueueAveragely does."""

    def balanced(_: Any) -> bool:
        owned = [allocation(consumer, topic) for consumer in consumers]
        flat = [queue for queue_ids in owned for queue in queue_ids]
        return sorted(flat) == list(range(queues)) and max(map(len, owned)) - min(map(len, owned)) <= 1

    consumers[0].wait_for(balanced, REBALANCE_TIMEOUT_S, f"{len(consumers)} consumers sharing {queues} queues")


def received_ids(consumers: list[Any], topic: str) -> Counter[str]:
    return Counter(
        line["msgId"] for consumer in consumers for line in consumer.of("received") if line["topic"] == topic
    )


def test_clustering_delivers_each_message_once_across_three_consumers_and_rebalances_when_one_leaves(
    java: Any, shoal: Any, unique: Any
) -> None:
    """3 consumers of one group share 8 queues; each message reaches exactly one; after one stops, 2 share all 8."""
    topic, group = unique("cluster"), unique("cluster_group")
    create_topic(java, shoal, topic)
    args = {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic}
    consumers = [java.spawn("PushConsume", {**args, "instance": f"c{index}"}) for index in range(3)]
    wait_balanced(consumers, topic, 8)
    first = produce(java, shoal, topic, 40)
    consumers[0].wait_for(lambda _: len(received_ids(consumers, topic)) >= 40, CONSUME_TIMEOUT_S, "40 messages")
    counts = received_ids(consumers, topic)
    assert set(counts) == {line["msgId"] for line in first}
    assert set(counts.values()) == {1}, "a message was delivered twice within one group"
    assert all(consumer.of("received") for consumer in consumers), "a consumer got nothing"

    # every offset committed before the rebalance: otherwise a queue that moves between the remaining
    # consumers may be read again from an older committed offset, which RocketMQ allows (at least once)
    def committed(_: Any) -> bool:
        return "Diff Total: 0" in java.mqadmin("consumerProgress", "-n", shoal.namesrv_addr, "-g", group)

    consumers[0].wait_for(committed, CONSUME_TIMEOUT_S, "consumerProgress with Diff Total: 0")
    assert consumers[2].stop() == 0
    wait_balanced(consumers[:2], topic, 8)
    second = produce(java, shoal, topic, 40)
    consumers[0].wait_for(lambda _: len(received_ids(consumers, topic)) >= 80, CONSUME_TIMEOUT_S, "80 messages")
    counts = received_ids(consumers, topic)
    assert set(counts) == {line["msgId"] for line in first + second}
    assert set(counts.values()) == {1}, "a message was delivered twice within one group"
    second_ids = {line["msgId"] for line in second}
    for consumer in consumers[:2]:
        queues = {line["queueId"] for line in consumer.of("received") if line["msgId"] in second_ids}
        assert queues == set(allocation(consumer, topic))


def test_broadcasting_delivers_every_message_to_every_consumer(java: Any, shoal: Any, unique: Any) -> None:
    """Two BROADCASTING consumers of one group (CONSUME_FROM_FIRST_OFFSET) each receive all 12 messages."""
    topic, group = unique("broadcast"), unique("broadcast_group")
    create_topic(java, shoal, topic, queues=4)
    args = {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic, "model": "BROADCASTING"}
    consumers = [java.spawn("PushConsume", {**args, "instance": f"b{index}"}) for index in range(2)]
    for consumer in consumers:  # broadcasting takes every queue without the allocation strategy
        consumer.wait_for(lambda proc: bool(proc.of("started")), REBALANCE_TIMEOUT_S, "start")
    sent = {line["msgId"] for line in produce(java, shoal, topic, 12)}
    for consumer in consumers:
        consumer.wait_for(lambda proc: len(received_ids([proc], topic)) >= 12, CONSUME_TIMEOUT_S, "12 messages")
        assert set(received_ids([consumer], topic)) == sent


def test_orderly_consumer_keeps_per_queue_order_across_eight_queues(java: Any, shoal: Any, unique: Any) -> None:
    """Ordered sends (8 order ids, 8 queues), MessageListenerOrderly: each queue's messages arrive by offset."""
    topic, group = unique("orderly"), unique("orderly_group")
    create_topic(java, shoal, topic)
    consumer = java.spawn(
        "PushConsume", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic, "orderly": "true"}
    )
    consumer.wait_for(lambda proc: len(allocation(proc, topic)) == 8, REBALANCE_TIMEOUT_S, "8 queues")
    result = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "ordered", "count": 80, "orderKeys": 8}
    )
    assert not result.of("error"), result.events
    consumer.wait_for(lambda proc: len(received_ids([proc], topic)) >= 80, CONSUME_TIMEOUT_S, "80 messages")
    per_queue: dict[int, list[int]] = defaultdict(list)
    per_order: dict[str, list[int]] = defaultdict(list)
    for line in consumer.of("received"):
        per_queue[line["queueId"]].append(line["queueOffset"])
        per_order[line["properties"]["orderId"]].append(int(line["body"].removeprefix("body-")))
    assert sorted(per_queue) == list(range(8))
    for offsets in per_queue.values():
        assert offsets == list(range(10))
    for indexes in per_order.values():
        assert indexes == sorted(indexes)


def test_tag_expression_delivers_only_matching_tags(java: Any, shoal: Any, unique: Any) -> None:
    """subscribe(topic, "TagA || TagC"): of 30 messages tagged A, B, C in turn, exactly the 20 A and C arrive."""
    topic, group = unique("tags"), unique("tags_group")
    create_topic(java, shoal, topic, queues=4)
    consumer = java.spawn(
        "PushConsume", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic, "expression": "TagA || TagC"}
    )
    consumer.wait_for(lambda proc: len(allocation(proc, topic)) == 4, REBALANCE_TIMEOUT_S, "4 queues")
    sent = produce(java, shoal, topic, 30, tags="TagA,TagB,TagC")
    wanted = {line["msgId"] for line in sent if line["tags"] in {"TagA", "TagC"}}
    consumer.wait_for(lambda proc: len(received_ids([proc], topic)) >= 20, CONSUME_TIMEOUT_S, "20 messages")
    # a TagB message would come with the last of them; give a straggler a moment by sending a marker after
    produce(java, shoal, topic, 1, tags="TagC", keys="marker")
    consumer.wait_for(lambda proc: len(received_ids([proc], topic)) >= 21, CONSUME_TIMEOUT_S, "the marker")
    tags = Counter(line["tags"] for line in consumer.of("received"))
    assert tags == Counter({"TagA": 10, "TagC": 11})
    assert wanted <= set(received_ids([consumer], topic))


def test_reconsume_later_retries_through_retry_topic_then_lands_in_dlq(java: Any, shoal: Any, unique: Any) -> None:
    """RECONSUME_LATER every time, maxReconsumeTimes=2: 3 deliveries (0, 1, 2 reconsumes), then %DLQ%group holds it.

    A new group's %RETRY% topic appears on its first heartbeat, after the client looked its route up; as with
    RocketMQ, the client sees it at the next route poll (30 s) and rebalance (20 s): both are 1 s here."""
    topic, group = unique("retry"), unique("retry_group")
    create_topic(java, shoal, topic, queues=1)
    consumer = java.spawn(
        "PushConsume",
        {
            "namesrv": shoal.namesrv_addr,
            "group": group,
            "topic": topic,
            "fail": "always",
            "maxReconsumeTimes": 2,
            "retryDelayLevel": 1,
            "pollNameServerMs": 1000,
        },
        properties={"rocketmq.client.rebalance.waitInterval": "1000"},
    )
    consumer.wait_for(lambda proc: len(allocation(proc, topic)) == 1, REBALANCE_TIMEOUT_S, "the queue")
    (sent,) = produce(java, shoal, topic, 1, keys="poison")
    consumer.wait_for(lambda proc: len(proc.of("received")) >= 3, CONSUME_TIMEOUT_S, "3 deliveries")
    deliveries = consumer.of("received")
    assert [line["reconsumeTimes"] for line in deliveries[:3]] == [0, 1, 2]
    assert {line["msgId"] for line in deliveries} == {sent["msgId"]}
    assert {line["body"] for line in deliveries} == {"body-0"}
    assert deliveries[1]["properties"].get("RETRY_TOPIC") == topic
    dlq = f"%DLQ%{group}"

    def in_dlq() -> list[dict[str, Any]]:
        result = java.run(
            "LitePull",
            {
                "namesrv": shoal.namesrv_addr,
                "group": f"{group}_dlq_reader",
                "topic": dlq,
                "mode": "assign",
                "count": 1,
                "timeoutMs": 5_000,
            },
        )
        assert not result.of("error"), result.events
        return cast("list[dict[str, Any]]", result.of("received"))

    consumer.wait_for(lambda _: bool(in_dlq()), CONSUME_TIMEOUT_S, f"the message in {dlq}")
    (dead,) = in_dlq()
    assert dead["msgId"] == sent["msgId"]
    assert dead["keys"] == "poison-0"
    assert dead["body"] == "body-0"
    assert len(consumer.of("received")) == 3
