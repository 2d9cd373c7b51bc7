"""Every bound the remoting codec enforces, with its unit, in one place.

RocketMQ's own limits are kept where they exist (`rocketmq-spec.md` §8.1, §8.4); the others are
ours and say why they are safe. The asserts at the bottom state how the limits relate, so a change
that breaks one fails at import.
"""

from __future__ import annotations

# Java long's range and decimal length and the JSON parser's nesting bound: shoal.formats.limits.

# --- framing (spec §8.1) ---
LENGTH_FIELD_SIZE_BYTES = 4  # the leading int L; L does not count itself
HEADER_LENGTH_FIELD_SIZE_BYTES = 4  # (serialize type << 24) | header length
FRAME_PREFIX_SIZE_BYTES = LENGTH_FIELD_SIZE_BYTES + HEADER_LENGTH_FIELD_SIZE_BYTES
FRAME_LENGTH_MIN_BYTES = HEADER_LENGTH_FIELD_SIZE_BYTES  # L must at least hold the header-length int
# com.rocketmq.remoting.frameMaxLength; Netty compares L + 4 against it, so this counts the prefix.
FRAME_SIZE_MAX_BYTES = 16 * 1024 * 1024
HEADER_LENGTH_FIELD_MAX_BYTES = 0xFFFFFF  # the low 24 bits of the header-length int

# --- headers (ours) ---
# The largest legitimate header is a send with a full property string: 32767 characters, each
# escaped to at most 6 bytes in JSON (\u0001), plus the other fields: about 200 KiB. Java has no
# limit besides the 24-bit field; 1 MiB keeps a hostile header from costing a 16 MiB JSON parse.
HEADER_SIZE_MAX_BYTES = 1024 * 1024
EXT_FIELDS_MAX_COUNT = 1024  # Java headers carry ~15 fields plus ACL/signature fields
EXT_FIELD_KEY_SIZE_MAX_BYTES = 0x7FFF  # the ROCKETMQ binary header writes a key length as a short
REMARK_SIZE_MAX_BYTES = 64 * 1024  # remarks are error texts; make_response clips longer ones

# --- binary header field ranges (spec §8.4) ---
SHORT_MIN = -(2**15)  # code and version are Java shorts in the ROCKETMQ binary header
SHORT_MAX = 2**15 - 1
INT_MIN = -(2**31)  # Java int: code, opaque, flag, header int fields
INT_MAX = 2**31 - 1

# --- JSON bodies (spec §8.9, gotcha 9) ---
# A compressed REGISTER_BROKER body holds ~80 bytes per topic; 64 MiB is ~800k topics and keeps a
# zlib bomb from inflating without bound.
INFLATED_BODY_SIZE_MAX_BYTES = 64 * 1024 * 1024

assert FRAME_PREFIX_SIZE_BYTES + HEADER_SIZE_MAX_BYTES <= FRAME_SIZE_MAX_BYTES
assert HEADER_SIZE_MAX_BYTES <= HEADER_LENGTH_FIELD_MAX_BYTES
assert REMARK_SIZE_MAX_BYTES < HEADER_SIZE_MAX_BYTES
assert EXT_FIELD_KEY_SIZE_MAX_BYTES < HEADER_SIZE_MAX_BYTES
assert FRAME_SIZE_MAX_BYTES - LENGTH_FIELD_SIZE_BYTES <= INT_MAX  # L fits the signed length int
assert INFLATED_BODY_SIZE_MAX_BYTES >= FRAME_SIZE_MAX_BYTES
