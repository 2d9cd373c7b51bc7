"""The RocketMQ Go client v2.1.2 against real Shoal processes: sends of every kind, a push consumer
with a retry, a group that resumes from its committed offsets, ordered sends to an orderly consumer,
a tag filter, and transactions with the broker's check."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from shoal.protocol import RequestCode, ResponseCode
from shoal.remoting import RemotingClient

TOPIC = "GoInterop"
GROUP = "go_interop_group"
SYNC_COUNT = 8
FAIL_BODY = "go-2"
"""The consumer answers ConsumeRetryLater to this message's first delivery."""
OTHER_BODIES = ("batch-0", "batch-1", "async", "oneway", "delayed")
CONSUME_TIMEOUT_S = 90
"""The retried message comes back through %RETRY%<group> after level 3 (10 s), and the Go consumer pulls
that topic once its 30 s route refresh has found it (the heartbeat creates it after the first query)."""
LATER_COUNT = 3
ORDERED_COUNT = 24
ORDER_KEYS = 4
SUSPENDED_BODY = "o-order-1-2"
"""The orderly consumer answers SuspendCurrentQueueAMoment to this message's first delivery."""
QUICK_CHECKS = {"transactionTimeOut": "1000", "transactionCheckInterval": "1000"}
"""A half message left UNKNOW is checked 1 s after it was stored, not after 6 s / 30 s."""
TX_WAIT_S = 30
DEFAULT_QUEUES = 4  # defaultTopicQueueNums: the queues a topic auto-created by a send gets


