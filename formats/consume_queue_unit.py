"""The ConsumeQueue unit: one message's place in a (topic, queueId) queue (spec §2).

    offset  size  field                 (one 20-byte unit, big-endian)
    0       8     CommitLog offset
    8       4     message size (TOTALSIZE)
    12      8     tagsCode              Java String.hashCode of TAGS; deliver time in SCHEDULE_TOPIC_XXXX

Logical offset n is at byte n*20 of the queue. The first file of a queue that starts past 0 is
padded with blank units (0, 0x7FFFFFFF, 0) which readers skip. The file class is
`shoal.store.consume_queue.ConsumeQueue`.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from shoal.formats import limits

UNIT = struct.Struct(">qiq")
assert UNIT.size == limits.CONSUME_QUEUE_UNIT_SIZE_BYTES
UNIT_SIZE = UNIT.size
BLANK_UNIT_SIZE_FIELD = 0x7FFFFFFF
BLANK_UNIT = UNIT.pack(0, BLANK_UNIT_SIZE_FIELD, 0)


class Unit(NamedTuple):
    physical_offset: int
    size: int
    tags_code: int


def is_blank_unit(physical_offset: int, size: int) -> bool:
    return size == BLANK_UNIT_SIZE_FIELD and physical_offset == 0
