"""Consume-from-where for a new group (Apache RocketMQ 4.9.7's Java push consumer) on a topic that
already holds messages. The client asks QUERY_CONSUMER_OFFSET first; a 4.9.7 broker answers 0 for a
group without an offset while the queue's first message is still in memory (min offset 0), so every
setting then starts at the head; only once that message counts as on disk does it answer
QUERY_NOT_FOUND and the client apply FIRST, LAST or TIMESTAMP."""

from __future__ import annotations

import time
from typing import Any

CONSUME_TIMEOUT_S = 60.0
SETTLE_S = 3.0
ON_DISK = {"accessMessageInMemoryMaxRatio": "0"}
"""Every message counts as on disk (not in memory): the broker answers QUERY_NOT_FOUND for a new group."""


def create_topic(java: Any, shoal: Any, topic: str, queues: int = 4) -> None:
    args = {"namesrv": shoal.namesrv_addr, "op": "createTopic", "broker": shoal.broker_addr, "topic": topic}
    result = java.run("Admin", {**args, "queues": queues})
    assert not result.of("error"), result.events


def produce(java: Any, shoal: Any, topic: str, count: int) -> set[str]:
    result = java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": count})
    assert not result.of("error"), result.events
    assert len(result.of("sent")) == count
    return {line["msgId"] for line in result.of("sent")}


def consume(java: Any, shoal: Any, topic: str, group: str, **args: str) -> Any:
    consumer = java.spawn("FilterConsume", {"namesrv": shoal.namesrv_addr, "topic": topic, "group": group, **args})
    consumer.wait_for(lambda proc: bool(proc.of("started") or proc.of("startFailed")), 60.0, "start")
    assert consumer.of("started"), consumer.of("startFailed")
    return consumer


def received(consumer: Any) -> set[str]:
    return {line["msgId"] for line in consumer.of("received")}


def settle(consumer: Any, seconds: float) -> None:
    """Let the consumer run `seconds` more (an unexpected delivery would show), failing if it exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert consumer.process.poll() is None, consumer.stderr()
        time.sleep(0.1)


def test_a_new_group_starts_at_the_head_while_it_is_in_memory_whatever_its_setting(
    java: Any, shoal: Any, unique: Any
) -> None:
    """FIRST and LAST both get the 8 messages sent before the group existed: the broker answered offset 0."""
    topic = unique("from_memory")
    create_topic(java, shoal, topic)
    sent = produce(java, shoal, topic, 8)
    for setting in ("FIRST", "LAST"):
        consumer = consume(java, shoal, topic, unique(f"group_{setting}"), **{"from": setting})
        consumer.wait_for(lambda proc: sent <= received(proc), CONSUME_TIMEOUT_S, f"8 messages ({setting})")
        assert received(consumer) == sent


def test_first_last_and_timestamp_apply_when_the_head_is_on_disk(java: Any, shoal_with: Any, unique: Any) -> None:
    """With the head on disk: FIRST gets the old messages, LAST only what is sent after it started,
    TIMESTAMP only what was stored from that second on."""
    shoal = shoal_with(ON_DISK)
    topic = unique("from_disk")
    create_topic(java, shoal, topic)
    old = produce(java, shoal, topic, 8)

    first = consume(java, shoal, topic, unique("group_first"), **{"from": "FIRST"})
    first.wait_for(lambda proc: old <= received(proc), CONSUME_TIMEOUT_S, "the 8 old messages")
    assert received(first) == old

    last = consume(java, shoal, topic, unique("group_last"), **{"from": "LAST"})
    new: set[str] = set()
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while not received(last):  # until its rebalance has taken the queues at their ends
        assert time.monotonic() < deadline, "LAST consumer received nothing new"
        new |= produce(java, shoal, topic, 1)
        settle(last, 0.5)
    settle(last, SETTLE_S)
    assert received(last) <= new and not received(last) & old

    later = produce(java, shoal, topic, 6)
    # RocketMQ's search by time answers the stored message nearest the timestamp, which may be the one
    # before it: take the second the first of `later` was stored in (at most 1 s before it) and check
    # that everything earlier is further away than that (the settle above keeps them 3 s apart).
    everything = old | new | later
    first.wait_for(lambda proc: everything <= received(proc), CONSUME_TIMEOUT_S, "every message (FIRST group)")
    stored = {line["msgId"]: int(line["storeTimestamp"]) for line in first.of("received")}
    later_from_ms = min(stored[msg_id] for msg_id in later)
    boundary_ms = later_from_ms // 1000 * 1000
    earlier_until_ms = max(stamp_ms for msg_id, stamp_ms in stored.items() if msg_id not in later)
    assert boundary_ms - earlier_until_ms > later_from_ms - boundary_ms, (earlier_until_ms, boundary_ms, later_from_ms)
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(boundary_ms // 1000))
    by_time = consume(java, shoal, topic, unique("group_time"), **{"from": "TIMESTAMP", "timestamp": stamp})
    by_time.wait_for(lambda proc: later <= received(proc), CONSUME_TIMEOUT_S, "the 6 messages after the timestamp")
    settle(by_time, SETTLE_S)
    assert received(by_time) == later
