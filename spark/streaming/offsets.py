"""Where a topic stream stands: one offset per message queue, as Spark keeps it in the checkpoint.

A queue is (topic, broker name, queue id), the way RocketMQ names it; its offset is a ConsumeQueue
index (the next message to read). In the checkpoint an offset map is JSON,

    {"Orders": {"broker-a": {"0": 120, "1": 98}, "broker-b": {"0": 7}}}

so a person can read it and `startingOffsets` can take the same shape. Pure: the stream reader
asks the brokers, these functions decide.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shoal.spark.errors import ReadOptionError

__all__ = [
    "EARLIEST",
    "LATEST",
    "NEW_QUEUE_START",
    "Offsets",
    "QueueKey",
    "QueueRange",
    "admit",
    "advance",
    "from_json",
    "parse_offsets_option",
    "ranges",
    "to_json",
]

QueueKey = tuple[str, str, int]
"""(topic, broker name, queue id)."""
Offsets = dict[QueueKey, int]

EARLIEST = -2
"""In `startingOffsets` JSON: the queue's first message (as in Spark's Kafka source)."""
LATEST = -1
"""In `startingOffsets` JSON: the queue's end (only messages sent after the query starts)."""
NEW_QUEUE_START = 0
"""A queue that appears while the query runs (a topic scaled up, a broker group added) is read from
its first message: a queue's ConsumeQueue starts at 0, so nothing sent to it is skipped."""


@dataclass(frozen=True, slots=True)
class QueueRange:
    """The messages of one queue with ConsumeQueue offsets in [start, end): one Spark partition."""

    topic: str
    broker: str
    queue_id: int
    start: int
    end: int

    @property
    def key(self) -> QueueKey:
        return (self.topic, self.broker, self.queue_id)


def to_json(offsets: Offsets) -> dict[str, Any]:
    """The checkpoint form: {topic: {broker: {"queue id": offset}}}, keys sorted."""
    nested: dict[str, Any] = {}
    for (topic, broker, queue_id), offset in sorted(offsets.items()):
        nested.setdefault(topic, {}).setdefault(broker, {})[str(queue_id)] = offset
    return nested


def from_json(value: Mapping[str, Any], *, allow_special: bool = False) -> Offsets:
    """The inverse of to_json; ReadOptionError naming the bad entry. `allow_special` admits
    EARLIEST and LATEST (a user's `startingOffsets`, not a checkpoint)."""
    offsets: Offsets = {}
    if not isinstance(value, Mapping):
        raise ReadOptionError(f"offsets must be a JSON object of topics, not {type(value).__name__}")
    for topic, brokers in value.items():
        if not isinstance(brokers, Mapping):
            raise ReadOptionError(f"offsets of topic {topic!r} must be an object of brokers")
        for broker, queues in brokers.items():
            if not isinstance(queues, Mapping):
                raise ReadOptionError(f"offsets of {topic!r} on {broker!r} must be an object of queue ids")
            for queue, offset in queues.items():
                try:
                    queue_id = int(queue)
                except ValueError:
                    raise ReadOptionError(f"queue id {queue!r} of {topic!r} on {broker!r} is not a number") from None
                lowest = EARLIEST if allow_special else 0
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < lowest or queue_id < 0:
                    raise ReadOptionError(f"offset {offset!r} of {topic}/{broker}/{queue} is not a valid offset")
                offsets[(str(topic), str(broker), queue_id)] = offset
    return offsets


def parse_offsets_option(text: str) -> Offsets:
    """`startingOffsets` given as JSON (EARLIEST and LATEST allowed per queue)."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ReadOptionError(f"startingOffsets is neither earliest, latest nor JSON offsets: {error}") from None
    return from_json(value, allow_special=True)


def advance(start: Offsets, latest: Offsets) -> Offsets:
    """The end of the next batch when everything available is read: each queue's latest offset,
    never behind where it stands (a broker answering with less, a slave behind its master, must not
    make the stream go back). A queue that left the routes keeps its offset, so it resumes where it
    was if it comes back; a new queue starts at NEW_QUEUE_START."""
    end = dict(start)
    for key, offset in latest.items():
        end[key] = max(start.get(key, NEW_QUEUE_START), offset)
    return end


def admit(start: Offsets, latest: Offsets, max_messages: int) -> Offsets:
    """advance() capped at about `max_messages` in all (`maxMessagesPerTrigger`): each queue gets a
    share of the cap in proportion to its backlog (Spark's Kafka source does the same), at least
    one message where it has any, so no queue starves."""
    if max_messages < 1:
        raise ValueError("max_messages must be at least 1")
    end = advance(start, latest)
    backlog = {key: offset - start.get(key, NEW_QUEUE_START) for key, offset in end.items()}
    total = sum(backlog.values())
    if total <= max_messages:
        return end
    capped = dict(end)
    for key, waiting in backlog.items():
        if waiting > 0:
            share = max(1, waiting * max_messages // total)
            capped[key] = start.get(key, NEW_QUEUE_START) + min(waiting, share)
    return capped


def ranges(start: Offsets, end: Offsets) -> list[QueueRange]:
    """One QueueRange per queue with messages in [start, end), in a stable order."""
    found = []
    for key in sorted(end):
        first = start.get(key, NEW_QUEUE_START)
        if end[key] > first:
            topic, broker, queue_id = key
            found.append(QueueRange(topic, broker, queue_id, first, end[key]))
    return found
