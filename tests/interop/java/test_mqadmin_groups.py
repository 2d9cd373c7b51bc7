"""mqadmin (RocketMQ 4.9.7) group and offset commands, and DefaultMQAdminExt's resetOffsetByTimestamp, against shoal.

updateSubGroup / deleteSubGroup (persisted, consumeEnable and retryMaxTimes in effect), producerConnection,
queryMsgById / queryMsgByUniqueKey / queryMsgByOffset (the message, then which groups consumed it; with -g/-d
the broker forwards CONSUME_MESSAGE_DIRECTLY to the consumer) and resetOffsetByTime (a running push consumer
gets RESET_CONSUMER_CLIENT_OFFSET and consumes again; an offline group falls back to committed offsets).
One ASYNC_FLUSH cluster: the flush type changes none of this.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from typing import Any, cast

import pytest

from shoal.formats.message_id import decode_offset_msg_id
from shoal.protocol import PullSysFlag, RemotingCommand, RequestCode, ResponseCode
from shoal.protocol.bodies import ConsumerOffsetSerializeWrapper
from shoal.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    CustomHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    PullMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from shoal.remoting import RemotingClient

CONSUME_TIMEOUT_S = 60.0
RESET_REACHES_CONSUMER_TIMEOUT_S = 60.0  # the 4.9.7 client sleeps 10 s before applying a reset


@pytest.fixture(scope="module")
def shoal(shoal_async_only: Any) -> Any:
    """Overrides conftest's per-flush-type `shoal`: one ASYNC_FLUSH cluster."""
    return shoal_async_only


def assert_no_exception(output: str) -> None:
    assert "Exception" not in output, output


def call(address: str, code: int, header: CustomHeader | None = None, body: bytes | None = None) -> RemotingCommand:
    """One request over a fresh Python remoting connection (what a non-Java client sends)."""

    async def once() -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(address, code, header.to_ext_fields() if header else None, body, timeout_s=10)
        finally:
            await client.close()

    return asyncio.run(once())


def create_topic(shoal: Any, topic: str, queues: int) -> None:
    header = CreateTopicRequestHeader(
        topic=topic,
        default_topic="TBW102",
        read_queue_nums=queues,
        write_queue_nums=queues,
        perm=6,
        topic_filter_type="SINGLE_TAG",
    )
    response = call(shoal.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)
    assert response.code == ResponseCode.SUCCESS, response.remark


def committed_offsets(shoal: Any, topic: str, group: str) -> dict[int, int]:
    response = call(shoal.broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert response.code == ResponseCode.SUCCESS, response.remark
    table = ConsumerOffsetSerializeWrapper.from_json(response.body or b"{}").offset_table
    return table.get(f"{topic}@{group}", {})


def max_offset(shoal: Any, topic: str, queue_id: int) -> int:
    response = call(
        shoal.broker_addr, RequestCode.GET_MAX_OFFSET, GetMaxOffsetRequestHeader(topic=topic, queue_id=queue_id)
    )
    assert response.code == ResponseCode.SUCCESS, response.remark
    return GetMaxOffsetResponseHeader.from_ext_fields(response.ext_fields).offset


def pull(shoal: Any, group: str, topic: str) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=0,
        queue_offset=0,
        max_msg_nums=1,
        sys_flag=PullSysFlag.SUBSCRIPTION,  # the expression travels with the pull
        commit_offset=0,
        suspend_timeout_ms=0,
        subscription="*",
        sub_version=0,
    )
    return call(shoal.broker_addr, RequestCode.PULL_MESSAGE, header)


