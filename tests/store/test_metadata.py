"""Tests of shoal.store.metadata: the fastjson reader's bounds, the safe write/tolerant read, the managers."""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from shoal.store import limits
from shoal.store.errors import StoreError
from shoal.store.json_files import (
    METADATA_NESTING_MAX_DEPTH,
    MetadataFormatError,
    parse_fastjson,
    read_json_file_tolerantly,
    write_json_file_safely,
)
from shoal.store.metadata import (
    BUILTIN_SUBSCRIPTION_GROUPS,
    ConsumerOffsetTable,
    DataVersion,
    DelayOffsetTable,
    SubscriptionGroupConfig,
    SubscriptionGroupTable,
    TopicConfig,
    TopicConfigTable,
)

START_MS = 1_700_000_000_000

# Hand-written from rocketmq-spec.md §7.3-7.6, as fastjson 1.2.69 pretty-prints them (tabs,
# unquoted numeric map keys, alphabetical bean fields), plus 5.x fields that must survive.
JAVA_TOPICS_JSON = """{
\t"dataVersion":{
\t\t"counter":3,
\t\t"stateVersion":0,
\t\t"timestamp":1700000000123
\t},
\t"topicConfigTable":{
\t\t"TopicTest":{
\t\t\t"attributes":{},
\t\t\t"order":false,
\t\t\t"perm":6,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TopicTest",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t},
\t\t"TBW102":{
\t\t\t"order":false,
\t\t\t"perm":7,
\t\t\t"readQueueNums":8,
\t\t\t"topicFilterType":"SINGLE_TAG",
\t\t\t"topicName":"TBW102",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":8
\t\t},
\t\t"%RETRY%cg":{
\t\t\t"order":true,
\t\t\t"perm":6,
\t\t\t"readQueueNums":1,
\t\t\t"topicFilterType":"MULTI_TAG",
\t\t\t"topicName":"%RETRY%cg",
\t\t\t"topicSysFlag":0,
\t\t\t"writeQueueNums":1
\t\t}
\t}
}"""

JAVA_CONSUMER_OFFSET_JSON = """{
\t"offsetTable":{
\t\t"TopicTest@cg":{0:5280,1:5312,2:5312,3:5312
\t\t},
\t\t"RMQ_SYS_TRANS_HALF_TOPIC@CID_RMQ_SYS_TRANS":{0:7
\t\t},
\t\t"%RETRY%cg@cg":{0:0
\t\t}
\t}
}"""

JAVA_SUBSCRIPTION_GROUP_JSON = """{
\t"dataVersion":{
\t\t"counter":2,
\t\t"timestamp":1700000000456
\t},
\t"forbiddenTable":{},
\t"subscriptionGroupTable":{
\t\t"cg":{
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":false,
\t\t\t"consumeEnable":true,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"groupName":"cg",
\t\t\t"groupRetryPolicy":{"type":"CUSTOMIZED"},
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":3,
\t\t\t"retryQueueNums":1,
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t},
\t\t"TOOLS_CONSUMER":{
\t\t\t"brokerId":0,
\t\t\t"consumeBroadcastEnable":true,
\t\t\t"consumeEnable":false,
\t\t\t"consumeFromMinEnable":true,
\t\t\t"groupName":"TOOLS_CONSUMER",
\t\t\t"notifyConsumerIdsChangedEnable":true,
\t\t\t"retryMaxTimes":16,
\t\t\t"retryQueueNums":1,
\t\t\t"whichBrokerWhenConsumeSlowly":1
\t\t}
\t}
}"""

JAVA_DELAY_OFFSET_JSON = """{
\t"offsetTable":{1:12,2:0,3:54,18:9
\t}
}"""


def clock() -> Callable[[], int]:
    """A deterministic clock: each call returns the next millisecond."""
    return itertools.count(START_MS).__next__


# --------------------------------------------------------------------------------------------
# parse_fastjson: shoal.formats' parser within the store's bounds (the parser: tests/formats)
# --------------------------------------------------------------------------------------------


