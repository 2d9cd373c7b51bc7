"""TransactionMQProducer (Apache RocketMQ 4.9.7, Java) against shoal namesrv + broker, ASYNC_FLUSH and SYNC_FLUSH.

The broker here checks half messages after 1 s, every 1 s (transactionTimeOut, transactionCheckInterval).
"""

from __future__ import annotations

from typing import Any, cast

CHECK_TIMEOUT_MS = 60_000


def read_back(java: Any, shoal: Any, topic: str, count: int, timeout_ms: int) -> list[dict[str, Any]]:
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


def test_commit_makes_visible_and_rollback_discards(java: Any, shoal: Any, unique: Any) -> None:
    """executeLocalTransaction answers COMMIT, ROLLBACK, COMMIT: exactly the two committed messages are readable."""
    topic, group = unique("tx"), unique("tx_group")
    java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1})
    result = java.run(
        "Transaction",
        {
            "namesrv": shoal.namesrv_addr,
            "group": group,
            "topic": topic,
            "actions": "COMMIT_MESSAGE,ROLLBACK_MESSAGE,COMMIT_MESSAGE",
        },
    )
    assert not result.of("error"), result.events
    sent = result.of("sent")
    assert [line["status"] for line in sent] == ["SEND_OK"] * 3
    assert [line["localState"] for line in sent] == ["COMMIT_MESSAGE", "ROLLBACK_MESSAGE", "COMMIT_MESSAGE"]
    received = read_back(java, shoal, topic, 4, timeout_ms=5_000)
    bodies = sorted(line["body"] for line in received)
    assert bodies == ["body-0", "tx-0-COMMIT_MESSAGE", "tx-2-COMMIT_MESSAGE"]
    committed = {line["msgId"] for line in sent if line["action"] == "COMMIT_MESSAGE"}
    assert committed <= {line["msgId"] for line in received}
    assert all("TRAN_MSG" not in line["properties"] or line["body"].startswith("tx-") for line in received)


def test_unknow_is_resolved_by_check_back(java: Any, shoal: Any, unique: Any) -> None:
    """UNKNOW, then checkLocalTransaction answers COMMIT for one producer and ROLLBACK for another."""
    topic = unique("txcheck")
    java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1})
    base = {"namesrv": shoal.namesrv_addr, "topic": topic, "actions": "UNKNOW", "waitChecks": 1}
    committing = java.spawn(
        "Transaction", {**base, "group": unique("tx_commit"), "checkAnswer": "COMMIT_MESSAGE", "timeoutMs": 60_000}
    )
    rolling_back = java.spawn(
        "Transaction", {**base, "group": unique("tx_rollback"), "checkAnswer": "ROLLBACK_MESSAGE", "timeoutMs": 60_000}
    )
    for producer in (committing, rolling_back):
        producer.wait_for(lambda proc: bool(proc.of("done")), CHECK_TIMEOUT_MS / 1000, "a check and shutdown")
        assert not producer.of("error"), producer.events
        (checked,) = producer.of("checked")[:1]
        (sent,) = producer.of("sent")
        # the check's transactionId is the message's UNIQ_KEY; TransactionSendResult's stays null (as with RocketMQ's
        # broker, whose SEND response carries no transactionId)
        assert checked["transactionId"] == sent["msgId"]
        assert checked["properties"]["TRAN_MSG"] == "true"
    received = read_back(java, shoal, topic, 3, timeout_ms=5_000)
    assert sorted(line["body"] for line in received) == ["body-0", "tx-0-UNKNOW"]


def test_second_producer_of_the_group_answers_checks_after_the_first_dies(java: Any, shoal: Any, unique: Any) -> None:
    """Producer 1 sends UNKNOW and is SIGKILLed; producer 2 of the same group gets the check and commits."""
    topic, group = unique("txfail"), unique("tx_failover")
    java.run("Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 1})
    args = {"namesrv": shoal.namesrv_addr, "topic": topic, "group": group}
    first = java.spawn(
        "Transaction",
        {**args, "actions": "UNKNOW", "checkAnswer": "UNKNOW", "waitChecks": 1000, "timeoutMs": 120_000},
    )
    first.wait_for(lambda proc: bool(proc.of("sent")), 30, "the half message")
    (sent,) = first.of("sent")
    first.kill()
    second = java.run(
        "Transaction",
        {**args, "checkAnswer": "COMMIT_MESSAGE", "waitChecks": 1, "timeoutMs": CHECK_TIMEOUT_MS},
        timeout_s=CHECK_TIMEOUT_MS / 1000 + 30,
    )
    assert not second.of("error"), second.events
    checked = second.of("checked")
    assert checked, f"no check reached the second producer: {second.events}"
    assert checked[0]["transactionId"] == sent["msgId"]
    received = read_back(java, shoal, topic, 2, timeout_ms=10_000)
    assert sorted(line["body"] for line in received) == ["body-0", "tx-0-UNKNOW"]
