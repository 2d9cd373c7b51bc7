"""Topic and group names: system topics, `%RETRY%` / `%DLQ%` topics, and validity (spec §1.9, §7.3).

RocketMQ 4.9.7's `TopicValidator` is the reference (plus RocketMQ 5's timer topic, which a 4.9
broker would refuse to receive too, and its `validateGroup`, which 4.9.7 clients apply before
sending). Validators return None for a valid name, else RocketMQ's remark: the broker answers
with it, the client raises it.
"""

from __future__ import annotations

import re

from shoal.formats import limits

TBW102 = "TBW102"  # AUTO_CREATE_TOPIC_KEY_TOPIC: the template of auto-created topics
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # RocketMQ 5's TimerMessageStore topic: messages with a delivery time
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

TOPIC_NAME_MAX_LENGTH = limits.TOPIC_NAME_MAX_CHARS
GROUP_NAME_MAX_LENGTH = TOPIC_NAME_MAX_LENGTH - len(RETRY_GROUP_TOPIC_PREFIX)
"""120, RocketMQ 5's TopicValidator.GROUP_MAX_LENGTH: a consumer group's %RETRY% topic must fit."""
VALID_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
"""Used with `fullmatch`, as Java's `Matcher.matches`: `re.match` would let a trailing newline through."""

NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET` (and the timer topic): only the broker writes them."""


def validate_topic_name(topic: str) -> str | None:
    """None when `topic` is a valid name, else why not: RocketMQ 4.9.7's TopicValidator remarks
    (a send answers them with SYSTEM_ERROR)."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not VALID_NAME.fullmatch(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_NAME_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_group_name(group: str, length_max: int = GROUP_NAME_MAX_LENGTH) -> str | None:
    """None when `group` may name a group, else why not (RocketMQ 5's TopicValidator.validateGroup;
    a 4.9.7 client's Validators.checkGroup allows `limits.GROUP_NAME_MAX_CHARS`)."""
    if not group or not group.strip():
        return "The specified group is blank."
    shown = group[:length_max]
    if not VALID_NAME.fullmatch(group):
        return f"The specified group: {shown}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > length_max:
        return f"The specified group: {shown}..., is longer than group max length: {length_max}"
    return None


def retry_topic(group: str) -> str:
    """`%RETRY%<group>`: where a group's failed messages come back."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """`%DLQ%<group>`: where a group's messages go after their last retry."""
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_system_topic(topic: str) -> bool:
    """`TopicValidator.isSystemTopic`: its fixed set (the broker's own topics, TBW102, the benchmark
    and trace topics) and the rmq_sys_ prefix. RocketMQ also adds, at run time, a broker's
    `<cluster>_REPLY_TOPIC` and a custom `msgTraceTopicName`; a name alone cannot tell those."""
    return (
        topic in NOT_ALLOWED_SEND_TOPICS
        or topic in (TBW102, BENCHMARK_TOPIC, TRACE_TOPIC)
        or topic.startswith(SYSTEM_TOPIC_PREFIX)
    )