def group_file(shoal: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((shoal.store_dir / "config" / "subscriptionGroup.json").read_text())
    return cast("dict[str, Any]", document["subscriptionGroupTable"])


def produce(java: Any, shoal: Any, topic: str, count: int) -> list[dict[str, Any]]:
    result = java.run(
        "Produce", {"namesrv": shoal.namesrv_addr, "topic": topic, "mode": "sync", "count": count, "keys": "gk"}
    )
    assert not result.of("error"), result.events
    sent = result.of("sent")
    assert len(sent) == count, (result.events, result.stderr[-2000:])
    return cast("list[dict[str, Any]]", sent)


def consume_all(java: Any, shoal: Any, group: str, topic: str, sent: list[dict[str, Any]], queues: int) -> Any:
    """A running push consumer that has consumed `sent` and committed every queue's offset."""
    consumer = java.spawn("PushConsume", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic})
    ids = {line["msgId"] for line in sent}
    consumer.wait_for(
        lambda proc: ids <= {line["msgId"] for line in proc.of("received")}, CONSUME_TIMEOUT_S, "every message"
    )
    per_queue = Counter(line["queueId"] for line in sent)
    expected = {queue_id: per_queue.get(queue_id, 0) for queue_id in range(queues)}
    consumer.wait_for(
        lambda _: committed_offsets(shoal, topic, group) == expected, CONSUME_TIMEOUT_S, f"committed {expected}"
    )
    return consumer


def deliveries(consumer: Any) -> Counter[str]:
    return Counter(line["msgId"] for line in consumer.of("received"))


def test_update_sub_group_is_persisted_and_consume_enable_false_refuses_pulls(
    java: Any, shoal: Any, unique: Any
) -> None:
    """updateSubGroup -s false: subscriptionGroup.json holds it and pulls get NO_PERMISSION; -s true lifts it."""
    topic, group = unique("grp_topic"), unique("grp_sub")
    ns = ("-n", shoal.namesrv_addr)
    create_topic(shoal, topic, 1)
    produce(java, shoal, topic, 1)
    assert pull(shoal, group, topic).code == ResponseCode.SUCCESS

    output = java.mqadmin(
        "updateSubGroup", *ns, "-b", shoal.broker_addr, "-g", group, "-s", "false", "-r", "3", "-q", "2", "-w", "0"
    )
    assert_no_exception(output)
    assert f"create subscription group to {shoal.broker_addr} success." in output
    stored = group_file(shoal)[group]
    assert stored["consumeEnable"] is False
    assert (stored["retryMaxTimes"], stored["retryQueueNums"], stored["whichBrokerWhenConsumeSlowly"]) == (3, 2, 0)
    assert stored["consumeBroadcastEnable"] is False  # mqadmin's own default for a new config
    refused = pull(shoal, group, topic)
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")

    output = java.mqadmin("updateSubGroup", *ns, "-c", "DefaultCluster", "-g", group, "-s", "true")
    assert_no_exception(output)
    assert group_file(shoal)[group]["consumeEnable"] is True
    assert pull(shoal, group, topic).code == ResponseCode.SUCCESS


def test_delete_sub_group_keeps_offsets_unless_remove_offset_is_given(java: Any, shoal: Any, unique: Any) -> None:
    """deleteSubGroup -b removes the group from subscriptionGroup.json; -c ... -r true also its committed offsets."""
    topic, group = unique("grp_topic"), unique("grp_del")
    ns = ("-n", shoal.namesrv_addr)
    create_topic(shoal, topic, 1)
    assert "success" in java.mqadmin("updateSubGroup", *ns, "-b", shoal.broker_addr, "-g", group)
    assert group in group_file(shoal)
    header = UpdateConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=0, commit_offset=7)
    assert call(shoal.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, header).code == ResponseCode.SUCCESS

    output = java.mqadmin("deleteSubGroup", *ns, "-b", shoal.broker_addr, "-g", group)
    assert_no_exception(output)
    assert f"delete subscription group [{group}] from broker [{shoal.broker_addr}] success." in output
    assert group not in group_file(shoal)
    assert committed_offsets(shoal, topic, group) == {0: 7}

    output = java.mqadmin("deleteSubGroup", *ns, "-c", "DefaultCluster", "-g", group, "-r", "true")
    assert_no_exception(output)
    assert (
        f"delete subscription group [{group}] from broker [{shoal.broker_addr}] in cluster [DefaultCluster]" in output
    )
    assert committed_offsets(shoal, topic, group) == {}


