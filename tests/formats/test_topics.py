"""Tests of shoal.formats.topics: RocketMQ 4.9.7's TopicValidator rules, system topics, %RETRY% / %DLQ%."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal.formats import limits, topics
from shoal.formats.topics import (
    GROUP_NAME_MAX_LENGTH,
    NOT_ALLOWED_SEND_TOPICS,
    TOPIC_NAME_MAX_LENGTH,
    dlq_topic,
    is_system_topic,
    retry_topic,
    validate_group_name,
    validate_topic_name,
)

BLANK = "The specified topic is blank."
ILLEGAL = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
TOO_LONG = "The specified topic is longer than topic max length."
VALID_CHARACTERS = string.ascii_letters + string.digits + "%|_-"


@pytest.mark.parametrize("topic", ["TopicTest", "a", "%RETRY%group", "%DLQ%g", "a|b", "T-1_x", "t" * 127])
def test_valid_topic_names_have_no_problem(topic: str) -> None:
    """Goal: TopicValidator.validateTopic accepts ^[%|a-zA-Z0-9_-]+$ up to 127 characters. Method: valid names."""
    assert validate_topic_name(topic) is None


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("", BLANK),
        ("   ", BLANK),
        ("\t", BLANK),
        ("bad topic", ILLEGAL),
        ("bad topic!", ILLEGAL),
        ("a.b", ILLEGAL),
        ("a/b", ILLEGAL),
        ("中文", ILLEGAL),
        ("topic\n", ILLEGAL),
        ("t" * 128, TOO_LONG),
    ],
)
def test_invalid_topic_names_get_topic_validator_remarks(topic: str, remark: str) -> None:
    """Goal: the broker answers 4.9.7's exact remarks (blank, then characters, then length). Method: bad names."""
    assert validate_topic_name(topic) == remark


def test_characters_are_checked_before_the_length() -> None:
    """Goal: TopicValidator's order of checks. Method: a name both too long and illegal."""
    assert validate_topic_name("!" * 200) == ILLEGAL


@given(st.text(alphabet=VALID_CHARACTERS, min_size=1, max_size=TOPIC_NAME_MAX_LENGTH))
def test_every_name_of_valid_characters_within_the_length_is_valid(topic: str) -> None:
    """Goal: the character set and length bound are the whole rule. Method: hypothesis names from the set."""
    assert validate_topic_name(topic) is None


def test_the_topic_length_bound_fills_the_records_topic_length_byte() -> None:
    """Goal: a valid ASCII name always fits TOPICLENGTH. Method: compare the bounds."""
    assert TOPIC_NAME_MAX_LENGTH == limits.TOPIC_NAME_MAX_CHARS == limits.TOPIC_LENGTH_MAX_BYTES == 127


def test_group_names_are_bounded_so_their_retry_topic_is_a_valid_topic() -> None:
    """Goal: a group of the maximum length still has a valid %RETRY% topic. Method: validate both."""
    group = "g" * GROUP_NAME_MAX_LENGTH
    assert GROUP_NAME_MAX_LENGTH == 120
    assert validate_group_name(group) is None
    assert validate_topic_name(retry_topic(group)) is None
    assert validate_topic_name(dlq_topic(group)) is None
    assert validate_group_name(group + "g") == (
        f"The specified group: {group}..., is longer than group max length: {GROUP_NAME_MAX_LENGTH}"
    )


def test_group_names_follow_the_topic_character_rules_and_the_callers_length() -> None:
    """Goal: validateGroup's remarks; a 4.9.7 client allows 255 characters. Method: bad names, both bounds."""
    assert validate_group_name(" ") == "The specified group is blank."
    assert validate_group_name("cg\n") is not None  # Matcher.matches: no trailing newline
    assert validate_group_name("bad group") == (
        "The specified group: bad group, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    )
    long_group = "g" * limits.GROUP_NAME_MAX_CHARS
    assert validate_group_name(long_group) is not None
    assert validate_group_name(long_group, limits.GROUP_NAME_MAX_CHARS) is None
    assert validate_group_name(long_group + "g", limits.GROUP_NAME_MAX_CHARS) is not None


def test_retry_and_dlq_topics_prefix_the_group() -> None:
    """Goal: MixAll.getRetryTopic / getDLQTopic. Method: build both for one group."""
    assert retry_topic("cg") == "%RETRY%cg"
    assert dlq_topic("cg") == "%DLQ%cg"
    assert retry_topic("cg").startswith(topics.RETRY_GROUP_TOPIC_PREFIX)
    assert dlq_topic("cg").startswith(topics.DLQ_GROUP_TOPIC_PREFIX)


@pytest.mark.parametrize(
    "topic",
    [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_wheel_timer",
        "rmq_sys_anything",
    ],
)
def test_system_topics_are_recognised(topic: str) -> None:
    """Goal: TopicValidator.isSystemTopic: its set and the rmq_sys_ prefix. Method: each system topic."""
    assert is_system_topic(topic)


@pytest.mark.parametrize("topic", ["TopicTest", "%RETRY%cg", "%DLQ%cg", "RMQ_SYS_OTHER", "tbw102"])
def test_user_retry_and_dlq_topics_are_not_system_topics(topic: str) -> None:
    """Goal: only the listed names and the lower-case prefix are system topics. Method: near misses."""
    assert not is_system_topic(topic)


def test_topics_no_client_may_send_to_are_system_topics() -> None:
    """Goal: NOT_ALLOWED_SEND_TOPIC_SET is the broker's own topics, TBW102 excluded. Method: compare sets."""
    assert {
        "SCHEDULE_TOPIC_XXXX",
        "rmq_sys_wheel_timer",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    } == NOT_ALLOWED_SEND_TOPICS
    assert all(is_system_topic(topic) for topic in NOT_ALLOWED_SEND_TOPICS)
    assert topics.TBW102 not in NOT_ALLOWED_SEND_TOPICS
