"""DefaultMQPullConsumer (Apache RocketMQ 4.9.7, Java; deprecated but used) against shoal namesrv +
broker, ASYNC_FLUSH and SYNC_FLUSH: queues, pull with tag and SQL92 expressions, pullBlockIfNotFound,
updateConsumeOffset + fetchConsumeOffset across a consumer and a broker restart."""

from __future__ import annotations

from collections import Counter
from typing import Any

from shoal.remoting.settings import parse_properties

BLOCK_TIMEOUT_S = 30.0


def create_topic(java: Any, shoal: Any, topic: str, queues: int) -> None:
    args = {"namesrv": shoal.namesrv_addr, "op": "createTopic", "broker": shoal.broker_addr, "topic": topic}
    result = java.run("Admin", {**args, "queues": queues})
    assert not result.of("error"), result.events


def produce(java: Any, shoal: Any, topic: str, count: int, **extra: object) -> list[dict[str, Any]]:
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": count}
    result = java.run("Produce", {**args, **extra})
    assert not result.of("error"), result.events
    sent: list[dict[str, Any]] = result.of("sent")
    assert len(sent) == count
    return sent


def drain(java: Any, shoal: Any, **args: object) -> Any:
    result = java.run("PullConsumer", {"namesrv": shoal.namesrv_addr, **args})
    assert not result.of("error"), result.events
    assert result.of("done"), result.stderr[-2000:]
    return result


def offsets(result: Any, event: str) -> dict[int, int]:
    return {line["queueId"]: line["offset"] for line in result.of(event)}


def restart_broker(shoal: Any) -> None:
    """Stop the broker (SIGTERM: offsets persisted) and start it again with the same broker.conf."""
    conf = parse_properties((shoal.root / "broker.conf").read_text())
    assert shoal.stop("broker") == 0
    shoal.start_broker(conf=conf)


def test_pull_with_a_tag_expression_commit_and_resume_across_consumer_and_broker_restarts(
    java: Any, shoal: Any, unique: Any
) -> None:
    """fetchSubscribeMessageQueues gives the 4 queues; pull("TagA") drains exactly the TagA half;
    updateConsumeOffset + persist stores the offsets, which fetchConsumeOffset(mq, true) reads back
    in a new process and after a broker restart; then only newer TagA messages arrive."""
    topic, group = unique("pull"), unique("pull_group")
    create_topic(java, shoal, topic, 4)
    sent = produce(java, shoal, topic, 20, tags="TagA,TagB")
    first = drain(java, shoal, group=group, topic=topic, expression="TagA", commit="true")
    (queues,) = first.of("queues")
    assert queues["queueIds"] == [0, 1, 2, 3]
    assert set(offsets(first, "offset").values()) == {0}, "a new group's stored offset (queue head in memory)"
    assert sorted(line["msgId"] for line in first.of("received")) == sorted(
        line["msgId"] for line in sent if line["tags"] == "TagA"
    )
    ends = Counter(line["queueId"] for line in sent)
    committed = offsets(first, "committed")
    assert committed == {queue: ends[queue] for queue in range(4)}

    again = drain(java, shoal, group=group, topic=topic, expression="TagA")
    assert offsets(again, "offset") == committed
    assert again.of("received") == []
    restart_broker(shoal)
    after_restart = drain(java, shoal, group=group, topic=topic, expression="TagA")
    assert offsets(after_restart, "offset") == committed
    assert after_restart.of("received") == []

    later = produce(java, shoal, topic, 8, tags="TagA,TagB")
    last = drain(java, shoal, group=group, topic=topic, expression="TagA || TagC")
    assert sorted(line["msgId"] for line in last.of("received")) == sorted(
        line["msgId"] for line in later if line["tags"] == "TagA"
    )


def test_pull_with_a_sql92_selector_gets_the_matching_messages(java: Any, shoal: Any, unique: Any) -> None:
    """pull(mq, MessageSelector.bySql(...)) (the pull carries its own subscription) returns exactly
    the messages whose properties match, and steps over the rest."""
    topic = unique("pull_sql")
    create_topic(java, shoal, topic, 2)
    sent = produce(java, shoal, topic, 12, prop="color:red")
    result = drain(java, shoal, group=unique("pull_sql_group"), topic=topic, type="SQL92", expression="index >= 9")
    assert sorted(line["msgId"] for line in result.of("received")) == sorted(
        line["msgId"] for line in sent if line["index"] >= 9
    )


def test_pull_block_if_not_found_waits_for_a_matching_message(java: Any, shoal: Any, unique: Any) -> None:
    """pullBlockIfNotFound("TagA") at the end of a queue is held by the broker, not answered for a
    TagB message, and returns FOUND with the TagA message that follows it."""
    topic = unique("block")
    create_topic(java, shoal, topic, 1)
    produce(java, shoal, topic, 1, tags="TagA")
    blocked = java.spawn(
        "PullConsumer",
        {
            "namesrv": shoal.namesrv_addr,
            "group": unique("block_group"),
            "topic": topic,
            "op": "block",
            "expression": "TagA",
        },
    )
    blocked.wait_for(lambda proc: bool(proc.of("blocking")), BLOCK_TIMEOUT_S, "the blocking pull")
    sent = produce(java, shoal, topic, 2, tags="TagB,TagA")
    blocked.wait_for(lambda proc: bool(proc.of("done")), BLOCK_TIMEOUT_S, "the pull's answer")
    assert not blocked.of("error"), blocked.of("error")
    (pulled,) = blocked.of("pulled")
    assert pulled["status"] == "FOUND"
    assert [line["msgId"] for line in blocked.of("received")] == [sent[1]["msgId"]]
    assert pulled["nextBeginOffset"] == 3