def test_retry_max_times_decides_when_a_send_back_goes_to_the_dlq(java: Any, shoal: Any, unique: Any) -> None:
    """A send-back without maxReconsumeTimes (non-Java clients) obeys retryMaxTimes: 16 -> %RETRY%, 0 -> %DLQ%."""
    topic, group = unique("grp_topic"), unique("grp_retry")
    create_topic(shoal, topic, 1)
    (sent,) = produce(java, shoal, topic, 1)
    _host, physical_offset = decode_offset_msg_id(sent["offsetMsgId"])
    send_back = ConsumerSendMsgBackRequestHeader(offset=physical_offset, group=group, delay_level=0)
    dlq = f"%DLQ%{group}"

    assert call(shoal.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, send_back).code == ResponseCode.SUCCESS
    assert max_offset(shoal, dlq, 0) == 0  # default retryMaxTimes 16: retried, not dead

    output = java.mqadmin("updateSubGroup", "-n", shoal.namesrv_addr, "-b", shoal.broker_addr, "-g", group, "-r", "0")
    assert_no_exception(output)
    assert call(shoal.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, send_back).code == ResponseCode.SUCCESS
    assert max_offset(shoal, dlq, 0) == 1


def test_producer_connection_lists_the_live_producer(java: Any, shoal: Any, unique: Any) -> None:
    """producerConnection prints the producer's clientId, address, language and version; an unknown group fails."""
    topic, group = unique("grp_topic"), unique("grp_producer")
    create_topic(shoal, topic, 1)
    producer = java.spawn("ProducerHold", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic})
    producer.wait_for(lambda proc: bool(proc.of("started")), CONSUME_TIMEOUT_S, "started")
    client_id = producer.of("started")[0]["clientId"]
    output = java.mqadmin("producerConnection", "-n", shoal.namesrv_addr, "-g", group, "-t", topic)
    assert_no_exception(output)
    assert re.search(rf"^0001\s+{re.escape(client_id)}\s+127\.0\.0\.1:\d+\s+JAVA\s+V4_9_7$", output, re.MULTILINE), (
        output
    )
    nobody = unique("nobody")
    unknown = java.mqadmin("producerConnection", "-n", shoal.namesrv_addr, "-g", nobody, "-t", topic)
    assert f"CODE: 1  DESC: the producer group[{nobody}] not exist" in unknown, unknown


