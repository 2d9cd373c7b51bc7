"""ConsumerFilterTable and MessageFilter: RocketMQ 4.9.7's registration rules (versions, compile
failures, departed topics) and the two filter stages, including filterSupportRetry."""

from __future__ import annotations

from shoal.broker.filter import ConsumerFilterTable, SubscriptionEntry, compile_sql92, message_filter_for
from shoal.formats.properties import encode_properties


def _entry(expression: str, version: int, topic: str = "T", expression_type: str = "SQL92") -> SubscriptionEntry:
    return SubscriptionEntry(topic, expression, expression_type, version)


def test_registration_keeps_the_newest_version_and_drops_what_no_longer_compiles() -> None:
    """Goal: an older or equal version never replaces a filter; a newer expression that does not
    compile removes it; tags and empty expressions register nothing. Method: register in turn."""
    table = ConsumerFilterTable()
    table.register_group("G", [_entry("a = 1", 10)])
    first = table.get("T", "G")
    assert first is not None and (first.expression, first.client_version) == ("a = 1", 10)
    table.register_group("G", [_entry("a = 2", 10)])
    assert table.get("T", "G") == first
    table.register_group("G", [_entry("a = 1", 20)])
    same = table.get("T", "G")
    assert same is not None and same.client_version == 20 and same.compiled is first.compiled
    table.register_group("G", [_entry("a = ", 30)])
    assert table.get("T", "G") is None
    table.register_group("G", [_entry("TagA", 40, expression_type="TAG"), _entry("", 40, topic="U")])
    assert len(table) == 0


def test_a_topic_left_or_a_group_gone_takes_its_filters_along() -> None:
    """Goal: filters follow the group's subscriptions. Method: drop a topic, then the group."""
    table = ConsumerFilterTable()
    table.register_group("G", [_entry("a = 1", 1, "T"), _entry("b = 1", 1, "U")])
    table.register_group("H", [_entry("a = 1", 1, "T")])
    table.register_group("G", [_entry("b = 1", 1, "U")])
    assert table.get("T", "G") is None and table.get("U", "G") is not None
    table.unregister_group("G")
    assert table.get("U", "G") is None and table.get("T", "H") is not None


def test_message_filter_stages() -> None:
    """Goal: tag codes decide by tagsCode, SQL92 by properties, both for an arrival. Method: evaluate."""
    table = ConsumerFilterTable()
    by_sql = message_filter_for("T", "G", None, compile_sql92("a > 1"), table, filter_support_retry=False)
    assert by_sql.reads_properties and not by_sql.passes_everything
    assert by_sql.matches_properties({"a": "2"}) and not by_sql.matches_properties({"a": "x"})
    assert by_sql.matches_arrival(7, encode_properties({"a": "5"}))
    assert not by_sql.matches_arrival(7, encode_properties({}))
    by_tags = message_filter_for("T", "G", frozenset({7}), None, table, filter_support_retry=False)
    assert by_tags.matches_arrival(7, b"") and not by_tags.matches_arrival(8, b"")
    assert message_filter_for("T", "G", None, None, table, filter_support_retry=False).passes_everything


def test_retry_messages_are_judged_by_the_filter_of_their_original_topic() -> None:
    """Goal: with filterSupportRetry a %RETRY% message passes the group's SQL92 filter of its
    RETRY_TOPIC, or passes when there is none. Method: evaluate retry messages of two topics."""
    table = ConsumerFilterTable()
    table.register_group("G", [_entry("a > 5", 1, "T")])
    retry = message_filter_for("%RETRY%G", "G", None, None, table, filter_support_retry=True)
    assert retry.reads_properties
    assert retry.matches_properties({"a": "9", "RETRY_TOPIC": "T"})
    assert not retry.matches_properties({"a": "1", "RETRY_TOPIC": "T"})
    assert retry.matches_properties({"a": "1", "RETRY_TOPIC": "Other"})
    assert retry.matches_properties({"a": "1"})
    plain = message_filter_for("%RETRY%G", "G", None, None, table, filter_support_retry=False)
    assert plain.passes_everything
