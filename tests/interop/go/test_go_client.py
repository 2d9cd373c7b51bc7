"""The RocketMQ Go client v2.1.2 against real Shoal processes: sends of every kind, a push consumer
with a retry, and a group that resumes from its committed offsets."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

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


def _assert_ok(run: Any) -> None:
    """The run exited 0 and reported no error (conftest.GoRun)."""
    assert run.returncode == 0 and not run.of("error"), (run.events, run.stderr[-2000:])


@pytest.mark.slow
def test_go_producer_and_push_consumer_exchange_every_message(cluster: Any, go_client: Any) -> None:
    """Goal: what the Go client sends (sync with tag, key and a property; a batch; async; oneway; delay
    level 1) to a topic it auto-creates, its push consumer started right after receives exactly once,
    fields intact; a message it answers RetryLater to comes back once with reconsumeTimes 1 under its
    own topic; a second run of the group gets only what was sent after the first committed.
    Method: the Go client's produce and consume commands against a NameServer and a Broker process."""
    produced = go_client("produce", cluster.namesrv_addr, TOPIC, str(SYNC_COUNT), timeout_s=60)
    _assert_ok(produced)
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
    _assert_ok(consumed)
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
    _assert_ok(later)
    later_bodies = [f"go-{index}" for index in range(LATER_COUNT)] + list(OTHER_BODIES)
    resumed = go_client(
        "consume", cluster.namesrv_addr, TOPIC, GROUP, str(len(later_bodies)), str(CONSUME_TIMEOUT_S), "none",
        timeout_s=CONSUME_TIMEOUT_S,
    )  # fmt: skip
    _assert_ok(resumed)
    later_ids = {line["msgId"] for line in later.of("sent") if line["kind"] != "batch"}
    got = resumed.of("received")
    assert Counter(line["body"] for line in got) == Counter(later_bodies), resumed.events
    assert later_ids <= {line["msgId"] for line in got}, (later_ids, got)