def test_query_msg_commands_show_which_groups_consumed_and_consume_directly(java: Any, shoal: Any, unique: Any) -> None:
    """queryMsgById / ByUniqueKey / ByOffset print the message and 'trackType=CONSUMED' for the group; with -g/-d the
    consumer consumes it again (CONSUME_MESSAGE_DIRECTLY through the broker) and mqadmin prints CR_SUCCESS."""
    topic, group = unique("grp_topic"), unique("grp_track")
    ns = ("-n", shoal.namesrv_addr)
    create_topic(shoal, topic, 2)
    sent = produce(java, shoal, topic, 4)
    consumer = consume_all(java, shoal, group, topic, sent, 2)
    client_id = consumer.of("started")[0]["clientId"]
    target = sent[1]
    track = f"MessageTrack [consumerGroup={group}, trackType=CONSUMED, exceptionDesc=null]"

    by_id = java.mqadmin("queryMsgById", *ns, "-i", target["offsetMsgId"])
    by_key = java.mqadmin("queryMsgByUniqueKey", *ns, "-i", target["msgId"], "-t", topic)
    by_offset = java.mqadmin(
        "queryMsgByOffset", *ns, "-t", topic, "-b", "broker-a", "-i", str(target["queueId"]), "-o",
        str(target["queueOffset"]),
    )  # fmt: skip
    for output in (by_id, by_key, by_offset):
        assert_no_exception(output)
        assert re.search(rf"^Keys:\s+\[{re.escape(target['keys'])}\]$", output, re.MULTILINE), output
        assert track in output, output
    assert re.search(rf"^OffsetID:\s+{target['offsetMsgId']}$", by_id, re.MULTILINE), by_id

    def direct_deliveries(proc: Any) -> int:  # a MessageExt decoded from the broker's body: msgId is the offset id
        return sum(line["msgId"] == target["offsetMsgId"] for line in proc.of("received"))

    assert direct_deliveries(consumer) == 0
    pushed = java.mqadmin("queryMsgById", *ns, "-i", target["offsetMsgId"], "-g", group, "-d", client_id)
    assert_no_exception(pushed)
    assert "ConsumeMessageDirectlyResult [" in pushed and "consumeResult=CR_SUCCESS" in pushed, pushed
    pushed = java.mqadmin("queryMsgByUniqueKey", *ns, "-i", target["msgId"], "-t", topic, "-g", group, "-d", client_id)
    assert "consumeResult=CR_SUCCESS" in pushed, pushed
    consumer.wait_for(lambda proc: direct_deliveries(proc) == 2, 10, "two direct deliveries of the message")
    offline = java.mqadmin("queryMsgById", *ns, "-i", target["offsetMsgId"], "-g", group, "-d", "10.0.0.1@nobody")
    assert f"The Consumer <{group}> <10.0.0.1@nobody> not online" in offline


def test_mqadmin_reset_offset_by_time_makes_a_running_consumer_consume_again(
    java: Any, shoal: Any, unique: Any
) -> None:
    """resetOffsetByTime to before the first message: the broker pushes offset 0 to the running consumer, which
    consumes every message a second time; mqadmin prints the new offset of each queue."""
    topic, group = unique("grp_topic"), unique("grp_reset")
    create_topic(shoal, topic, 2)
    before_ms = int(time.time() * 1000) - 1
    sent = produce(java, shoal, topic, 4)
    consumer = consume_all(java, shoal, group, topic, sent, 2)

    output = java.mqadmin("resetOffsetByTime", "-n", shoal.namesrv_addr, "-g", group, "-t", topic, "-s", str(before_ms))
    assert_no_exception(output)
    assert f"rollback consumer offset by specified group[{group}], topic[{topic}], force[true]" in output
    rows = re.findall(r"^broker-a\s+(\d+)\s+(\d+)\s*$", output, re.MULTILINE)
    assert sorted(rows) == [("0", "0"), ("1", "0")], output
    ids = [line["msgId"] for line in sent]
    consumer.wait_for(
        lambda proc: all(deliveries(proc)[msg_id] >= 2 for msg_id in ids),
        RESET_REACHES_CONSUMER_TIMEOUT_S,
        "every message consumed again",
    )


def test_admin_api_reset_offset_by_timestamp_makes_a_running_consumer_consume_again(
    java: Any, shoal: Any, unique: Any
) -> None:
    """DefaultMQAdminExt.resetOffsetByTimestamp: the offset table answered, and the running consumer consumes again."""
    topic, group = unique("grp_topic"), unique("grp_api")
    create_topic(shoal, topic, 2)
    before_ms = int(time.time() * 1000) - 1
    sent = produce(java, shoal, topic, 4)
    consumer = consume_all(java, shoal, group, topic, sent, 2)
    later = produce(java, shoal, topic, 2)  # stored after the reset point too
    ids = [line["msgId"] for line in sent + later]
    consumer.wait_for(lambda proc: all(deliveries(proc)[msg_id] >= 1 for msg_id in ids), CONSUME_TIMEOUT_S, "all")

    result = java.run(
        "GroupAdmin",
        {"namesrv": shoal.namesrv_addr, "op": "resetByTime", "topic": topic, "group": group, "timestampMs": before_ms},
    )
    assert not result.of("error"), result.events
    assert [(line["queueId"], line["offset"], line["broker"]) for line in result.of("reset")] == [
        (0, 0, "broker-a"),
        (1, 0, "broker-a"),
    ]
    consumer.wait_for(
        lambda proc: all(deliveries(proc)[msg_id] >= 2 for msg_id in ids),
        RESET_REACHES_CONSUMER_TIMEOUT_S,
        "every message consumed again",
    )


