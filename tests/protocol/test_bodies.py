"""Client-side JSON bodies as Java and the C++ client send them (spec §8.8, §8.9; real-clients §1.5-1.7)."""

from __future__ import annotations

import json

import pytest

from shoal.protocol import (
    BodyFormatError,
    ConsumeFromWhere,
    ConsumerData,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    ConsumeStatsList,
    ConsumeType,
    DelayOffsetSerializeWrapper,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    MessageQueue,
    OffsetWrapper,
    ProducerData,
    SubscriptionData,
    TopicOffset,
    TopicStatsTable,
    UnlockBatchRequestBody,
)
from shoal.protocol.bodies import ConsumerRunningInfo

JAVA_HEARTBEAT = b"""{"clientID":"192.168.0.5@12345#987654321",
 "consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
                     "consumeType":"CONSUME_PASSIVELY",
                     "groupName":"cg","messageModel":"CLUSTERING",
                     "subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],
                        "expressionType":"TAG","subString":"TagA","subVersion":1700000000000,
                        "tagsSet":["TagA"],"topic":"TopicTest"}],
                     "unitMode":false}],
 "producerDataSet":[{"groupName":"pg"},{"groupName":"CLIENT_INNER_PRODUCER"}]}"""

CPP_CONSUMER_HEARTBEAT = (
    b'{"clientID":"15742-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
    b'"groupName":"CID_push","messageModel":1,"subscriptionDataSet":[{"subString":"*",'
    b'"subVersion":"1795300493320","topic":"%RETRY%CID_push"},{"codeSet":[0,0],"subString":"TagA || TagB",'
    b'"subVersion":"1795300493320","tagsSet":["TagA","TagB"],"topic":"TopicTest"}]}]}'
)

CPP_PRODUCER_HEARTBEAT = b'{"clientID":"23091-127.0.0.1@DEFAULT","producerDataSet":[{"groupName":"PID_probe"}]}'


def test_java_heartbeat_parses() -> None:
    """Goal: the Java client's HeartbeatData (spec §8.9). Method: parse the sample, check fields."""
    heartbeat = HeartbeatData.from_json(JAVA_HEARTBEAT)
    assert heartbeat.client_id == "192.168.0.5@12345#987654321"
    assert heartbeat.producer_data_set == (ProducerData("pg"), ProducerData("CLIENT_INNER_PRODUCER"))
    (consumer,) = heartbeat.consumer_data_set
    assert consumer == ConsumerData(
        group_name="cg",
        consume_type=ConsumeType.CONSUME_PASSIVELY,
        message_model=MessageModel.CLUSTERING,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        subscription_data_set=(
            SubscriptionData(
                topic="TopicTest", sub_string="TagA", tags_set=("TagA",), code_set=(2598919,), sub_version=1700000000000
            ),
        ),
    )


def test_cpp_consumer_heartbeat_with_ordinals_and_string_versions_parses() -> None:
    """Goal: C++ heartbeat quirks (ints for enums, string subVersion, no unitMode/producer set)."""
    heartbeat = HeartbeatData.from_json(CPP_CONSUMER_HEARTBEAT)
    assert heartbeat.producer_data_set == ()
    (consumer,) = heartbeat.consumer_data_set
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert consumer.unit_mode is False
    retry, topic = consumer.subscription_data_set
    assert (retry.topic, retry.sub_string, retry.tags_set, retry.expression_type) == ("%RETRY%CID_push", "*", (), "TAG")
    assert topic.sub_version == 1795300493320
    assert topic.code_set == (0, 0)


def test_cpp_producer_heartbeat_parses() -> None:
    """Goal: a producer-only heartbeat has no consumerDataSet key. Method: parse it."""
    heartbeat = HeartbeatData.from_json(CPP_PRODUCER_HEARTBEAT)
    assert heartbeat == HeartbeatData("23091-127.0.0.1@DEFAULT", producer_data_set=(ProducerData("PID_probe"),))


def test_heartbeat_writes_java_names_alphabetically_and_round_trips() -> None:
    """Goal: Java's bean form out. Method: write the parsed Java sample, compare key order and values."""
    heartbeat = HeartbeatData.from_json(JAVA_HEARTBEAT)
    text = heartbeat.to_json()
    assert json.loads(text) == json.loads(JAVA_HEARTBEAT)
    consumer = json.loads(text)["consumerDataSet"][0]
    assert list(consumer) == sorted(consumer)
    assert consumer["consumeType"] == "CONSUME_PASSIVELY"
    assert HeartbeatData.from_json(text) == heartbeat


