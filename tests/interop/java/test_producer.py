"""DefaultMQProducer (Apache RocketMQ 4.9.7, Java) against shoal namesrv + broker, ASYNC_FLUSH and SYNC_FLUSH.

What was sent is read back with a DefaultLitePullConsumer (assign, from the first offset), so each test also
checks what the broker stored: bodies by SHA-256, keys, tags, user properties, the compressed flag.
"""

from __future__ import annotations

import hashlib
from typing import Any, cast

BODY_4MB_BYTES = 4_000_000
"""Under RocketMQ's maxMessageSize (4 MiB) with room for the record's header and properties."""
MAX_MESSAGE_SIZE_BYTES = 4 * 1024 * 1024
DELAY_LEVEL_2_MS = 5_000
"""messageDelayLevel's second entry ("1s 5s 10s ...")."""


def read_back(java: Any, shoal: Any, topic: str, count: int, timeout_ms: int = 30_000) -> list[dict[str, Any]]:
    """Every message of `topic` from offset 0 of each queue: a new group's lite pull consumer, assign mode,
    CONSUME_FROM_FIRST_OFFSET. (Not seekToBegin: in 4.9.7 a pull already in flight when seek runs may
    deliver its messages too, so the queue's head arrives twice.)"""
    result = java.run(
        "LitePull",
        {
            "namesrv": shoal.namesrv_addr,
            "group": f"{topic}_reader",
            "topic": topic,
            "mode": "assign",
            "count": count,
            "timeoutMs": timeout_ms,
        },
    )
    assert not result.of("error"), result.events
    return cast("list[dict[str, Any]]", result.of("received"))


def test_sync_send_returns_send_ok_with_ids_and_offsets(java: Any, shoal: Any, unique: Any) -> None:
    """Sync sends to a new topic (auto-created through TBW102): SEND_OK, a msgId, distinct queue offsets."""
    topic = unique("sync")
    result = java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 8})
    assert not result.of("error"), result.events
    sent = result.of("sent")
    assert [line["status"] for line in sent] == ["SEND_OK"] * 8
    assert len({line["msgId"] for line in sent}) == 8
    assert len({(line["queueId"], line["queueOffset"]) for line in sent}) == 8
    assert result.of("started")[0]["vipChannelEnabled"] is False  # 4.9.7's default: no fastListenPort needed
    received = read_back(java, shoal, topic, 8)
    assert sorted(line["msgId"] for line in received) == sorted(line["msgId"] for line in sent)


def test_async_send_calls_every_callback_with_send_ok(java: Any, shoal: Any, unique: Any) -> None:
    """20 sendAsync calls: 20 onSuccess callbacks, SEND_OK, all stored."""
    topic = unique("async")
    result = java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "async", "count": 20})
    assert not result.of("error"), result.events
    sent = result.of("sent")
    assert sorted(line["index"] for line in sent) == list(range(20))
    assert {line["status"] for line in sent} == {"SEND_OK"}
    assert len(read_back(java, shoal, topic, 20)) == 20


def test_oneway_messages_are_stored(java: Any, shoal: Any, unique: Any) -> None:
    """sendOneway x10 (no response expected): all ten are stored."""
    topic = unique("oneway")
    # a first sync send creates the topic, so the oneway sends do not race its creation
    java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1})
    result = java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "oneway", "count": 10})
    assert not result.of("error"), result.events
    bodies = {line["body"] for line in read_back(java, shoal, topic, 11)}
    assert bodies == {"body-0"} | {f"body-{index}" for index in range(10)}


def test_batch_send_stores_each_message_in_one_queue_in_order(java: Any, shoal: Any, unique: Any) -> None:
    """send(List<Message>) of 16: one SEND_OK with 16 msgIds; stored consecutively in one queue, in order."""
    topic = unique("batch")
    result = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "batch", "count": 16, "keys": "bk"}
    )
    assert not result.of("error"), result.events
    (sent,) = result.of("sent")
    assert sent["status"] == "SEND_OK"
    assert len(sent["msgId"].split(",")) == 16
    received = read_back(java, shoal, topic, 16)
    assert {line["queueId"] for line in received} == {sent["queueId"]}
    in_order = sorted(received, key=lambda line: line["queueOffset"])
    assert [line["body"] for line in in_order] == [f"body-{index}" for index in range(16)]
    assert [line["keys"] for line in in_order] == [f"bk-{index}" for index in range(16)]
    assert [line["msgId"] for line in in_order] == sent["msgId"].split(",")


def test_ordered_send_with_selector_keeps_each_order_id_on_one_queue(java: Any, shoal: Any, unique: Any) -> None:
    """send(msg, MessageQueueSelector, orderId) on an 8-queue topic: each order id's messages share one queue."""
    topic = unique("ordered")
    created = java.run(
        "Admin", {"namesrv": shoal.namesrv_addr, "op": "createTopic", "broker": shoal.broker_addr, "topic": topic}
    )
    assert not created.of("error"), created.events
    result = java.run(
        "Produce",
        {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "ordered", "count": 24, "orderKeys": 8},
    )
    assert not result.of("error"), result.events
    sent = result.of("sent")
    assert len(sent) == 24
    for line in sent:
        assert line["queueId"] == line["index"] % 8
    offsets = [line["queueOffset"] for line in sent if line["queueId"] == 3]
    assert offsets == sorted(offsets) == list(range(3))