def test_parse_reports_syntax_errors_as_metadata_format_error_with_their_position() -> None:
    """Goal: the parser's errors keep line, column and expectation as a StoreError. Method: parse a broken file."""
    with pytest.raises(MetadataFormatError) as caught:
        parse_fastjson('{"a":1,\n  "b" 2}')
    assert isinstance(caught.value, StoreError)
    assert (caught.value.line, caught.value.column) == (2, 7)
    assert caught.value.expected is not None
    assert caught.value.expected.startswith("':' after an object key")


def test_parse_refuses_nesting_deeper_than_the_limit() -> None:
    """Goal: nesting is bounded. Method: parse arrays/objects at the limit and one past it."""
    at_limit = "[" * METADATA_NESTING_MAX_DEPTH + "]" * METADATA_NESTING_MAX_DEPTH
    assert parse_fastjson(at_limit) is not None
    with pytest.raises(MetadataFormatError, match="levels of nesting"):
        parse_fastjson("[" + at_limit + "]")
    too_deep_key = '{"a":' * (METADATA_NESTING_MAX_DEPTH - 1) + "{{}:1}" + "}" * (METADATA_NESTING_MAX_DEPTH - 1)
    with pytest.raises(MetadataFormatError, match="levels of nesting"):
        parse_fastjson(too_deep_key)


def test_parse_refuses_text_above_the_size_limit_in_utf8_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: input size is bounded in bytes. Method: lower the limit, parse texts either side."""
    monkeypatch.setattr(limits, "METADATA_FILE_SIZE_MAX_BYTES", 16)
    assert parse_fastjson('"' + "a" * 14 + '"') == "a" * 14
    with pytest.raises(MetadataFormatError, match="above 16"):
        parse_fastjson('"' + "a" * 15 + '"')
    with pytest.raises(MetadataFormatError, match="above 16"):
        parse_fastjson('"' + "é" * 8 + '"')  # 8 characters, 18 bytes


# --------------------------------------------------------------------------------------------
# Safe write and tolerant read
# --------------------------------------------------------------------------------------------


def test_write_replaces_file_and_keeps_previous_content_as_backup(tmp_path: Path) -> None:
    """Goal: string2File semantics. Method: write twice, inspect file, .bak and .tmp."""
    path = tmp_path / "config" / "topics.json"
    write_json_file_safely(path, '{"v":1}')
    assert path.read_text() == '{"v":1}'
    assert not (tmp_path / "config" / "topics.json.bak").exists()
    write_json_file_safely(path, '{"v":2}')
    assert path.read_text() == '{"v":2}'
    assert (tmp_path / "config" / "topics.json.bak").read_text() == '{"v":1}'
    assert not (tmp_path / "config" / "topics.json.tmp").exists()


def test_write_can_leave_the_backup_alone(tmp_path: Path) -> None:
    """Goal: keep_backup=False preserves .bak. Method: write with it, compare .bak."""
    path = tmp_path / "a.json"
    path.write_text("corrupt")
    (tmp_path / "a.json.bak").write_text('{"good":1}')
    write_json_file_safely(path, '{"new":1}', keep_backup=False)
    assert (tmp_path / "a.json.bak").read_text() == '{"good":1}'
    assert path.read_text() == '{"new":1}'


def test_write_overwrites_a_leftover_tmp_file(tmp_path: Path) -> None:
    """Goal: a .tmp from a crashed write is harmless. Method: leave garbage .tmp, write, check."""
    path = tmp_path / "a.json"
    (tmp_path / "a.json.tmp").write_text("garbage from a crash" * 100)
    write_json_file_safely(path, "{}")
    assert path.read_text() == "{}"
    assert not (tmp_path / "a.json.tmp").exists()


def test_write_propagates_os_errors(tmp_path: Path) -> None:
    """Goal: a failed write is never silent. Method: make the directory a file, write."""
    (tmp_path / "config").write_text("not a directory")
    with pytest.raises(OSError):
        write_json_file_safely(tmp_path / "config" / "topics.json", "{}")


def test_write_refuses_text_above_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: never write what could not be read back. Method: lower the limit, write more."""
    monkeypatch.setattr(limits, "METADATA_FILE_SIZE_MAX_BYTES", 8)
    with pytest.raises(MetadataFormatError, match="refusing"):
        write_json_file_safely(tmp_path / "a.json", '{"abcdefgh":1}')
    assert not (tmp_path / "a.json").exists()


