"""ali-ons 3.12 (a Node.js RocketMQ remoting client from npm) against real Shoal processes: sends with
tags, keys and a start-deliver time, a push consumer with a retry, and a group that resumes."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from shoal.client import Admin

TOPIC = "NodeInterop"
GROUP = "node_interop_group"
QUEUES = 4
COUNT = 6
RETRY_BODY = "node-2"
"""The consumer answers ACTION_RETRY to this message's first delivery."""
CONSUME_TIMEOUT_S = 60
"""The retried message comes back through %RETRY%<group> after level 3 (10 s)."""
TIMED_DELAY_MS = 2_000  # client.js: the start-deliver time of node-timed
LATER_COUNT = 2


async def _create_topic(namesrv_addr: str, broker_addr: str) -> None:
    """ali-ons never sends to a topic the NameServer does not route (no TBW102 fallback)."""
    async with Admin(namesrv_addr) as admin:
        await admin.create_topic(TOPIC, broker_addr=broker_addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)


@pytest.mark.slow
def test_node_producer_and_push_consumer_exchange_every_message(cluster: Any, node_client: Any) -> None:
    """Goal: what ali-ons sends (tag, keys; a start-deliver time 2 s ahead) its push consumer receives
    exactly once with those fields and msgIds; the timed message not before its time; a message it
    answers ACTION_RETRY to comes back once with reconsumeTimes 1 under its own topic; a second run of
    the group gets only what was sent after the first.
    Method: a topic made with shoal.client's Admin; client.js produce and consume against a NameServer
    and a Broker process."""
    asyncio.run(_create_topic(cluster.namesrv_addr, cluster.broker_addr))
    produced = node_client("produce", cluster.namesrv_addr, TOPIC, str(COUNT), timeout_s=60)
    produced.assert_ok()
    sent = produced.of("sent")
    assert [line["kind"] for line in sent] == ["plain"] * COUNT + ["timed"], produced.events
    assert {line["status"] for line in sent} == {"SEND_OK"}, sent
    sent_ids = {line["body"]: line["msgId"] for line in sent}

    expected = [f"node-{index}" for index in range(COUNT)] + ["node-timed"]
    consumed = node_client(
        "consume", cluster.namesrv_addr, TOPIC, GROUP, str(len(expected)), str(CONSUME_TIMEOUT_S), RETRY_BODY,
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    consumed.assert_ok()
    received = consumed.of("received")
    assert Counter(line["body"] for line in received) == Counter(expected), consumed.events
    (refused,) = consumed.of("retry")
    assert (refused["body"], refused["reconsumeTimes"]) == (RETRY_BODY, 0), refused
    by_body = {line["body"]: line for line in received}
    retried = by_body[RETRY_BODY]
    assert (retried["reconsumeTimes"], retried["topic"]) == (1, TOPIC), retried
    # ali-ons sets no UNIQ_KEY, so its msgId is the offset id: the retried copy is a new record, and
    # names the first in ORIGIN_MESSAGE_ID (RocketMQ's CONSUMER_SEND_MSG_BACK does the same)
    assert retried["originMessageId"] == sent_ids[RETRY_BODY], retried
    for index in range(COUNT):
        line = by_body[f"node-{index}"]
        assert (line["tags"], line["keys"]) == ("TagN", f"nk{index}"), line
        assert line["body"] == RETRY_BODY or line["msgId"] == sent_ids[line["body"]], line
    timed = by_body["node-timed"]
    assert timed["storeTimestamp"] - timed["bornTimestamp"] >= TIMED_DELAY_MS - 50, timed  # stored when due

    later = node_client("produce", cluster.namesrv_addr, TOPIC, str(LATER_COUNT), timeout_s=60)
    later.assert_ok()
    resumed = node_client(
        "consume", cluster.namesrv_addr, TOPIC, GROUP, str(LATER_COUNT + 1), str(CONSUME_TIMEOUT_S), "none",
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    resumed.assert_ok()
    got = {line["body"]: line["msgId"] for line in resumed.of("received")}
    assert sorted(got) == [*(f"node-{index}" for index in range(LATER_COUNT)), "node-timed"], resumed.events
    # a timed message is stored again when due: its offset id changes, the plain ones' must not
    assert all(got[line["body"]] == line["msgId"] for line in later.of("sent") if line["kind"] == "plain")
