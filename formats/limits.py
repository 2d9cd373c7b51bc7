"""Every bound RocketMQ's formats themselves set, with its unit; the asserts state how they relate.

These are properties of the bytes (a signed byte, a signed short, a fixed-size unit), not policies:
`shoal.store.limits`, `shoal.client.limits` and `shoal.spark.limits` take them from here and add
their own.
"""

from __future__ import annotations

# --- CommitLog records (spec §1.2, §1.6, §1.9) ---
TOPIC_LENGTH_MAX_BYTES = 127  # TOPICLENGTH is a signed byte in the V1 record
PROPERTIES_LENGTH_MAX_BYTES = 32767  # PROPERTIESLENGTH is a signed short
MESSAGE_BODY_SIZE_MAX_BYTES = 4 * 1024 * 1024  # maxMessageSize: the body alone
RECORD_FIXED_LENGTH_V4_BYTES = 91  # every byte of a V1 IPv4/IPv4 record that is not body, topic or properties
RECORD_SIZE_MAX_BYTES = (  # both hosts IPv6 (+24)
    RECORD_FIXED_LENGTH_V4_BYTES
    + 24
    + MESSAGE_BODY_SIZE_MAX_BYTES
    + TOPIC_LENGTH_MAX_BYTES
    + PROPERTIES_LENGTH_MAX_BYTES
)
END_FILE_MIN_BLANK_LENGTH_BYTES = 8  # a segment always keeps room for the blank record

# --- names (TopicValidator, Validators) ---
TOPIC_NAME_MAX_CHARS = 127  # TopicValidator.TOPIC_MAX_LENGTH; Java checks String.length()
GROUP_NAME_MAX_CHARS = 255  # Validators.CHARACTER_MAX_LENGTH (a 4.9.7 client's check)
SEGMENT_FILE_NAME_DIGITS = 20  # UtilAll.offset2FileName

# --- ConsumeQueue and IndexFile (spec §2, §3) ---
CONSUME_QUEUE_UNIT_SIZE_BYTES = 20
INDEX_HEADER_SIZE_BYTES = 40
INDEX_HASH_SLOT_SIZE_BYTES = 4
INDEX_ENTRY_SIZE_BYTES = 20
INDEX_HASH_SLOTS_DEFAULT = 5_000_000  # maxHashSlotNum: readers of a store written with defaults need it

# --- JSON (spec §7.1, §8.3) ---
LONG_MIN = -(2**63)  # Java long: offsets, timestamps
LONG_MAX = 2**63 - 1
DECIMAL_DIGITS_MAX_COUNT = 20  # "-9223372036854775808" is the longest Java long
JSON_NESTING_MAX_DEPTH = 128  # RocketMQ bodies nest < 10 deep; bounds the tolerant parser's recursion
JSON_INTEGER_DIGITS_MAX_COUNT = 4300  # CPython's int() refuses longer decimal strings anyway

assert TOPIC_LENGTH_MAX_BYTES < 2**7
assert PROPERTIES_LENGTH_MAX_BYTES < 2**15
assert TOPIC_NAME_MAX_CHARS == TOPIC_LENGTH_MAX_BYTES  # an ASCII topic name fills TOPICLENGTH exactly
assert len(str(LONG_MIN)) == DECIMAL_DIGITS_MAX_COUNT
assert JSON_NESTING_MAX_DEPTH < 500  # well inside CPython's default recursion limit of 1000
assert DECIMAL_DIGITS_MAX_COUNT < JSON_INTEGER_DIGITS_MAX_COUNT