@pytest.mark.slow
def test_go_producer_and_push_consumer_exchange_every_message(cluster: Any, go_client: Any) -> None:
    """Goal: what the Go client sends (sync with tag, key and a property; a batch; async; oneway; delay
    level 1) to a topic it auto-creates, its push consumer started right after receives exactly once,
    fields intact; a message it answers RetryLater to comes back once with reconsumeTimes 1 under its
    own topic; a second run of the group gets only what was sent after the first committed.
    Method: the Go client's produce and consume commands against a NameServer and a Broker process."""
    produced = go_client("produce", cluster.namesrv_addr, TOPIC, str(SYNC_COUNT), timeout_s=60)
    produced.assert_ok()
    sent = produced.of("sent")
    assert [line["kind"] for line in sent] == ["sync"] * SYNC_COUNT + ["batch", "async", "delayed"], sent
    assert all(line["status"] == 0 for line in sent), sent  # SEND_OK
    sent_ids = {line["body"]: line["msgId"] for line in sent if line["kind"] in ("sync", "async", "delayed")}
    assert len(set(sent_ids.values())) == len(sent_ids), sent_ids

    expected = [f"go-{index}" for index in range(SYNC_COUNT)] + list(OTHER_BODIES)
    consumed = go_client(
        "consume", cluster.namesrv_addr, TOPIC, GROUP, str(len(expected)), str(CONSUME_TIMEOUT_S), FAIL_BODY,
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    consumed.assert_ok()
    received = consumed.of("received")
    assert Counter(line["body"] for line in received) == Counter(expected), consumed.events
    (refused,) = consumed.of("retryLater")
    assert refused["body"] == FAIL_BODY and refused["reconsumeTimes"] == 0, refused
    by_body = {line["body"]: line for line in received}
    retried = by_body[FAIL_BODY]
    assert (retried["reconsumeTimes"], retried["topic"], retried["msgId"]) == (1, TOPIC, sent_ids[FAIL_BODY])
    for index in range(SYNC_COUNT):
        line = by_body[f"go-{index}"]
        assert (line["tags"], line["keys"], line["origin"]) == ("TagG", f"k{index}", "go"), line
        assert line["msgId"] == sent_ids[f"go-{index}"], line
    for body in ("async", "delayed"):
        assert by_body[body]["msgId"] == sent_ids[body], by_body[body]

    later = go_client("produce", cluster.namesrv_addr, TOPIC, str(LATER_COUNT), timeout_s=60)
    later.assert_ok()
    later_bodies = [f"go-{index}" for index in range(LATER_COUNT)] + list(OTHER_BODIES)
    resumed = go_client(
        "consume", cluster.namesrv_addr, TOPIC, GROUP, str(len(later_bodies)), str(CONSUME_TIMEOUT_S), "none",
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    resumed.assert_ok()
    later_ids = {line["msgId"] for line in later.of("sent") if line["kind"] != "batch"}
    got = resumed.of("received")
    assert Counter(line["body"] for line in got) == Counter(later_bodies), resumed.events
    assert later_ids <= {line["msgId"] for line in got}, (later_ids, got)


@pytest.mark.slow
def test_go_ordered_sends_reach_an_orderly_consumer_in_order_and_a_tag_filter(cluster: Any, go_client: Any) -> None:
    """Goal: messages the Go client sends with a sharding key (hash queue selector) land in one queue
    per key, an orderly Go consumer gets each key's messages in send order, also across a suspended
    delivery it gets again, and a consumer subscribed to TagA gets exactly the TagA messages.
    Method: produce-ordered (24 messages, 4 keys, TagA/TagB alternating); an orderly consume that
    suspends one message once; a second group with expression TagA."""
    produced = go_client(
        "produce-ordered", cluster.namesrv_addr, "GoOrdered", str(ORDERED_COUNT), str(ORDER_KEYS), timeout_s=60
    )
    produced.assert_ok()
    queue_of_key: dict[str, set[int]] = {}
    for line in produced.of("sent"):
        queue_of_key.setdefault(line["body"].rsplit("-", 1)[0], set()).add(line["queueId"])
    assert len(queue_of_key) == ORDER_KEYS and all(len(queues) == 1 for queues in queue_of_key.values()), queue_of_key

    consumed = go_client(
        "consume", cluster.namesrv_addr, "GoOrdered", "go_orderly_group", str(ORDERED_COUNT), str(CONSUME_TIMEOUT_S),
        SUSPENDED_BODY, "*", "orderly",
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    consumed.assert_ok()
    (suspended,) = consumed.of("retryLater")
    assert suspended["body"] == SUSPENDED_BODY, suspended
    received = [line["body"] for line in consumed.of("received")]
    assert Counter(received) == Counter(line["body"] for line in produced.of("sent")), consumed.events
    for key in queue_of_key:
        sequence = [int(body.rsplit("-", 1)[1]) for body in received if body.rsplit("-", 1)[0] == key]
        assert sequence == sorted(sequence) == list(range(ORDERED_COUNT // ORDER_KEYS)), (key, sequence)

    tag_a = go_client(
        "consume", cluster.namesrv_addr, "GoOrdered", "go_tag_group", str(ORDERED_COUNT // 2), str(CONSUME_TIMEOUT_S),
        "none", "TagA",
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    tag_a.assert_ok()
    wanted = {line["body"] for index, line in enumerate(produced.of("sent")) if index % 2 == 0}
    got = tag_a.of("received")
    assert {line["tags"] for line in got} == {"TagA"} and Counter(line["body"] for line in got) == Counter(wanted)


async def _messages_in(address: str, topic: str) -> int:
    """The sum of the topic's queues' max offsets: how many messages its consume queues hold."""
    client = RemotingClient()
    try:
        total = 0
        for queue_id in range(DEFAULT_QUEUES):
            fields = {"topic": topic, "queueId": str(queue_id)}
            response = await client.invoke(address, RequestCode.GET_MAX_OFFSET, fields, timeout_s=10.0)
            assert response.code == ResponseCode.SUCCESS, response.remark
            total += int(response.ext_fields["offset"])
        return total
    finally:
        await client.close()


@pytest.mark.slow
def test_go_transactions_commit_roll_back_and_answer_the_brokers_check(cluster_factory: Any, go_client: Any) -> None:
    """Goal: a Go transaction producer's committed message is delivered, its rolled-back one never, and
    one it leaves UNKNOW is checked back over the producer's own connection, answered COMMIT and then
    delivered. Method: a broker checking after 1 s; transact; a consumer for the committed two; the
    topic's consume queues hold exactly two messages."""
    running = cluster_factory(QUICK_CHECKS)
    transacted = go_client("transact", running.namesrv_addr, "GoTx", str(TX_WAIT_S), timeout_s=TX_WAIT_S)
    transacted.assert_ok()
    states = {line["body"]: (line["status"], line["state"]) for line in transacted.of("sent")}
    assert states == {"tx-commit": (0, 1), "tx-rollback": (0, 2), "tx-unknown": (0, 3)}, transacted.events
    checked = transacted.of("checked")  # again only if the broker checked before the answer arrived
    assert checked and {line["body"] for line in checked} == {"tx-unknown"}, transacted.events
    sent_id = next(line["msgId"] for line in transacted.of("sent") if line["body"] == "tx-unknown")
    assert checked[0]["msgId"] == sent_id, (checked, sent_id)

    consumed = go_client(
        "consume", running.namesrv_addr, "GoTx", "go_tx_group", "2", str(CONSUME_TIMEOUT_S), "none",
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    consumed.assert_ok()
    assert sorted(line["body"] for line in consumed.of("received")) == ["tx-commit", "tx-unknown"], consumed.events
    assert asyncio.run(_messages_in(running.broker_addr, "GoTx")) == 2