def test_heartbeat_with_bad_enum_names_the_path() -> None:
    """Goal: precise errors. Method: a consumeType of 9."""
    body = b'{"clientID":"c","consumerDataSet":[{"groupName":"g","consumeType":9}]}'
    with pytest.raises(BodyFormatError, match=r"HeartbeatData\.consumerDataSet\[0\]\.consumeType"):
        HeartbeatData.from_json(body)


def test_consumer_list_body_round_trips() -> None:
    """Goal: GET_CONSUMER_LIST_BY_GROUP body. Method: parse the spec sample, write it back."""
    body = GetConsumerListByGroupResponseBody.from_json(b'{"consumerIdList":["15742-127.0.0.1@DEFAULT"]}')
    assert body.consumer_id_list == ("15742-127.0.0.1@DEFAULT",)
    assert body.to_json() == b'{"consumerIdList":["15742-127.0.0.1@DEFAULT"]}'


def test_cpp_lock_request_parses_and_response_is_written_like_java() -> None:
    """Goal: LOCK_BATCH_MQ as the C++ client sends it. Method: parse, answer with lockOKMQSet."""
    request = LockBatchRequestBody.from_json(
        b'{"clientId":"15742-127.0.0.1@DEFAULT","consumerGroup":"CID_orderly",'
        b'"mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}'
    )
    mq = MessageQueue(topic="TopicTest", broker_name="broker-a", queue_id=0)
    assert request.mq_set == (mq,)
    assert LockBatchResponseBody(lock_ok_mq_set=request.mq_set).to_json() == (
        b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}'
    )
    unlock = UnlockBatchRequestBody.from_json(request.to_json())
    assert isinstance(unlock, UnlockBatchRequestBody)
    assert unlock.mq_set == request.mq_set


def test_message_queues_order_like_java_compare_to() -> None:
    """Goal: topic, then broker, then queue. Method: sort a shuffled list."""
    queues = [
        MessageQueue("b", "x", 0),
        MessageQueue("a", "y", 1),
        MessageQueue("a", "y", 0),
        MessageQueue("a", "x", 5),
    ]
    assert sorted(queues) == [queues[3], queues[2], queues[1], queues[0]]


def test_consumer_offsets_read_fastjson_bare_keys_and_write_quoted_ones() -> None:
    """Goal: consumerOffset.json / GET_ALL_CONSUMER_OFFSET. Method: parse `{0:5280}`, write it."""
    body = ConsumerOffsetSerializeWrapper.from_json(b'{"offsetTable":{"TopicTest@cg":{0:5280,1:5312}}}')
    assert body.offset_table == {"TopicTest@cg": {0: 5280, 1: 5312}}
    assert body.to_json() == b'{"offsetTable":{"TopicTest@cg":{"0":5280,"1":5312}}}'
    assert ConsumerOffsetSerializeWrapper.from_json(body.to_json()) == body


def test_delay_offsets_read_fastjson_bare_keys() -> None:
    """Goal: delayOffset.json (level -> offset). Method: parse the spec sample."""
    body = DelayOffsetSerializeWrapper.from_json(b'{"offsetTable": {1: 12, 2: 0, 3: 54}}')
    assert body.offset_table == {1: 12, 2: 0, 3: 54}


def test_topic_stats_are_written_with_fastjson_object_keys() -> None:
    """Goal: Java admin tools need `{{mq}:…}` (gotcha 9). Method: write a table, compare the text."""
    table = TopicStatsTable(
        {MessageQueue("t", "b", 0): TopicOffset(min_offset=0, max_offset=5, last_update_timestamp_ms=1700000000000)}
    )
    expected = (
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:'
        b'{"lastUpdateTimestamp":1700000000000,"maxOffset":5,"minOffset":0}}}'
    )
    assert table.to_json() == expected
    assert TopicStatsTable.from_json(expected) == table


def test_consume_stats_round_trip_and_accept_java_to_string_keys() -> None:
    """Goal: ConsumeStats both ways. Method: write/read, and read keys in MessageQueue.toString() form."""
    stats = ConsumeStats({MessageQueue("t", "b", 1): OffsetWrapper(10, 7, 1700000000000)}, consume_tps=2.5)
    text = stats.to_json()
    assert text.startswith(b'{"consumeTps":2.5,"offsetTable":{{"brokerName":"b","queueId":1,"topic":"t"}:')
    assert ConsumeStats.from_json(text) == stats
    to_string = (
        b'{"consumeTps":2.5,"offsetTable":{"MessageQueue [topic=t, brokerName=b, queueId=1]":'
        b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1700000000000}}}'
    )
    assert ConsumeStats.from_json(to_string) == stats
    with pytest.raises(BodyFormatError, match="not a MessageQueue"):
        ConsumeStats.from_json(b'{"offsetTable":{"nope":{}}}')


