"""Topic attributes (RocketMQ 5.x): the known keys, the `+key=value,-key` modification string of
UPDATE_AND_CREATE_TOPIC's `attributes` header field, and how a modification changes a topic's map.

Pure functions; every refusal is a `TopicAttributeError` whose text is RocketMQ's (AttributeParser,
AttributeUtil, the broker's MIXED check), so an admin tool shows the same remark from either broker.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from shoal.formats.properties import (
    DELAY_TIME_LEVEL,
    SHARDING_KEY,
    TIMER_DELAY_MS,
    TIMER_DELAY_SEC,
    TIMER_DELIVER_MS,
    TRANSACTION_PREPARED,
)

MESSAGE_TYPE_KEY = "message.type"


class TopicAttributeError(ValueError):
    """A modification RocketMQ refuses; the text is its remark."""


class MixedMessageTypeError(TopicAttributeError):
    """`message.type=MIXED` where the broker does not allow it (RocketMQ answers INVALID_PARAMETER)."""


class TopicMessageType(enum.Enum):
    """`message.type` values (TopicMessageType)."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    changeable: bool
    """False: only set when the topic is created."""
    allowed: frozenset[str] | None
    """The values an enum attribute takes; None: a long in [low, high]."""
    low: int = 0
    high: int = 0

    def verify(self, value: str) -> None:
        if self.allowed is not None:
            if value not in self.allowed:
                raise TopicAttributeError(f"value is not in set: {sorted(self.allowed)}")
            return
        try:
            number = int(value)
        except ValueError:
            raise TopicAttributeError(f"value is not a long: {value}") from None
        if not self.low <= number <= self.high:
            raise TopicAttributeError(f"value is not in range({self.low}, {self.high})")


LONG_MAX = 2**63 - 1
ATTRIBUTES: Mapping[str, Attribute] = {
    attribute.name: attribute
    for attribute in (
        Attribute("queue.type", False, frozenset({"BatchCQ", "SimpleCQ"})),
        Attribute("cleanup.policy", False, frozenset({"DELETE", "COMPACTION"})),
        Attribute(MESSAGE_TYPE_KEY, True, frozenset(kind.value for kind in TopicMessageType)),
        Attribute("reserve.time", True, None, -1, LONG_MAX),
    )
}
"""TopicAttributes.ALL of RocketMQ 5.x."""

UNSUPPORTED_VALUES: Mapping[str, Mapping[str, str]] = {
    "queue.type": {"BatchCQ": "queue.type BatchCQ is not supported by Shoal: its ConsumeQueues are SimpleCQ"},
    "cleanup.policy": {"COMPACTION": "cleanup.policy COMPACTION is not supported by Shoal: topics are cleaned by age"},
}
"""Values RocketMQ knows that Shoal's store does not implement: refused, never accepted and ignored."""
RESERVE_TIME_REFUSAL = "Update topic reserveTime not supported"
"""RocketMQ's answer for reserve.time without its tiered store (Shoal has none)."""
MIXED_REFUSAL = "MIXED message type is not supported."


def parse_modification(text: str) -> dict[str, str]:
    """`+k1=v1,+k2=v2,-k3` -> {"+k1": "v1", "+k2": "v2", "-k3": ""} (AttributeParser.parseToMap)."""
    if not text:
        return {}
    result: dict[str, str] = {}
    for item in text.split(","):
        if "=" in item:
            key, _, value = item.partition("=")
            value = value.split("=", 1)[0]
            if "+" not in key:
                raise TopicAttributeError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = item, ""
            if "-" not in key:
                raise TopicAttributeError(f"delete attribute format is wrong: {key}")
        if key in result:
            raise TopicAttributeError(f"key duplication: {key}")
        result[key] = value
    return result


def format_modification(attributes: Mapping[str, str]) -> str:
    """The inverse of `parse_modification` (keys keep their sign)."""
    return ",".join(f"{key}={value}" if value else key for key, value in attributes.items())


def alter(
    current: Mapping[str, str], modification: Mapping[str, str], *, create: bool, mixed_allowed: bool = False
) -> dict[str, str]:
    """The topic's attributes after `modification` (signed keys), as AttributeUtil.alterCurrentAttributes
    computes them; `create`: the topic does not exist yet (only additions, and unchangeable keys may be set)."""
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    delete: set[str] = set()
    seen: set[str] = set()
    for key, value in modification.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise TopicAttributeError("kv string format wrong.")
        if real in seen:
            raise TopicAttributeError(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith("+"):
                raise TopicAttributeError(f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith("+"):
            add[real] = value
        elif key.startswith("-"):
            if real not in current:
                raise TopicAttributeError(f"attempt to delete a nonexistent key: {real}")
            delete.add(real)
        else:
            raise TopicAttributeError(f"wrong format key: {real}")
    for changes, initial, deleting in (
        (init, True, False),
        (add, False, False),
        (dict.fromkeys(delete, ""), False, True),
    ):
        for key, value in changes.items():
            attribute = ATTRIBUTES.get(key)
            if attribute is None:
                raise TopicAttributeError(f"unsupported key: {key}")
            if not initial and not attribute.changeable:
                raise TopicAttributeError(f"attempt to update an unchangeable attribute. key: {key}")
            if not deleting:
                attribute.verify(value)
                refusal = UNSUPPORTED_VALUES.get(key, {}).get(value)
                if refusal is not None:
                    raise TopicAttributeError(refusal)
    if "reserve.time" in init or "reserve.time" in add:
        raise TopicAttributeError(RESERVE_TIME_REFUSAL)
    if not mixed_allowed and (init.get(MESSAGE_TYPE_KEY) or add.get(MESSAGE_TYPE_KEY)) == TopicMessageType.MIXED.value:
        raise MixedMessageTypeError(MIXED_REFUSAL)
    result = {**current, **init, **add}
    for key in delete:
        result.pop(key, None)
    return result


def topic_message_type(attributes: Mapping[str, str]) -> TopicMessageType:
    """The topic's `message.type`; NORMAL when unset (TopicConfig.getTopicMessageType)."""
    try:
        return TopicMessageType(attributes.get(MESSAGE_TYPE_KEY, TopicMessageType.NORMAL.value))
    except ValueError:
        return TopicMessageType.NORMAL


def message_type_of(properties: Mapping[str, str]) -> TopicMessageType:
    """What a message is, from its properties (TopicMessageType.parseFromMessageProperty)."""
    if properties.get(TRANSACTION_PREPARED) == "true":
        return TopicMessageType.TRANSACTION
    if any(key in properties for key in (DELAY_TIME_LEVEL, TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)):
        return TopicMessageType.DELAY
    if SHARDING_KEY in properties:
        return TopicMessageType.FIFO
    return TopicMessageType.NORMAL


def type_conflict(topic_type: TopicMessageType, message_type: TopicMessageType) -> str | None:
    """RocketMQ 5 proxy's check (DefaultTopicMessageTypeValidator): the refusal text, or None."""
    if message_type is TopicMessageType.UNSPECIFIED or (
        message_type is not topic_type and topic_type is not TopicMessageType.MIXED
    ):
        return (
            f"TopicMessageType validate failed, the expected type is {topic_type.value}, "
            f"but actual type is {message_type.value}"
        )
    return None
