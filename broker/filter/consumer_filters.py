"""The compiled SQL92 filter of each (topic, consumer group), kept from the group's heartbeats
(RocketMQ 4.9.7's ConsumerFilterManager, without its bloom filter bit maps).

A pull of a SQL92 subscription is filtered with the entry registered here; the pull's subVersion
says whether the entry is recent enough (FILTER_DATA_NOT_LATEST otherwise). A heartbeat replaces
an entry only with a newer client version, as RocketMQ does: an older heartbeat still in flight
cannot bring back a filter the client has since changed. An expression that no longer compiles
removes the entry, so the client's pulls get FILTER_DATA_NOT_EXIST instead of the old filter.

RocketMQ also marks entries of departed groups "dead" and persists them (consumerFilter.json) to
keep ConsumeQueue bit maps meaningful; Shoal computes no bit maps, so an entry simply goes with its
group or subscription and a restarted broker relearns every filter from the next heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from shoal.broker.filter.errors import FilterError
from shoal.broker.filter.limits import CONSUMER_FILTERS_MAX_COUNT
from shoal.broker.filter.sql92 import Sql92Filter
from shoal.broker.filter.subscription import compile_filter, is_tag_type

__all__ = ["ConsumerFilter", "ConsumerFilterTable", "SubscriptionEntry"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubscriptionEntry:
    """What a heartbeat says of one subscription (ConsumerData.subscriptionDataSet)."""

    topic: str
    expression: str
    expression_type: str | None
    version: int


@dataclass(frozen=True)
class ConsumerFilter:
    """One group's compiled filter on one topic; `client_version` is the subVersion it came with."""

    topic: str
    group: str
    expression_type: str
    expression: str
    client_version: int
    compiled: Sql92Filter


class ConsumerFilterTable:
    def __init__(self) -> None:
        self._filters: dict[tuple[str, str], ConsumerFilter] = {}

    def get(self, topic: str, group: str) -> ConsumerFilter | None:
        return self._filters.get((topic, group))

    def __len__(self) -> int:
        return len(self._filters)

    def register_group(self, group: str, subscriptions: Iterable[SubscriptionEntry]) -> None:
        """A heartbeat's subscriptions: register each; drop the group's filters on topics it left."""
        topics = set()
        for entry in subscriptions:
            topics.add(entry.topic)
            self.register(group, entry)
        for key in [key for key in self._filters if key[1] == group and key[0] not in topics]:
            log.info("consumer filter of %s on %s removed: no longer subscribed", group, key[0])
            del self._filters[key]

    def register(self, group: str, entry: SubscriptionEntry) -> None:
        """FilterDataMapByTopic.register: tag subscriptions and empty expressions are not kept; an
        entry changes only with a newer version; an expression that fails to compile removes it."""
        if is_tag_type(entry.expression_type) or not entry.expression:
            return
        key = (entry.topic, group)
        old = self._filters.get(key)
        if old is not None and entry.version <= old.client_version:
            return
        if old is not None and (old.expression, old.expression_type) == (entry.expression, entry.expression_type):
            self._filters[key] = ConsumerFilter(
                old.topic, group, old.expression_type, old.expression, entry.version, old.compiled
            )
            return
        try:
            compiled = compile_filter(entry.expression_type, entry.expression)
        except FilterError as error:
            log.warning("consumer filter of %s on %s does not compile: %s", group, entry.topic, error)
            self._filters.pop(key, None)
            return
        assert compiled is not None  # not a tag type
        if old is None and len(self._filters) >= CONSUMER_FILTERS_MAX_COUNT:
            log.error("consumer filter of %s on %s refused: %d filters already", group, entry.topic, len(self._filters))
            return
        self._filters[key] = ConsumerFilter(
            entry.topic, group, str(entry.expression_type), entry.expression, entry.version, compiled
        )
        log.info("consumer filter of %s on %s: %s %r", group, entry.topic, entry.expression_type, entry.expression)

    def unregister_group(self, group: str) -> None:
        for key in [key for key in self._filters if key[1] == group]:
            del self._filters[key]
