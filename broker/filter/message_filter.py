"""Which messages one pull delivers: RocketMQ 4.9.7's ExpressionMessageFilter and, with
`filterSupportRetry`, ExpressionForRetryMessageFilter, without the bloom filter step (ConsumeQueue
extensions are off by default there, so it decides nothing).

Two stages, as RocketMQ reads a queue: the ConsumeQueue unit's tagsCode (tag subscriptions), then
the message's properties from the CommitLog (SQL92 subscriptions; the properties are what the
producer set plus what the client and broker add, TAGS and KEYS included). A SQL92 expression that
is unknown or throws for a message does not match it.

On a retry topic (`%RETRY%<group>`) with filterSupportRetry, a message is judged by the SQL92
filter its group registered for the message's original topic (the RETRY_TOPIC property); without a
filter there it passes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shoal.broker.filter.consumer_filters import ConsumerFilterTable
from shoal.broker.filter.sql92 import Sql92Filter
from shoal.formats.properties import RETRY_TOPIC, decode_properties
from shoal.formats.record import decode_header
from shoal.formats.topics import RETRY_GROUP_TOPIC_PREFIX
from shoal.store import GetResult

__all__ = ["MessageFilter", "keep_matching", "message_filter_for"]

log = logging.getLogger(__name__)

RetryFilters = Callable[[str], Sql92Filter | None]
"""The original topic of a retried message -> the SQL92 filter its group has there (None: none)."""


@dataclass(frozen=True)
class MessageFilter:
    """One pull's filter; immutable, so a held pull keeps the one it was made with."""

    tag_codes: frozenset[int] | None = None
    """Tag hash codes a unit's tagsCode must be one of; None: every tagsCode passes."""
    sql92: Sql92Filter | None = None
    retry_filters: RetryFilters | None = None
    """Set on a retry topic with filterSupportRetry: replaces `sql92` (RocketMQ's retry filter)."""

    @property
    def reads_properties(self) -> bool:
        """Whether a message's properties must be read to decide (else the tagsCode decides)."""
        return self.sql92 is not None or self.retry_filters is not None

    @property
    def passes_everything(self) -> bool:
        return self.tag_codes is None and not self.reads_properties

    def matches_tags_code(self, tags_code: int) -> bool:
        return self.tag_codes is None or tags_code in self.tag_codes

    def matches_properties(self, properties: Mapping[str, str]) -> bool:
        sql92 = self.sql92
        if self.retry_filters is not None:
            original_topic = properties.get(RETRY_TOPIC)
            sql92 = self.retry_filters(original_topic) if original_topic else None
        return sql92 is None or sql92.matches(properties)

    def matches_arrival(self, tags_code: int, raw_properties: bytes) -> bool:
        """A message the Dispatcher just indexed (long polling): both stages."""
        if not self.matches_tags_code(tags_code):
            return False
        return not self.reads_properties or self.matches_properties(decode_properties(raw_properties))


def message_filter_for(
    topic: str,
    group: str,
    tag_codes: frozenset[int] | None,
    sql92: Sql92Filter | None,
    filters: ConsumerFilterTable,
    *,
    filter_support_retry: bool,
) -> MessageFilter:
    """The filter of a pull of `group` on `topic`: `tag_codes` from a tag subscription, `sql92` from
    a SQL92 one; on the group's retry topic with `filter_support_retry`, the group's registered
    SQL92 filters of the original topics as well."""
    retry_filters: RetryFilters | None = None
    if filter_support_retry and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        retry_group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]

        def of_original_topic(original_topic: str) -> Sql92Filter | None:
            registered = filters.get(original_topic, retry_group)
            return registered.compiled if registered is not None else None

        retry_filters = of_original_topic

    return MessageFilter(tag_codes, sql92, retry_filters)


def keep_matching(found: GetResult, message_filter: MessageFilter) -> None:
    """Drop (and release) the found records whose properties fail the filter."""
    kept: list[int] = []
    for index, view in enumerate(found.messages):
        try:
            record = decode_header(view, 0)
            raw = view[record.properties_position : record.properties_position + record.properties_length]
            matches = message_filter.matches_properties(decode_properties(raw))
        except (ValueError, IndexError) as failure:  # a damaged record: RocketMQ's evaluator skips it too
            log.warning("record at %d unreadable for filtering: %s", found.commitlog_offsets[index], failure)
            matches = False
        if matches:
            kept.append(index)
        else:
            view.release()
    if len(kept) < len(found.messages):
        found.messages = [found.messages[index] for index in kept]
        found.queue_offsets = [found.queue_offsets[index] for index in kept]
        found.commitlog_offsets = [found.commitlog_offsets[index] for index in kept]
        found.count = len(kept)
