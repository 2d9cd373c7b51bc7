"""Tag expressions (FilterAPI), Java hash codes of tags, and client-side filtering (the hash itself: tests/formats)."""

from __future__ import annotations

import pytest

from shoal.client.errors import InvalidSubscriptionError
from shoal.client.message import MessageExt
from shoal.client.subscription import Subscription, parse_tags
from shoal.formats.java_hash import java_string_hash


@pytest.mark.parametrize(
    ("expression", "tags"),
    [
        (None, ()),
        ("", ()),
        ("*", ()),
        ("TagA", ("TagA",)),
        ("TagA || TagB", ("TagA", "TagB")),
        (" TagA||TagB ||  TagC ", ("TagA", "TagB", "TagC")),
        ("TagA || TagA", ("TagA",)),
        ("TagA ||", ("TagA",)),
    ],
)
def test_expressions_parse_like_filter_api(expression: str | None, tags: tuple[str, ...]) -> None:
    """Goal: `*`/empty = all; `||` separated, trimmed, de-duplicated tags. Method: parse samples."""
    assert parse_tags(expression) == tags


@pytest.mark.parametrize("expression", ["||", " || ", "   "])
def test_expressions_naming_no_tag_are_refused(expression: str) -> None:
    """Goal: an expression matching nothing is a mistake, not a silent empty subscription."""
    with pytest.raises(InvalidSubscriptionError):
        parse_tags(expression)


def message(tags: str | None) -> MessageExt:
    return MessageExt(topic="T", body=b"x", tags=tags)


def test_filter_keeps_exact_tags_only() -> None:
    """Goal: msgListFilterAgain: exact tag match, untagged never matches. Method: mixed messages."""
    subscription = Subscription.build("T", "TagA || TagB", 1)
    messages = [message("TagA"), message("TagC"), message(None), message("TagB"), message("taga")]
    assert [item.tags for item in subscription.filter(messages)] == ["TagA", "TagB"]
    assert subscription.matches("TagB") and not subscription.matches(None)


def test_star_subscription_keeps_everything() -> None:
    """Goal: `*` filters nothing, untagged included. Method: filter a mix."""
    subscription = Subscription.build("T", "*", 1)
    assert subscription.is_all
    assert len(subscription.filter([message("A"), message(None)])) == 2


def test_subscription_data_carries_java_hash_codes() -> None:
    """Goal: heartbeat SubscriptionData as Java builds it. Method: build one, check fields."""
    data = Subscription.build("TopicTest", "TagA || TagB", 1700000000000).to_subscription_data()
    assert data.topic == "TopicTest"
    assert data.sub_string == "TagA || TagB"
    assert data.tags_set == ("TagA", "TagB")
    assert data.code_set == (2598919, java_string_hash("TagB"))
    assert data.sub_version == 1700000000000
    assert data.expression_type == "TAG"
    all_data = Subscription.build("T", None, 2).to_subscription_data()
    assert (all_data.sub_string, all_data.tags_set, all_data.code_set) == ("*", (), ())
