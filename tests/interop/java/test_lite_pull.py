"""DefaultLitePullConsumer (Apache RocketMQ 4.9.7, Java) against shoal namesrv + broker, ASYNC_FLUSH and SYNC_FLUSH."""

from __future__ import annotations

from collections import Counter
from typing import Any


def produce(java: Any, shoal: Any, topic: str, count: int) -> list[dict[str, Any]]:
    result = java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": count})
    assert not result.of("error"), result.events
    sent: list[dict[str, Any]] = result.of("sent")
    return sent


def test_subscribe_commit_then_a_restart_resumes_after_the_committed_offsets(
    java: Any, shoal: Any, unique: Any
) -> None:
    """subscribe + poll + commitSync: the same group started again gets only what was sent since."""
    topic, group = unique("lite"), unique("lite_group")
    sent = produce(java, shoal, topic, 12)
    args = {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic, "mode": "subscribe", "commit": "true"}
    first = java.run("LitePull", {**args, "count": 12})
    assert not first.of("error"), first.events
    assert {line["msgId"] for line in first.of("received")} == {line["msgId"] for line in sent}
    assert first.of("committed")
    again = java.run("LitePull", {**args, "count": 1, "timeoutMs": 4_000})
    assert again.of("received") == [], "committed messages were delivered again"
    later = produce(java, shoal, topic, 3)
    third = java.run("LitePull", {**args, "count": 3})
    assert {line["msgId"] for line in third.of("received")} == {line["msgId"] for line in later}


def test_assign_and_seek_read_from_the_given_offset(java: Any, shoal: Any, unique: Any) -> None:
    """assign(all queues) + seek(mq, 2): exactly the messages at queue offsets >= 2 arrive."""
    topic = unique("seek")
    sent = produce(java, shoal, topic, 20)
    per_queue = Counter(line["queueId"] for line in sent)
    expected = {line["msgId"] for line in sent if line["queueOffset"] >= 2}
    result = java.run(
        "LitePull",
        {
            "namesrv": shoal.namesrv_addr,
            "group": unique("seek_group"),
            "topic": topic,
            "mode": "assign",
            "seek": 2,
            "count": len(expected),
        },
    )
    assert not result.of("error"), result.events
    (queues,) = result.of("queues")
    assert sorted(queues["queueIds"]) == sorted(per_queue)
    received = result.of("received")
    assert {line["msgId"] for line in received} == expected
    assert min(line["queueOffset"] for line in received) == 2