def test_reset_offset_by_time_of_an_offline_group_commits_the_offsets(java: Any, shoal: Any, unique: Any) -> None:
    """With no live consumer the broker answers CONSUMER_NOT_ONLINE (206), as RocketMQ's does; mqadmin then commits
    the offsets itself (ResetOffsetByTimeOldCommand) and the group's next consumer starts from them."""
    topic, group = unique("grp_topic"), unique("grp_offline")
    create_topic(shoal, topic, 2)
    before_ms = int(time.time() * 1000) - 1
    sent = produce(java, shoal, topic, 4)
    consumer = consume_all(java, shoal, group, topic, sent, 2)
    assert consumer.stop() == 0

    refused = java.run(
        "GroupAdmin",
        {"namesrv": shoal.namesrv_addr, "op": "resetByTime", "topic": topic, "group": group, "timestampMs": before_ms},
    )
    (error,) = refused.of("error")
    assert error["code"] == ResponseCode.CONSUMER_NOT_ONLINE
    assert f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic}" in error["message"]

    output = java.mqadmin("resetOffsetByTime", "-n", shoal.namesrv_addr, "-g", group, "-t", topic, "-s", str(before_ms))
    assert_no_exception(output)
    assert f"rollback consumer offset by specified consumerGroup[{group}], topic[{topic}]" in output
    assert committed_offsets(shoal, topic, group) == {0: 0, 1: 0}

    again = java.spawn("PushConsume", {"namesrv": shoal.namesrv_addr, "group": group, "topic": topic})
    ids = {line["msgId"] for line in sent}
    again.wait_for(lambda proc: ids <= set(deliveries(proc)), CONSUME_TIMEOUT_S, "every message again")


def test_consumer_status_relays_the_running_consumers_own_report(java: Any, shoal: Any, unique: Any) -> None:
    """mqadmin consumerStatus -g G -i CLIENT: the broker forwards GET_CONSUMER_RUNNING_INFO to that Java consumer
    and relays its ConsumerRunningInfo (properties, the subscription, per-queue offsets); without -i mqadmin asks
    every live client of the group; an unknown client is 'not online'."""
    topic, group = unique("grp_topic"), unique("grp_status")
    ns = ("-n", shoal.namesrv_addr)
    create_topic(shoal, topic, 2)
    sent = produce(java, shoal, topic, 4)
    consumer = consume_all(java, shoal, group, topic, sent, 2)
    client_id = consumer.of("started")[0]["clientId"]
    status = java.mqadmin("consumerStatus", *ns, "-g", group, "-i", client_id)
    assert_no_exception(status)
    for section in ("#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#"):
        assert section in status, status
    assert re.search(rf"^\d{{3}} Topic: {re.escape(topic)}\s", status, re.MULTILINE), status
    offsets = re.findall(rf"^{re.escape(topic)}\s+broker-a\s+(\d)\s+(\d+)\s*$", status, re.MULTILINE)
    assert {int(queue): int(offset) for queue, offset in offsets} == committed_offsets(shoal, topic, group), status
    every = java.mqadmin("consumerStatus", *ns, "-g", group)
    assert_no_exception(every)
    assert client_id in every, every
    offline = java.mqadmin("consumerStatus", *ns, "-g", group, "-i", "10.0.0.1@nobody")
    assert f"The Consumer <{group}> <10.0.0.1@nobody> not online" in offline, offline
