"""Java's `String.hashCode`, which RocketMQ stores in ConsumeQueue tagsCode and IndexFile keys.

`h = 31*h + c` over UTF-16 code units with 32-bit overflow, read back as a signed int
(spec §16 gotchas 1-2). Python's `hash()` is unrelated.
"""

from __future__ import annotations

from functools import lru_cache

_MASK_32 = 0xFFFFFFFF
_INT_MIN = -(2**31)
_TAG_CACHE_SIZE = 4096  # tags repeat; hashing each message's tag again is wasted work


def java_string_hash(text: str) -> int:
    """Java `String.hashCode()` of `text` as a signed 32-bit int."""
    h = 0
    if text.isascii():
        for code in text.encode("ascii"):
            h = (31 * h + code) & _MASK_32
    else:
        units = text.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK_32
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


@lru_cache(maxsize=_TAG_CACHE_SIZE)
def tags_code(tags: str | None) -> int:
    """ConsumeQueue tagsCode of a TAGS property: its hash widened to a long; 0 when absent."""
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key: str) -> int:
    """IndexFile key hash: `Math.abs(hashCode)`, with Integer.MIN_VALUE mapped to 0 as RocketMQ does."""
    h = java_string_hash(key)
    if h == _INT_MIN:
        return 0
    return -h if h < 0 else h
