"""SQL92 filters (`MessageSelector.bySql`, Apache RocketMQ 4.9.7's Java push consumer) against shoal
namesrv + broker with enablePropertyFilter=true, ASYNC_FLUSH and SYNC_FLUSH; and a broker without it."""

from __future__ import annotations

import time
from typing import Any

CONSUME_TIMEOUT_S = 60.0
SETTLE_S = 3.0
"""After the expected messages arrived, how long to wait for any unexpected one."""
SQL = "index BETWEEN 3 AND 7 AND color IN ('red','blue') AND NOT (TAGS = 'TagB' AND index = 7)"
BATCHES = ("red", "blue", "green", None)
"""One batch of 10 per color (user property `color`, plus `index` = 0..9), and one without user properties."""


def create_topic(java: Any, shoal: Any, topic: str, queues: int = 4) -> None:
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


def produce_batches(java: Any, shoal: Any, topic: str) -> list[dict[str, Any]]:
    """40 messages, tags TagA (even index) and TagB (odd); each sent line gains its `color` and `index`."""
    sent = []
    for color in BATCHES:
        extra = {} if color is None else {"prop": f"color:{color}"}
        args = {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 10, "tags": "TagA,TagB"}
        result = java.run("Produce", {**args, **extra})
        assert not result.of("error"), result.events
        for line in result.of("sent"):
            sent.append({**line, "color": color})
    assert len(sent) == 40
    return sent


def matches_sql(line: dict[str, Any]) -> bool:
    """SQL as RocketMQ evaluates it on a sent message (no color: no index either, so unknown: no match)."""
    index = line["index"]
    return line["color"] in ("red", "blue") and 3 <= index <= 7 and not (line["tags"] == "TagB" and index == 7)


def received(consumer: Any) -> list[str]:
    return [line["msgId"] for line in consumer.of("received")]


def wait_started(consumer: Any) -> None:
    consumer.wait_for(lambda proc: bool(proc.of("started") or proc.of("startFailed")), 60.0, "start")


def test_sql92_consumer_receives_exactly_the_matching_messages_and_a_tag_group_still_works(
    java: Any, shoal: Any, unique: Any
) -> None:
    """A bySql push consumer gets exactly the 8 of 40 mixed messages its expression selects (user
    properties and TAGS), once each; a second group with `TagA` on the same topic gets the 20 TagA ones."""
    topic = unique("sql")
    create_topic(java, shoal, topic)
    base = {"namesrv": shoal.namesrv_addr, "topic": topic, "from": "FIRST"}
    by_sql = java.spawn("FilterConsume", {**base, "group": unique("sql_group"), "type": "SQL92", "expression": SQL})
    by_tag = java.spawn("FilterConsume", {**base, "group": unique("tag_group"), "expression": "TagA"})
    for consumer in (by_sql, by_tag):
        wait_started(consumer)
        assert consumer.of("started"), consumer.of("startFailed")
    sent = produce_batches(java, shoal, topic)
    wanted_sql = {line["msgId"] for line in sent if matches_sql(line)}
    wanted_tag = {line["msgId"] for line in sent if line["tags"] == "TagA"}
    assert len(wanted_sql) == 8 and len(wanted_tag) == 20
    by_sql.wait_for(lambda proc: wanted_sql <= set(received(proc)), CONSUME_TIMEOUT_S, "the 8 SQL92 matches")
    by_tag.wait_for(lambda proc: wanted_tag <= set(received(proc)), CONSUME_TIMEOUT_S, "the 20 TagA messages")
    settle(by_sql, SETTLE_S)  # a late unwanted delivery would show by then (the consumer keeps pulling)
    assert sorted(received(by_sql)) == sorted(wanted_sql), "a message the expression does not select arrived"
    assert sorted(received(by_tag)) == sorted(wanted_tag)
    for line in by_sql.of("received"):
        properties = line["properties"]
        assert properties["color"] in ("red", "blue") and 3 <= int(properties["index"]) <= 7


def settle(consumer: Any, seconds: float) -> None:
    """Let the consumer run `seconds` more, failing early if it exits."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert consumer.process.poll() is None, consumer.stderr()
        time.sleep(0.1)


def test_a_bad_sql92_expression_fails_start_with_subscription_parse_failed(java: Any, shoal: Any, unique: Any) -> None:
    """start() of a consumer whose expression does not parse throws MQClientException with RocketMQ's
    code 23 (SUBSCRIPTION_PARSE_FAILED), the broker's parser message as its text."""
    topic = unique("bad_sql")
    create_topic(java, shoal, topic)
    consumer = java.spawn(
        "FilterConsume",
        {
            "namesrv": shoal.namesrv_addr,
            "topic": topic,
            "group": unique("bad_group"),
            "type": "SQL92",
            "expression": "index BETWEEN 3",
        },
    )
    wait_started(consumer)
    (failed,) = consumer.of("startFailed")
    assert failed["responseCode"] == 23, failed
    assert "Invalid MessageSelector" in failed["errorMessage"], failed


def test_without_enable_property_filter_a_sql92_consumer_gets_does_not_support(
    java: Any, shoal_with: Any, unique: Any
) -> None:
    """With enablePropertyFilter=false start() throws MQClientException code 1 (SYSTEM_ERROR), "The
    broker does not support consumer to filter message by SQL92"; a tag consumer starts."""
    shoal = shoal_with({"enablePropertyFilter": "false"})
    topic = unique("no_filter")
    create_topic(java, shoal, topic)
    base = {"namesrv": shoal.namesrv_addr, "topic": topic}
    refused = java.spawn("FilterConsume", {**base, "group": unique("sql_group"), "type": "SQL92", "expression": SQL})
    wait_started(refused)
    (failed,) = refused.of("startFailed")
    assert failed["responseCode"] == 1, failed
    assert failed["errorMessage"] == "The broker does not support consumer to filter message by SQL92"
    by_tag = java.spawn("FilterConsume", {**base, "group": unique("tag_group"), "expression": "TagA"})
    wait_started(by_tag)
    assert by_tag.of("started"), by_tag.of("startFailed")
