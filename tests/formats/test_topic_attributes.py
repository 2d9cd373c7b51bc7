"""Topic attributes: RocketMQ 5's modification strings and rules, and the message-type check."""

from __future__ import annotations

import re

import pytest

from shoal.formats.topic_attributes import (
    MIXED_REFUSAL,
    RESERVE_TIME_REFUSAL,
    TopicAttributeError,
    TopicMessageType,
    alter,
    format_modification,
    message_type_of,
    parse_modification,
    topic_message_type,
    type_conflict,
)


def test_a_modification_string_parses_into_signed_keys_and_back() -> None:
    parsed = parse_modification("+message.type=FIFO,-reserve.time")
    assert parsed == {"+message.type": "FIFO", "-reserve.time": ""}
    assert parse_modification(format_modification(parsed)) == parsed
    assert parse_modification("") == {}


@pytest.mark.parametrize(
    ("text", "remark"),
    [
        ("message.type=FIFO", "add/alter attribute format is wrong: message.type"),
        ("message.type", "delete attribute format is wrong: message.type"),
        ("+message.type=FIFO,+message.type=NORMAL", "key duplication: +message.type"),
    ],
)
def test_malformed_modifications_are_refused_with_rocketmqs_remark(text: str, remark: str) -> None:
    with pytest.raises(TopicAttributeError, match=f"^{re.escape(remark)}$"):
        parse_modification(text)


def test_creating_sets_any_known_attribute_and_updating_only_changeable_ones() -> None:
    created = alter({}, {"+message.type": "FIFO", "+queue.type": "SimpleCQ"}, create=True)
    assert created == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    changed = alter(created, {"+message.type": "DELAY"}, create=False)
    assert changed == {"message.type": "DELAY", "queue.type": "SimpleCQ"}
    assert alter(changed, {"-message.type": ""}, create=False) == {"queue.type": "SimpleCQ"}
    assert alter(changed, {}, create=False) == changed  # an update without attributes keeps them
    with pytest.raises(TopicAttributeError, match=r"^attempt to update an unchangeable attribute\. key: queue\.type$"):
        alter(created, {"+queue.type": "SimpleCQ"}, create=False)


@pytest.mark.parametrize(
    ("current", "modification", "create", "remark"),
    [
        ({}, {"-message.type": ""}, True, "only add attribute is supported while creating topic. key: message.type"),
        ({}, {"-message.type": ""}, False, "attempt to delete a nonexistent key: message.type"),
        ({}, {"+colour": "red"}, True, "unsupported key: colour"),
        ({}, {"+message.type": "URGENT"}, True, "value is not in set: .*"),
        ({}, {"+message.type": "MIXED"}, True, MIXED_REFUSAL),
        ({}, {"+reserve.time": "10"}, True, RESERVE_TIME_REFUSAL),
        ({}, {"+queue.type": "BatchCQ"}, True, "queue.type BatchCQ is not supported by Shoal.*"),
        ({}, {"+cleanup.policy": "COMPACTION"}, True, "cleanup.policy COMPACTION is not supported by Shoal.*"),
    ],
)
def test_refused_changes_name_the_reason(
    current: dict[str, str], modification: dict[str, str], create: bool, remark: str
) -> None:
    with pytest.raises(TopicAttributeError, match=f"^{remark}$"):
        alter(current, modification, create=create)


def test_mixed_is_accepted_where_the_broker_allows_it() -> None:
    assert alter({}, {"+message.type": "MIXED"}, create=True, mixed_allowed=True) == {"message.type": "MIXED"}


def test_a_topic_without_the_attribute_is_normal() -> None:
    assert topic_message_type({}) is TopicMessageType.NORMAL
    assert topic_message_type({"message.type": "FIFO"}) is TopicMessageType.FIFO
    assert topic_message_type({"message.type": "garbage"}) is TopicMessageType.NORMAL


@pytest.mark.parametrize(
    ("properties", "kind"),
    [
        ({}, TopicMessageType.NORMAL),
        ({"TRAN_MSG": "true", "__SHARDINGKEY": "g"}, TopicMessageType.TRANSACTION),
        ({"DELAY": "3"}, TopicMessageType.DELAY),
        ({"TIMER_DELIVER_MS": "1"}, TopicMessageType.DELAY),
        ({"__SHARDINGKEY": "g"}, TopicMessageType.FIFO),
    ],
)
def test_a_messages_type_comes_from_its_properties(properties: dict[str, str], kind: TopicMessageType) -> None:
    assert message_type_of(properties) is kind


def test_the_type_check_passes_matches_and_mixed_and_refuses_the_rest() -> None:
    assert type_conflict(TopicMessageType.FIFO, TopicMessageType.FIFO) is None
    assert type_conflict(TopicMessageType.MIXED, TopicMessageType.DELAY) is None
    assert type_conflict(TopicMessageType.NORMAL, TopicMessageType.FIFO) == (
        "TopicMessageType validate failed, the expected type is NORMAL, but actual type is FIFO"
    )
    assert type_conflict(TopicMessageType.UNSPECIFIED, TopicMessageType.NORMAL) is not None
