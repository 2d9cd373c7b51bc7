"""Tag subscriptions: expression parsing (`FilterAPI.buildSubscriptionData`) and client-side filtering.

An expression is `*` (everything) or tags joined by `||` (`TagA || TagB`). The broker filters
by the tags' Java `String.hashCode`, which can collide, so consumers filter again by the exact
tag (`msgListFilterAgain`); messages without a tag never match a tag subscription.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from shoal.client.errors import InvalidSubscriptionError
from shoal.client.message import MessageExt
from shoal.formats.java_hash import java_string_hash
from shoal.protocol import SubscriptionData

SUB_ALL = "*"
EXPRESSION_TYPE_TAG = "TAG"


def parse_tags(expression: str | None) -> tuple[str, ...]:
    """The tags of an expression; () means every message (`*`, empty or None)."""
    if expression is None or expression == SUB_ALL or not expression:
        return ()
    tags: list[str] = []
    for part in expression.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    if not tags:
        raise InvalidSubscriptionError(f"expression {expression!r} names no tag; use '*' for every message")
    return tuple(tags)


@dataclass(frozen=True, slots=True)
class Subscription:
    """One topic subscription: the expression as given and its tags (empty = all)."""

    topic: str
    expression: str
    tags: frozenset[str]
    sub_version: int

    @classmethod
    def build(cls, topic: str, expression: str | None, sub_version: int) -> Subscription:
        """Parse `expression`; `sub_version` is the subscription's timestamp (ms)."""
        tags = parse_tags(expression)
        return cls(topic, " || ".join(tags) if tags else SUB_ALL, frozenset(tags), sub_version)

    @property
    def is_all(self) -> bool:
        """True when every message of the topic matches."""
        return not self.tags

    def matches(self, tag: str | None) -> bool:
        """Whether a message with TAGS `tag` belongs to this subscription."""
        return not self.tags or (tag is not None and tag in self.tags)

    def filter(self, messages: Iterable[MessageExt]) -> list[MessageExt]:
        """The messages whose tag matches exactly (a list copy even when everything matches)."""
        if not self.tags:
            return list(messages)
        tags = self.tags
        return [message for message in messages if message.tags is not None and message.tags in tags]

    def to_subscription_data(self) -> SubscriptionData:
        """The heartbeat form, with Java hash codes of the tags."""
        ordered = parse_tags(self.expression)
        return SubscriptionData(
            topic=self.topic,
            sub_string=self.expression,
            tags_set=ordered,
            code_set=tuple(java_string_hash(tag) for tag in ordered),
            sub_version=self.sub_version,
            expression_type=EXPRESSION_TYPE_TAG,
        )