def test_consume_stats_list_round_trip_with_object_keys_inside_group_lists() -> None:
    """Goal: GET_BROKER_CONSUME_STATS's ConsumeStatsList both ways, as fastjson writes it (Java's
    List<Map<group, List<ConsumeStats>>>). Method: write/read one group with two topics and an empty
    group; refuse a group whose value is not a list."""
    first = ConsumeStats({MessageQueue("t1", "b", 0): OffsetWrapper(5, 3, 1700000000000)}, consume_tps=1.5)
    second = ConsumeStats({MessageQueue("t2", "b", 1): OffsetWrapper(2, 2, 0)})
    stats = ConsumeStatsList(
        broker_addr="127.0.0.1:10911", consume_stats_list=({"g": (first, second)}, {"idle": ()}), total_diff=2
    )
    text = stats.to_json()
    assert text.startswith(
        b'{"brokerAddr":"127.0.0.1:10911","consumeStatsList":[{"g":[{"consumeTps":1.5,"offsetTable":'
        b'{{"brokerName":"b","queueId":0,"topic":"t1"}:{"brokerOffset":5,"consumerOffset":3,'
    )
    assert text.endswith(b'{"idle":[]}],"totalDiff":2}')
    assert ConsumeStatsList.from_json(text) == stats
    assert ConsumeStatsList.from_json(b"{}") == ConsumeStatsList()
    with pytest.raises(BodyFormatError, match=r"consumeStatsList\[0\]\[g\]: expected an array"):
        ConsumeStatsList.from_json(b'{"consumeStatsList":[{"g":{}}]}')


def test_unknown_fields_are_ignored_and_wrong_shapes_refused() -> None:
    """Goal: tolerant of extras, strict on types. Method: extra fields; a list where an object goes."""
    body = GetConsumerListByGroupResponseBody.from_json(b'{"consumerIdList":["a"],"future":{"x":[1]}}')
    assert body.consumer_id_list == ("a",)
    with pytest.raises(BodyFormatError, match="expected an object"):
        HeartbeatData.from_json(b"[]")
    with pytest.raises(BodyFormatError, match=r"consumerIdList\[0\]"):
        GetConsumerListByGroupResponseBody.from_json(b'{"consumerIdList":[{"a":1}]}')


# --- ConsumerRunningInfo (GET_CONSUMER_RUNNING_INFO) ---

JAVA_RUNNING_INFO = (
    '{"jstack":null,"mqTable":{{"brokerName":"broker-a","queueId":1,"topic":"Orders"}:'
    '{"cachedMsgCount":3,"cachedMsgMaxOffset":12,"cachedMsgMinOffset":10,"cachedMsgSizeInMiB":0,'
    '"commitOffset":10,"droped":false,"lastPullTimestamp":1764400000000,"locked":false}},'
    '"properties":{"consumerGroup":"Billing","PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","pullBatchSize":32},'
    '"statusTable":{"Orders":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":12.5,'
    '"consumeRT":1.2,"pullRT":3.0,"pullTPS":12.5}},'
    '"subscriptionSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
    '"subVersion":1764400000000,"tagsSet":[],"topic":"Orders"}]}'
)
"""What a Java push consumer (4.9.7) answers, as fastjson writes it: MessageQueue object keys."""


def test_consumer_running_info_reads_what_a_java_consumer_answers() -> None:
    info = ConsumerRunningInfo.from_json(JAVA_RUNNING_INFO.encode())
    assert info.properties == {
        "consumerGroup": "Billing",
        "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
        "pullBatchSize": "32",
    }
    ((mq, figures),) = info.queues.items()
    assert mq == MessageQueue("Orders", "broker-a", 1) and figures["commitOffset"] == 10 and figures["locked"] is False
    assert info.status["Orders"]["consumeOKTPS"] == 12.5
    assert [sub.topic for sub in info.subscriptions] == ["Orders"]


def test_consumer_running_info_round_trips_with_object_keys() -> None:
    info = ConsumerRunningInfo.from_json(JAVA_RUNNING_INFO.encode())
    text = info.to_json()
    assert b'{{"brokerName":"broker-a","queueId":1,"topic":"Orders"}:' in text
    assert ConsumerRunningInfo.from_json(text) == info


def test_consumer_running_info_refuses_figures_that_are_not_an_object() -> None:
    with pytest.raises(BodyFormatError, match="mqTable"):
        ConsumerRunningInfo.from_json(b'{"mqTable":{"Orders@broker-a@1":[1,2]}}')
