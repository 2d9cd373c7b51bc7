"""The options of format("rocketmq"): defaults, and one clear error per mistake."""

from __future__ import annotations

import pytest

from shoal.spark.errors import ReadOptionError
from shoal.spark.streaming.options import parse_read, parse_write

BASE = {"namesrv": "127.0.0.1:9876", "topics": "Orders"}


def test_defaults_for_a_stream_and_for_a_batch_read() -> None:
    stream = parse_read(BASE, streaming=True)
    assert stream.topics == ("Orders",) and stream.topic_pattern is None
    assert stream.starting.how == "latest" and stream.filter.expression == "*" and not stream.filter.sql
    assert stream.group == "shoal-spark-stream" and stream.commit_offsets and stream.fail_on_data_loss
    assert stream.max_messages_per_trigger is None and stream.pull_batch_size == 32
    assert parse_read(BASE, streaming=False).starting.how == "earliest"


def test_option_names_are_case_insensitive_as_in_spark() -> None:
    options = parse_read({**BASE, "MAXMESSAGESPERTRIGGER": "500", "startingoffsets": "earliest"}, streaming=True)
    assert options.max_messages_per_trigger == 500 and options.starting.how == "earliest"


def test_filters_timestamps_and_explicit_offsets() -> None:
    tagged = parse_read({**BASE, "tag": "TagA || TagB"}, streaming=True)
    assert tagged.filter.expression_type == "TAG"
    sql = parse_read({**BASE, "sql": "a > 3"}, streaming=True)
    assert sql.filter.sql and sql.filter.expression_type == "SQL92"
    at = parse_read({**BASE, "startingTimestamp": "2026-11-29T00:00:00Z"}, streaming=True)
    assert at.starting.how == "timestamp" and at.starting.timestamp_ms == 1_795_910_400_000
    explicit = parse_read({**BASE, "startingOffsets": '{"Orders": {"broker-a": {"0": 4}}}'}, streaming=True)
    assert explicit.starting.offsets == {("Orders", "broker-a", 0): 4}
    pattern = parse_read({"namesrv": "n:1", "topicPattern": "Ord.*"}, streaming=True)
    assert pattern.wanted("Orders") and not pattern.wanted("XOrders")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topics": "Orders"}, "NameServer is missing"),
        ({"namesrv": "n:1"}, "exactly one of topics"),
        ({**BASE, "topicPattern": "x"}, "exactly one of topics"),
        ({"namesrv": "n:1", "topicPattern": "("}, "not a regular expression"),
        ({**BASE, "tag": "A", "sql": "a > 1"}, "tag or sql"),
        ({**BASE, "startingOffsets": "earliest", "startingTimestamp": "1"}, "not both"),
        ({**BASE, "startingTimestamp": "yesterday"}, "ISO-8601"),
        ({**BASE, "maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger=0 must be >= 1"),
        ({**BASE, "pullBatchSize": "5000"}, r"must be \[1, 1024\]"),
        ({**BASE, "group": "bad group"}, "characters RocketMQ does not allow"),
        ({"namesrv": "n:1", "topics": "Or ders"}, "characters RocketMQ does not allow"),
        ({**BASE, "commitOffsets": "perhaps"}, "not true or false"),
        ({**BASE, "accessKey": "ak"}, "together"),
    ],
)
def test_each_mistake_gets_one_clear_error(options: dict[str, str], message: str) -> None:
    with pytest.raises(ReadOptionError, match=message):
        parse_read(options, streaming=True)


def test_ending_offsets_are_for_batch_reads_and_take_real_offsets() -> None:
    ending = parse_read({**BASE, "endingOffsets": '{"Orders": {"broker-a": {"0": 9}}}'}, streaming=False)
    assert ending.ending == {("Orders", "broker-a", 0): 9}
    with pytest.raises(ReadOptionError, match="real offsets"):
        parse_read({**BASE, "endingOffsets": '{"Orders": {"broker-a": {"0": -1}}}'}, streaming=False)


def test_sink_options() -> None:
    sink = parse_write({"namesrv": "n:1", "topic": "Out", "sendsInFlight": "8"})
    assert (sink.topic, sink.producer_group, sink.sends_in_flight, sink.send_timeout_s) == (
        "Out",
        "shoal-spark-sink",
        8,
        3.0,
    )
    with pytest.raises(ReadOptionError, match="NameServer is missing"):
        parse_write({"topic": "Out"})