def test_read_returns_the_main_file_when_it_parses(tmp_path: Path) -> None:
    """Goal: the main file wins over .bak. Method: write both, read."""
    (tmp_path / "a.json").write_text("{0:1}")
    (tmp_path / "a.json.bak").write_text("{0:2}")
    assert read_json_file_tolerantly(tmp_path / "a.json") == {0: 1}


@pytest.mark.parametrize("main", ["{0:1", "", " \n\t", b"\xff\xfe{}"], ids=["corrupt", "empty", "blank", "not-utf8"])
def test_read_falls_back_to_backup_when_main_is_unusable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, main: str | bytes
) -> None:
    """Goal: ConfigManager.load falls back to .bak. Method: spoil the main file, read, check log."""
    path = tmp_path / "a.json"
    if isinstance(main, bytes):
        path.write_bytes(main)
    else:
        path.write_text(main)
    (tmp_path / "a.json.bak").write_text("{0:2}")
    with caplog.at_level(logging.WARNING, logger="shoal.store.metadata"):
        assert read_json_file_tolerantly(path) == {0: 2}
    assert any(str(path) in record.getMessage() for record in caplog.records)
    if main == "{0:1":
        assert "line 1, column 5" in caplog.text


def test_read_falls_back_to_backup_when_main_is_missing(tmp_path: Path) -> None:
    """Goal: a crash between delete and rename (Java) loses nothing. Method: only .bak exists."""
    (tmp_path / "a.json.bak").write_text('{"x":1}')
    assert read_json_file_tolerantly(tmp_path / "a.json") == {"x": 1}


