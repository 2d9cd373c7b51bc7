"""Message traces (`enableMsgTrace=true`) from RocketMQ 4.9.7's Java client into Shoal, read back
and decoded by `shoal trace` (shoal.formats.trace)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.conftest import wait_until

COUNT = 3
WAIT_S = 60.0
CLI_TIMEOUT_S = 60.0


def shoal_trace(namesrv_addr: str, topic: str, *msg_ids: str) -> list[dict[str, Any]]:
    """`shoal trace` as a user runs it; its JSON lines."""
    ids = [arg for msg_id in msg_ids for arg in ("--msg-id", msg_id)]
    result = subprocess.run(
        [sys.executable, "-m", "shoal.cli.main", "trace", "-n", namesrv_addr, "--topic", topic, *ids],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "undecodable" not in result.stderr, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("trace_topic", ["RMQ_SYS_TRACE_TOPIC", "CustomTraceTopic"])
def test_traced_producer_and_consumer_records_decode_to_pub_sub_before_sub_after(
    java: Any, shoal: Any, unique: Any, trace_topic: str
) -> None:
    """Goal: a traced producer's sends and a traced consumer's consumes land as trace records in
    the trace topic (RocketMQ's default or a customized one), and `shoal trace` decodes them to a
    Pub, SubBefore and SubAfter naming each message id, its topic, keys and groups, plus an
    EndTransaction for a committed transactional message. Method: Trace.java, then the CLI until
    every record arrived (the dispatchers send in the background)."""
    topic, group = unique("Traced"), unique("traced_cg")
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "group": group, "count": COUNT}
    if trace_topic != "RMQ_SYS_TRACE_TOPIC":
        trace_topic = unique(trace_topic)
        args["traceTopic"] = trace_topic
    result = java.run("Trace", args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.of("done")[0]["unconsumed"] == 0, result.events
    sent = {line["msgId"]: line for line in result.of("sent")}
    (transaction,) = result.of("sentTransaction")
    ids = [*sent, transaction["msgId"]]

    def types_by_id() -> dict[str, set[str]]:
        found: dict[str, set[str]] = {msg_id: set() for msg_id in ids}
        for record in shoal_trace(shoal.namesrv_addr, trace_topic, *ids):
            found[record["msgId"]].add(record["traceType"])
        return found

    expected = {msg_id: {"Pub", "SubBefore", "SubAfter"} for msg_id in sent}
    expected[transaction["msgId"]] = {"Pub", "EndTransaction", "SubBefore", "SubAfter"}
    wait_until(lambda: types_by_id() == expected, WAIT_S, 1.0, what=f"every trace record in {trace_topic}")

    records = shoal_trace(shoal.namesrv_addr, trace_topic, *ids)
    for record in records:
        msg_id = record["msgId"]
        if record["traceType"] == "Pub":
            assert record["topic"] == topic and record["success"] is True
            assert record["groupName"] in (f"{group}_producer", f"{group}_tx")
            if msg_id in sent:
                assert record["keys"] == sent[msg_id]["keys"] and record["tags"] == "TagT"
                assert record["offsetMsgId"] == sent[msg_id]["offsetMsgId"]
                assert record["msgType"] == "Normal_Msg" and record["bodyLength"] == len("traced-0")
        elif record["traceType"] == "SubBefore":
            assert record["groupName"] == group and record["retryTimes"] == 0
        elif record["traceType"] == "SubAfter":
            assert record["groupName"] == group and record["success"] is True
        else:
            assert record["traceType"] == "EndTransaction" and msg_id == transaction["msgId"]
            assert record["transactionState"] == "COMMIT_MESSAGE" and record["topic"] == topic
