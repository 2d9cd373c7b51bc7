"""The IndexFile layout: header, hash slots and entries (spec §3).

    header (40 bytes)
    offset  size  field
    0       8     beginTimestamp      store time of the first indexed message
    8       8     endTimestamp        store time of the last indexed message
    16      8     beginPhyOffset
    24      8     endPhyOffset
    32      4     hashSlotCount       slots that were empty when first used
    36      4     indexCount          next entry number; starts at 1

    slots: hash_slots ints at byte 40; each holds the newest entry number of its bucket (0 = empty)

    entry k (k >= 1) at 40 + hash_slots*4 + k*20
    0       4     keyHash             abs(String.hashCode(key)), MIN_VALUE -> 0
    4       8     phyOffset
    12      4     timeDiff            (storeTimestamp - beginTimestamp) / 1000, seconds
    16      4     prevIndex           older entry in the same bucket, 0 = end of chain

Files are named by their creation time, `yyyyMMddHHmmssSSS` in local time, and hold
`entries - 1` keys. Keys are `topic#key` for each KEYS token and `topic#uniqKey`
(`index_key`). The file class is `shoal.store.index_file.IndexFile`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable

from shoal.formats import limits
from shoal.formats.compiled import compiled_module
from shoal.formats.java_hash import index_key_hash

HEADER = struct.Struct(">qqqqii")
assert HEADER.size == limits.INDEX_HEADER_SIZE_BYTES
SLOT = struct.Struct(">i")
assert SLOT.size == limits.INDEX_HASH_SLOT_SIZE_BYTES
ENTRY = struct.Struct(">iqii")
assert ENTRY.size == limits.INDEX_ENTRY_SIZE_BYTES


def python_index_put(
    buffer: bytearray | memoryview, hash_slots: int, index_count: int, key: str, physical_offset: int, time_diff: int
) -> int:
    """Write entry `index_count` for `key` (its hash, `physical_offset`, `time_diff`, the bucket's
    previous newest entry) and point the key's slot at it; returns that previous entry number, 0
    when the slot was empty (or held a number that cannot be an entry yet: damage, read as empty).
    The caller keeps the header. The reference for the compiled `index_put` (`_record_speedups.c`)."""
    key_hash = index_key_hash(key)
    slot_position = limits.INDEX_HEADER_SIZE_BYTES + (key_hash % hash_slots) * SLOT.size
    previous = SLOT.unpack_from(buffer, slot_position)[0]
    if previous <= 0 or previous > index_count:
        previous = 0
    entry_position = limits.INDEX_HEADER_SIZE_BYTES + hash_slots * SLOT.size + index_count * ENTRY.size
    ENTRY.pack_into(buffer, entry_position, key_hash, physical_offset, time_diff, previous)
    SLOT.pack_into(buffer, slot_position, index_count)
    return int(previous)


UniqueKeyEntry = tuple[str, str, int, int]
"""(topic, key, CommitLog offset, store timestamp): a message whose only key is its unique one."""

_INT_MAX = 2**31 - 1


def time_diff_of(store_timestamp: int, begin_timestamp: int) -> int:
    """An entry's timeDiff: whole seconds since the file's first key (0 before it or without one),
    capped to an int."""
    if begin_timestamp <= 0:
        return 0
    return min(max((store_timestamp - begin_timestamp) // 1000, 0), _INT_MAX)


def python_index_put_unique_keys(
    buffer: bytearray | memoryview,
    hash_slots: int,
    entries_max: int,
    index_count: int,
    begin_physical_offset: int,
    begin_timestamp: int,
    entries: list[UniqueKeyEntry],
    start: int,
) -> tuple[int, int, int, int, int]:
    """`python_index_put` of "topic#key" for each of `entries[start:]` in order, until the file
    holds `entries_max` entries; the first entry of a file sets its begin offset and time, and
    timeDiff counts whole seconds from that time (0 before it). Returns (position of the first
    entry not written, index count, slots that were empty, begin offset, begin time). The
    reference for the compiled `index_put_unique_keys` (`_record_speedups.c`)."""
    if not isinstance(entries, list):
        raise TypeError("index_put_unique_keys' entries is a list")
    if limits.INDEX_HEADER_SIZE_BYTES + hash_slots * SLOT.size + entries_max * ENTRY.size > len(buffer):
        raise ValueError("index_put_unique_keys: the entries are outside the buffer")
    position = start
    new_slots = 0
    while position < len(entries) and index_count < entries_max:
        topic, key, physical_offset, store_timestamp = entries[position]
        time_diff = time_diff_of(store_timestamp, begin_timestamp)
        if python_index_put(buffer, hash_slots, index_count, f"{topic}#{key}", physical_offset, time_diff) == 0:
            new_slots += 1
        if index_count <= 1:
            begin_physical_offset, begin_timestamp = physical_offset, store_timestamp
        index_count += 1
        position += 1
    return position, index_count, new_slots, begin_physical_offset, begin_timestamp


def python_index_relink(
    buffer: bytearray | memoryview, hash_slots: int, index_count: int, begin_offset: int
) -> tuple[int, int, int, int]:
    """Rebuild an IndexFile's slots from entries 1..index_count-1 (each slot pointing at the newest
    entry of its bucket), up to the first entry that cannot follow the one before it: a CommitLog
    offset going backwards (from `begin_offset`), a negative timeDiff or keyHash. Returns (entries
    kept including the unused entry 0, slots used, last kept offset, last kept timeDiff). Entries
    link only to earlier ones, so the kept entries are whole chains. The reference for the
    compiled `index_relink` (`_record_speedups.c`)."""
    slots_at = limits.INDEX_HEADER_SIZE_BYTES
    entries_at = slots_at + hash_slots * SLOT.size
    if hash_slots < 1 or index_count < 1 or entries_at + index_count * ENTRY.size > len(buffer):
        raise ValueError("index_relink: the entries are outside the buffer")
    buffer[slots_at:entries_at] = bytes(entries_at - slots_at)
    used_slots = 0
    last_offset, last_time_diff = begin_offset, 0
    kept = 1
    entries = memoryview(buffer)[entries_at + ENTRY.size : entries_at + index_count * ENTRY.size]
    for number, (key_hash, offset, time_diff, _previous) in enumerate(ENTRY.iter_unpack(entries), start=1):
        if offset < last_offset or time_diff < 0 or key_hash < 0:
            break
        slot_position = slots_at + (key_hash % hash_slots) * SLOT.size
        if SLOT.unpack_from(buffer, slot_position)[0] == 0:
            used_slots += 1
        SLOT.pack_into(buffer, slot_position, number)
        last_offset, last_time_diff = offset, time_diff
        kept = number + 1
    entries.release()
    return kept, used_slots, last_offset, last_time_diff


_compiled = compiled_module("shoal.formats._record_speedups")
index_relink: Callable[[bytearray | memoryview, int, int, int], tuple[int, int, int, int]] = (
    python_index_relink if _compiled is None else _compiled.index_relink
)
"""`python_index_relink`, compiled when built."""
index_put_unique_keys: Callable[
    [bytearray | memoryview, int, int, int, int, int, list[UniqueKeyEntry], int], tuple[int, int, int, int, int]
] = python_index_put_unique_keys if _compiled is None else _compiled.index_put_unique_keys
"""`python_index_put_unique_keys`, compiled when built."""
index_put: Callable[[bytearray | memoryview, int, int, str, int, int], int] = (
    python_index_put if _compiled is None else _compiled.index_put
)
"""`python_index_put`, compiled when built."""


def index_file_name(epoch_ms: int) -> str:
    """`UtilAll.timeMillisToHumanString` in the local time zone."""
    seconds, millis = divmod(epoch_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{millis:03d}"