def test_read_returns_none_when_neither_file_is_usable(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Goal: start empty rather than crash. Method: no files, then two corrupt files."""
    path = tmp_path / "a.json"
    assert read_json_file_tolerantly(path) is None
    path.write_text("{")
    (tmp_path / "a.json.bak").write_text("[")
    with caplog.at_level(logging.WARNING, logger="shoal.store.metadata"):
        assert read_json_file_tolerantly(path) is None
    assert "neither" in caplog.text


def test_read_never_uses_a_tmp_leftover(tmp_path: Path) -> None:
    """Goal: an unfinished write is ignored. Method: only a valid .tmp exists, read."""
    (tmp_path / "a.json.tmp").write_text('{"x":1}')
    assert read_json_file_tolerantly(tmp_path / "a.json") is None
    (tmp_path / "a.json").write_text('{"x":2}')
    assert read_json_file_tolerantly(tmp_path / "a.json") == {"x": 2}


def test_read_refuses_a_file_above_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: file reads are bounded. Method: lower the limit, main too big, .bak small."""
    monkeypatch.setattr(limits, "METADATA_FILE_SIZE_MAX_BYTES", 10)
    (tmp_path / "a.json").write_text('{"abcdefghij":1}')
    (tmp_path / "a.json.bak").write_text("{}")
    assert read_json_file_tolerantly(tmp_path / "a.json") == {}


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


def test_topic_config_defaults_and_java_field_names() -> None:
    """Goal: defaults and JSON names match TopicConfig.java. Method: to_json of a default."""
    assert TopicConfig("t").to_json() == {
        "order": False,
        "perm": 6,
        "readQueueNums": 16,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "t",
        "topicSysFlag": 0,
        "writeQueueNums": 16,
    }
    assert TopicConfig.from_json({"topicName": "t"}) == TopicConfig("t")


def test_shape_errors_quote_at_most_80_characters_of_the_value() -> None:
    """Goal: a bad huge value does not flood the log. Method: decode a long list as a field."""
    with pytest.raises(MetadataFormatError) as caught:
        TopicConfig.from_json({"topicName": "t", "perm": list(range(1000))})
    assert len(str(caught.value)) < 140
    assert str(caught.value).endswith("...")


def test_topic_config_from_json_names_the_bad_field() -> None:
    """Goal: shape errors say where. Method: decode wrong types and an unknown filter type."""
    with pytest.raises(MetadataFormatError, match=r"topicConfig\.perm: expected an integer"):
        TopicConfig.from_json({"topicName": "t", "perm": "rw"})
    with pytest.raises(MetadataFormatError, match="topicFilterType"):
        TopicConfig.from_json({"topicName": "t", "topicFilterType": "ANY"})
    with pytest.raises(MetadataFormatError, match="order: expected a boolean"):
        TopicConfig.from_json({"topicName": "t", "order": 1})
    with pytest.raises(MetadataFormatError, match="topicName: expected a string"):
        TopicConfig.from_json({"perm": 6})


def test_topic_config_tolerates_fastjson_string_numbers_and_nulls() -> None:
    """Goal: read what fastjson reads. Method: numbers as strings, booleans as strings, nulls."""
    config = TopicConfig.from_json({"topicName": "t", "perm": "7", "order": "TRUE", "topicSysFlag": None})
    assert (config.perm, config.order, config.topic_sys_flag) == (7, True, 0)


def test_data_version_next_version_bumps_counter_and_timestamp() -> None:
    """Goal: DataVersion.nextVersion semantics. Method: bump, compare, round-trip JSON."""
    version = DataVersion(counter=3, timestamp_ms=5).next_version(9)
    assert (version.counter, version.timestamp_ms) == (4, 9)
    assert DataVersion.from_json(version.to_json()) == version
    assert version.to_json() == {"counter": 4, "timestamp": 9}


def test_subscription_group_config_defaults_and_java_field_names() -> None:
    """Goal: defaults and names match SubscriptionGroupConfig.java. Method: to_json of a default."""
    assert SubscriptionGroupConfig("g").to_json() == {
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "groupName": "g",
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


# --------------------------------------------------------------------------------------------
# Managers
# --------------------------------------------------------------------------------------------


def test_topic_table_loads_a_java_written_file_and_keeps_5x_fields(tmp_path: Path) -> None:
    """Goal: a Java topics.json loads and survives a persist. Method: load sample, persist, reload."""
    path = tmp_path / "topics.json"
    path.write_text(JAVA_TOPICS_JSON)
    table = TopicConfigTable(path, clock())
    assert table.load()
    assert table.data_version == DataVersion(3, 1700000000123, {"stateVersion": 0})
    assert table.get("TopicTest") == TopicConfig("TopicTest", 8, 8, extra_fields={"attributes": {}})
    assert table.get("TBW102") == TopicConfig("TBW102", 8, 8, perm=7)
    assert table.get("%RETRY%cg") == TopicConfig("%RETRY%cg", 1, 1, topic_filter_type="MULTI_TAG", order=True)
    table.persist()
    written = json.loads(path.read_text())
    assert written["dataVersion"]["stateVersion"] == 0
    assert written["topicConfigTable"]["TopicTest"]["attributes"] == {}
    assert (tmp_path / "topics.json.bak").read_text() == JAVA_TOPICS_JSON


def test_topic_table_put_and_delete_bump_the_data_version(tmp_path: Path) -> None:
    """Goal: every change moves DataVersion, a no-op does not. Method: put/delete with a clock."""
    table = TopicConfigTable(tmp_path / "topics.json", clock())
    assert table.data_version == DataVersion(0, START_MS)
    table.put(TopicConfig("a", 4, 4))
    assert table.data_version == DataVersion(1, START_MS + 1)
    assert table.delete("missing") is None
    assert table.data_version.counter == 1
    assert table.delete("a") == TopicConfig("a", 4, 4)
    assert table.data_version == DataVersion(2, START_MS + 2)
    assert table.all() == {}


def test_topic_table_round_trips_through_its_file(tmp_path: Path) -> None:
    """Goal: persist then load gives the same table. Method: fill, persist, load into a new one."""
    path = tmp_path / "config" / "topics.json"
    table = TopicConfigTable(path, clock())
    table.put(TopicConfig("a", 4, 2, perm=2, topic_sys_flag=1))
    table.put(TopicConfig("b", order=True, topic_filter_type="MULTI_TAG"))
    table.persist()
    reloaded = TopicConfigTable(path, lambda: 0)
    assert reloaded.load()
    assert reloaded.all() == table.all()
    assert reloaded.data_version == table.data_version


def test_persisted_files_are_sorted_tab_indented_standard_json(tmp_path: Path) -> None:
    """Goal: the output format every Java reader accepts. Method: persist, inspect the text."""
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsetTable(path)
    for queue_id in (10, 2, 0):
        offsets.commit("g", "t", queue_id, queue_id * 100)
    offsets.persist()
    text = path.read_text()
    assert json.loads(text) == {"offsetTable": {"t@g": {"0": 0, "2": 200, "10": 1000}}}
    assert '\n\t"offsetTable": {\n\t\t"t@g": {\n\t\t\t"0": 0,\n\t\t\t"2": 200,\n\t\t\t"10": 1000' in text
    assert offsets.encode() == '{"offsetTable":{"t@g":{"0":0,"2":200,"10":1000}}}'


def test_consumer_offset_table_loads_a_java_written_file(tmp_path: Path) -> None:
    """Goal: unquoted queue-id keys from Java load. Method: load the sample, query it."""
    path = tmp_path / "consumerOffset.json"
    path.write_text(JAVA_CONSUMER_OFFSET_JSON)
    offsets = ConsumerOffsetTable(path)
    assert offsets.load()
    assert offsets.offsets_of_group("cg", "TopicTest") == {0: 5280, 1: 5312, 2: 5312, 3: 5312}
    assert offsets.query("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 7
    assert offsets.topics_of_group("cg") == {"TopicTest", "%RETRY%cg"}


def test_consumer_offset_table_queries_commits_and_removals(tmp_path: Path) -> None:
    """Goal: the in-memory API. Method: commit, query, list, remove by group and by topic."""
    offsets = ConsumerOffsetTable(tmp_path / "consumerOffset.json")
    assert offsets.query("g1", "t1", 0) == -1
    offsets.commit("g1", "t1", 0, 5)
    offsets.commit("g1", "t1", 0, 6)
    offsets.commit("g1", "t2", 1, 7)
    offsets.commit("g2", "t1", 3, 8)
    assert offsets.query("g1", "t1", 0) == 6
    assert offsets.query("g1", "t1", 1) == -1
    assert offsets.groups_of_topic("t1") == {"g1", "g2"}
    assert offsets.topics_of_group("g1") == {"t1", "t2"}
    assert offsets.all() == {"t1@g1": {0: 6}, "t2@g1": {1: 7}, "t1@g2": {3: 8}}
    assert offsets.remove_group("g1") == 2
    assert offsets.all() == {"t1@g2": {3: 8}}
    assert offsets.remove_topic("t1") == 1
    assert offsets.all() == {}


def test_consumer_offset_table_refuses_at_sign_in_names_and_negative_queue_ids(tmp_path: Path) -> None:
    """Goal: `topic@group` keys stay unambiguous. Method: commit with '@' or a bad queue id."""
    offsets = ConsumerOffsetTable(tmp_path / "consumerOffset.json")
    with pytest.raises(ValueError, match="'@'"):
        offsets.commit("g@x", "t", 0, 1)
    with pytest.raises(ValueError, match="'@'"):
        offsets.query("g", "t@x", 0)
    with pytest.raises(ValueError, match="queue id"):
        offsets.commit("g", "t", -1, 1)


def test_consumer_offset_table_round_trips_and_load_replaces(tmp_path: Path) -> None:
    """Goal: persist/load round trip; load replaces the table as Java does. Method: two tables."""
    path = tmp_path / "consumerOffset.json"
    offsets = ConsumerOffsetTable(path)
    offsets.commit("g", "t", 0, 10)
    offsets.commit("g", "t", 7, 70)
    offsets.persist()
    other = ConsumerOffsetTable(path)
    other.commit("stale", "t", 0, 1)
    assert other.load()
    assert other.all() == {"t@g": {0: 10, 7: 70}}


def test_consumer_offset_table_commits_from_many_threads(tmp_path: Path) -> None:
    """Goal: the table is thread-safe. Method: 8 threads commit distinct queues, count them."""
    offsets = ConsumerOffsetTable(tmp_path / "consumerOffset.json")

    def commit_many(thread_index: int) -> None:
        for queue_id in range(200):
            offsets.commit(f"g{thread_index}", "t", queue_id, queue_id)

    threads = [threading.Thread(target=commit_many, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(len(queue_offsets) for queue_offsets in offsets.all().values()) == 8 * 200


def test_subscription_group_table_starts_with_the_builtin_groups(tmp_path: Path) -> None:
    """Goal: built-ins exist without any file. Method: new table, load nothing, list."""
    groups = SubscriptionGroupTable(tmp_path / "subscriptionGroup.json", clock())
    assert not groups.load()
    assert set(groups.all()) == set(BUILTIN_SUBSCRIPTION_GROUPS)
    assert groups.get("TOOLS_CONSUMER") == SubscriptionGroupConfig("TOOLS_CONSUMER")


def test_subscription_group_table_loads_a_java_written_file(tmp_path: Path) -> None:
    """Goal: a Java file loads over the built-ins, 5.x fields kept. Method: load, check, persist."""
    path = tmp_path / "subscriptionGroup.json"
    path.write_text(JAVA_SUBSCRIPTION_GROUP_JSON)
    groups = SubscriptionGroupTable(path, clock())
    assert groups.load()
    assert groups.data_version == DataVersion(2, 1700000000456)
    config = groups.get("cg")
    assert config == SubscriptionGroupConfig(
        "cg",
        consume_broadcast_enable=False,
        retry_max_times=3,
        extra_fields={"groupRetryPolicy": {"type": "CUSTOMIZED"}},
    )
    tools = groups.get("TOOLS_CONSUMER")
    assert tools is not None
    assert not tools.consume_enable
    assert set(groups.all()) == set(BUILTIN_SUBSCRIPTION_GROUPS) | {"cg"}
    groups.persist()
    written = json.loads(path.read_text())
    assert written["forbiddenTable"] == {}
    assert written["subscriptionGroupTable"]["cg"]["groupRetryPolicy"] == {"type": "CUSTOMIZED"}


def test_subscription_group_table_round_trips_through_its_file(tmp_path: Path) -> None:
    """Goal: persist then load gives the same groups and version. Method: put, delete, persist, load."""
    path = tmp_path / "subscriptionGroup.json"
    groups = SubscriptionGroupTable(path, clock())
    groups.put(SubscriptionGroupConfig("g1", retry_queue_nums=2, broker_id=1, which_broker_when_consume_slowly=0))
    assert groups.delete("SELF_TEST_C_GROUP") is not None
    assert groups.data_version.counter == 2
    groups.persist()
    reloaded = SubscriptionGroupTable(path, lambda: 0)
    assert reloaded.load()
    assert reloaded.data_version == groups.data_version
    assert reloaded.get("g1") == groups.get("g1")
    # The built-in group comes back: Java's init() always re-creates it before loading.
    assert set(reloaded.all()) == set(groups.all()) | {"SELF_TEST_C_GROUP"}


def test_delay_offset_table_loads_a_java_written_file(tmp_path: Path) -> None:
    """Goal: delay levels keyed unquoted load. Method: load the sample, query levels."""
    path = tmp_path / "delayOffset.json"
    path.write_text(JAVA_DELAY_OFFSET_JSON)
    delays = DelayOffsetTable(path)
    assert delays.load()
    assert delays.all() == {1: 12, 2: 0, 3: 54, 18: 9}
    assert delays.query(3) == 54
    assert delays.query(4) == 0


def test_delay_offset_table_round_trips_through_its_file(tmp_path: Path) -> None:
    """Goal: persist then load gives the same offsets. Method: update, persist, load into another."""
    path = tmp_path / "delayOffset.json"
    delays = DelayOffsetTable(path)
    delays.update(1, 5)
    delays.update(18, 500)
    delays.persist()
    assert json.loads(path.read_text()) == {"offsetTable": {"1": 5, "18": 500}}
    reloaded = DelayOffsetTable(path)
    assert reloaded.load()
    assert reloaded.all() == {1: 5, 18: 500}


def test_manager_falls_back_to_backup_when_main_has_the_wrong_shape(tmp_path: Path) -> None:
    """Goal: a decode error counts as unusable, as in Java. Method: valid JSON, wrong shape."""
    path = tmp_path / "delayOffset.json"
    path.write_text('{"offsetTable":[1,2]}')
    (tmp_path / "delayOffset.json.bak").write_text('{"offsetTable":{1:3}}')
    delays = DelayOffsetTable(path)
    assert delays.load()
    assert delays.all() == {1: 3}


def test_manager_leaves_partial_state_untouched_when_both_files_are_bad(tmp_path: Path) -> None:
    """Goal: a bad document never half-loads. Method: second entry malformed, load, check empty."""
    path = tmp_path / "consumerOffset.json"
    path.write_text('{"offsetTable":{"t@g":{0:1},"u@g":{0:"x"}}}')
    offsets = ConsumerOffsetTable(path)
    assert not offsets.load()
    assert offsets.all() == {}


def test_persist_after_backup_load_keeps_the_good_backup(tmp_path: Path) -> None:
    """Goal: the only good copy is never overwritten by a corrupt file. Method: load from .bak, persist."""
    path = tmp_path / "topics.json"
    backup = tmp_path / "topics.json.bak"
    path.write_text("{corrupt")
    backup.write_text(JAVA_TOPICS_JSON)
    table = TopicConfigTable(path, clock())
    assert table.load()
    table.persist()
    assert backup.read_text() == JAVA_TOPICS_JSON
    assert json.loads(path.read_text())["topicConfigTable"]["TopicTest"]["readQueueNums"] == 8
    table.persist()  # from now on, the normal procedure
    assert json.loads(backup.read_text()) == json.loads(path.read_text())


def test_manager_ignores_a_tmp_leftover_on_load(tmp_path: Path) -> None:
    """Goal: an unfinished write is not loaded. Method: only a .tmp exists, load."""
    (tmp_path / "delayOffset.json.tmp").write_text('{"offsetTable":{1:3}}')
    delays = DelayOffsetTable(tmp_path / "delayOffset.json")
    assert not delays.load()
    assert delays.all() == {}


def test_preserved_fields_with_fastjson_keys_are_written_as_standard_json(tmp_path: Path) -> None:
    """Goal: unknown fields with non-string keys still persist. Method: load, persist, json.loads."""
    path = tmp_path / "consumerOffset.json"
    path.write_text('{"offsetTable":{},"extra":{0:"a",null:"b",{"k":1}:"c"}}')
    offsets = ConsumerOffsetTable(path)
    assert offsets.load()
    offsets.persist()
    assert json.loads(path.read_text())["extra"] == {"0": "a", "null": "b", '{"k":1}': "c"}