def test_keys_tags_and_user_properties_survive_the_round_trip(java: Any, shoal: Any, unique: Any) -> None:
    """Tags, keys and user properties set on the Java Message come back unchanged."""
    topic = unique("props")
    args = {
        "namesrv": shoal.namesrv_addr,
        "topic": topic,
        "mode": "sync",
        "count": 4,
        "tags": "TagA,TagB",
        "keys": "order",
        "prop": "colour:blue with spaces = and ; marks",
    }
    result = java.run("Produce", args)
    assert not result.of("error"), result.events
    received = sorted(read_back(java, shoal, topic, 4), key=lambda line: int(line["properties"]["index"]))
    assert [line["tags"] for line in received] == ["TagA", "TagB", "TagA", "TagB"]
    assert [line["keys"] for line in received] == [f"order-{index}" for index in range(4)]
    assert {line["properties"]["colour"] for line in received} == {"blue with spaces = and ; marks"}


def test_body_above_compress_threshold_is_stored_compressed_and_read_back_whole(
    java: Any, shoal: Any, unique: Any
) -> None:
    """A 64 KiB body (> compressMsgBodyOverHowmuch 4096) is sent compressed (sysFlag bit 0) and arrives intact."""
    topic = unique("compressed")
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 2}
    result = java.run("Produce", {**args, "bodySize": 64 * 1024, "compressible": "true"})
    assert not result.of("error"), result.events
    sent = {line["msgId"]: line["bodySha256"] for line in result.of("sent")}
    received = read_back(java, shoal, topic, 2)
    assert {line["msgId"]: line["bodySha256"] for line in received} == sent
    assert all(line["sysFlag"] & 1 for line in received)
    assert {line["bodyLength"] for line in received} == {64 * 1024}


def test_4mb_body_is_stored_and_read_back_whole(java: Any, shoal: Any, unique: Any) -> None:
    """A 4,000,000-byte incompressible body (no compression) is stored and read back byte for byte."""
    topic = unique("big")
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1, "bodySize": BODY_4MB_BYTES}
    result = java.run("Produce", {**args, "compressOver": 16 * 1024 * 1024})
    assert not result.of("error"), result.events
    (sent,) = result.of("sent")
    (received,) = read_back(java, shoal, topic, 1)
    assert received["bodyLength"] == BODY_4MB_BYTES
    assert received["bodySha256"] == sent["bodySha256"]
    assert received["sysFlag"] & 1 == 0


def test_body_over_client_limit_fails_in_the_client(java: Any, shoal: Any, unique: Any) -> None:
    """A body of maxMessageSize + 1 is refused by the Java client itself (MQClientException, code 13)."""
    topic = unique("toolarge")
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1}
    result = java.run("Produce", {**args, "bodySize": MAX_MESSAGE_SIZE_BYTES + 1, "compressOver": 16 * 1024 * 1024})
    (error,) = result.of("error")
    assert error["type"] == "org.apache.rocketmq.client.exception.MQClientException"
    assert "the message body size over max value" in error["message"]


def test_body_over_broker_limit_gets_a_clear_broker_error(java: Any, shoal: Any, unique: Any) -> None:
    """A client allowed 8 MiB sends 5 MiB: the broker refuses it with MQBrokerException naming the size limit."""
    topic = unique("brokerlimit")
    java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1})
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1, "retries": 0}
    result = java.run(
        "Produce",
        {**args, "bodySize": 5 * 1024 * 1024, "compressOver": 16 * 1024 * 1024, "maxMessageSize": 8 * 1024 * 1024},
    )
    (error,) = result.of("error")
    assert error["type"] == "org.apache.rocketmq.client.exception.MQBrokerException", error
    assert "CODE: 13" in error["message"], error
    assert len(read_back(java, shoal, topic, 2, timeout_ms=3_000)) == 1


def test_delay_level_message_is_never_delivered_early(java: Any, shoal: Any, unique: Any) -> None:
    """delayTimeLevel=2 (5 s): a push consumer subscribed beforehand receives each message no sooner than 5 s."""
    topic = unique("delay")
    group = unique("delay_group")
    java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1})
    consumer = java.spawn("PushConsume", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic})
    consumer.wait_for(lambda proc: len(proc.of("received")) >= 1, 30, "the undelayed message")
    result = java.run(
        "Produce",
        {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 3, "delayLevel": 2, "keys": "delayed"},
    )
    assert not result.of("error"), result.events
    consumer.wait_for(lambda proc: len(proc.of("received")) >= 4, 30, "3 delayed messages")
    delayed = [line for line in consumer.of("received") if (line.get("keys") or "").startswith("delayed-")]
    assert len(delayed) == 3, consumer.of("received")
    for line in delayed:
        assert line["t_ms"] - line["bornTimestamp"] >= DELAY_LEVEL_2_MS, line
        assert line["topic"] == topic


def test_sync_send_and_read_back_with_rocketmq_binary_headers(java: Any, shoal: Any, unique: Any) -> None:
    """-Drocketmq.serialize.type=ROCKETMQ: sends and pulls with the binary header encoding work too."""
    java.serialize_type = "ROCKETMQ"
    topic = unique("binary")
    result = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 4, "tags": "T"}
    )
    assert not result.of("error"), result.events
    received = read_back(java, shoal, topic, 4)
    assert sorted(line["body"] for line in received) == [f"body-{index}" for index in range(4)]
    assert hashlib.sha256(b"body-0").hexdigest() in {line["bodySha256"] for line in received}
