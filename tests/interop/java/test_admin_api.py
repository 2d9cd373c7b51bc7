"""Admin through the Java client's API (MQAdmin on DefaultMQProducer, RocketMQ 4.9.7) against shoal."""

from __future__ import annotations

import time
from typing import Any

import pytest

INDEX_TIMEOUT_S = 20.0


@pytest.mark.parametrize("serialize_type", ["JSON", "ROCKETMQ"])
def test_query_by_key_view_by_id_and_search_offset(java: Any, shoal: Any, unique: Any, serialize_type: str) -> None:
    """queryMessage(topic, key), viewMessage(msgId and offsetMsgId), searchOffset/min/max/earliest per queue."""
    java.serialize_type = serialize_type
    topic = unique("admin")
    before_ms = int(time.time() * 1000) - 1
    result = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 8, "keys": "akey"}
    )
    assert not result.of("error"), result.events
    sent = result.of("sent")
    target = sent[3]

    def query_by_key() -> list[dict[str, Any]]:
        found = java.run("Admin", {"namesrv": shoal.namesrv_addr, "op": "queryByKey", "topic": topic, "key": "akey-3"})
        return [line for line in found.of("found") if line.get("keys") == "akey-3"]

    deadline = time.monotonic() + INDEX_TIMEOUT_S
    found = query_by_key()
    while not found and time.monotonic() < deadline:
        found = query_by_key()
    assert [line["body"] for line in found] == ["body-3"]

    for message_id in (target["msgId"], target["offsetMsgId"]):
        viewed = java.run(
            "Admin", {"namesrv": shoal.namesrv_addr, "op": "viewById", "topic": topic, "msgId": message_id}
        )
        assert not viewed.of("error"), viewed.events
        (message,) = viewed.of("found")
        assert message["body"] == "body-3"
        assert message["keys"] == "akey-3"
        assert (message["queueId"], message["queueOffset"]) == (target["queueId"], target["queueOffset"])

    searched = java.run(
        "Admin", {"namesrv": shoal.namesrv_addr, "op": "searchOffset", "topic": topic, "timestampMs": before_ms}
    )
    assert not searched.of("error"), searched.events
    queues = {line["queueId"]: line for line in searched.of("queue")}
    per_queue: dict[int, int] = {}
    for line in sent:
        per_queue[line["queueId"]] = per_queue.get(line["queueId"], 0) + 1
    for queue_id, count in per_queue.items():
        assert queues[queue_id]["minOffset"] == 0
        assert queues[queue_id]["maxOffset"] == count
        assert queues[queue_id]["searchOffset"] == 0
        assert queues[queue_id]["earliestMsgStoreTime"] >= before_ms
    later = java.run(
        "Admin",
        {"namesrv": shoal.namesrv_addr, "op": "searchOffset", "topic": topic, "timestampMs": int(time.time() * 1000)},
    )
    for line in later.of("queue"):
        if line["queueId"] in per_queue:
            assert line["searchOffset"] in {per_queue[line["queueId"]] - 1, per_queue[line["queueId"]]}
