"""mqadmin (org.apache.rocketmq.tools.command.MQAdminStartup, RocketMQ 4.9.7) against shoal: the commands that work.

The commands that fail are listed with their failing request code in docs/compatibility.md. mqadmin
does not depend on the flush type, so this module runs one ASYNC_FLUSH cluster only.
"""

from __future__ import annotations

import re
from typing import Any

import pytest


@pytest.fixture(scope="module")
def shoal(shoal_async_only: Any) -> Any:
    """Overrides conftest's per-flush-type `shoal`: one ASYNC_FLUSH cluster."""
    return shoal_async_only


def assert_no_exception(output: str) -> None:
    assert "Exception" not in output, output


def test_topic_commands_update_route_status_list_and_delete(java: Any, shoal: Any, unique: Any) -> None:
    """updateTopic (8 queues), topicRoute, topicStatus, topicList, deleteTopic: each answers as RocketMQ's does."""
    topic = unique("mqadmin_topic")
    ns = ("-n", shoal.namesrv_addr)
    output = java.mqadmin("updateTopic", *ns, "-b", shoal.broker_addr, "-t", topic, "-r", "8", "-w", "8")
    assert_no_exception(output)
    assert f"create topic to {shoal.broker_addr} success." in output
    route = java.mqadmin("topicRoute", *ns, "-t", topic)
    assert_no_exception(route)
    assert '"readQueueNums":8' in route and '"brokerName":"broker-a"' in route
    status = java.mqadmin("topicStatus", *ns, "-t", topic)
    assert_no_exception(status)
    assert len(re.findall(r"^broker-a\s+\d+\s+0\s+0\s", status, re.MULTILINE)) == 8, status
    assert topic in java.mqadmin("topicList", *ns).split()
    deleted = java.mqadmin("deleteTopic", *ns, "-c", "DefaultCluster", "-t", topic)
    assert_no_exception(deleted)
    assert f"delete topic [{topic}] from NameServer success." in deleted
    assert topic not in java.mqadmin("topicList", *ns).split()


def test_message_and_consumer_commands(java: Any, shoal: Any, unique: Any) -> None:
    """queryMsgByKey, printMsg, consumerConnection, consumerProgress, brokerStatus, wipeWritePerm/addWritePerm."""
    topic, group = unique("mqadmin_msg"), unique("mqadmin_group")
    ns = ("-n", shoal.namesrv_addr)
    sent = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": 4, "keys": "mk"}
    ).of("sent")
    assert len(sent) == 4
    by_key = java.mqadmin("queryMsgByKey", *ns, "-t", topic, "-k", "mk-2")
    assert_no_exception(by_key)
    assert sent[2]["msgId"] in by_key
    printed = java.mqadmin("printMsg", *ns, "-t", topic)
    assert_no_exception(printed)
    assert all(line["msgId"] in printed for line in sent)

    consumer = java.spawn("PushConsume", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic})
    consumer.wait_for(lambda proc: len(proc.of("received")) >= 4, 60, "4 messages")
    connection = java.mqadmin("consumerConnection", *ns, "-g", group)
    assert_no_exception(connection)
    assert "JAVA" in connection and "V4_9_7" in connection and "CLUSTERING" in connection
    assert consumer.of("started")[0]["clientId"].split("@")[1] in connection

    def progress_caught_up(_: Any) -> bool:
        progress = java.mqadmin("consumerProgress", *ns, "-g", group)
        return "Diff Total: 0" in progress and topic in progress

    consumer.wait_for(progress_caught_up, 60, "consumerProgress with Diff Total: 0")

    status = java.mqadmin("brokerStatus", *ns, "-b", shoal.broker_addr)
    assert_no_exception(status)
    assert re.search(r"^brokerRole\s+: ASYNC_MASTER$", status, re.MULTILINE), status
    wiped = java.mqadmin("wipeWritePerm", *ns, "-b", "broker-a")
    assert f"wipe write perm of broker[broker-a] in name server[{shoal.namesrv_addr}] OK" in wiped
    added = java.mqadmin("addWritePerm", *ns, "-b", "broker-a")
    assert f"add write perm of broker[broker-a] in name server[{shoal.namesrv_addr}] OK" in added
