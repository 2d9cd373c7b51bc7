"""The message property string (`MessageDecoder.messageProperties2String`, spec §1.6, §1.7).

Encoded as `name \\x01 value \\x02 ...` without the final `\\x02`, UTF-8, at most 32767 bytes.
Decoding drops segments that are too short, have an empty key or an empty value, as Java does.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.formats import limits
from shoal.formats.errors import PropertiesError, PropertiesTooLargeError

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

# Property keys (MessageConst), exact strings.
KEYS = "KEYS"
TAGS = "TAGS"
WAIT_STORE_MSG_OK = "WAIT"
DELAY_TIME_LEVEL = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
MSG_REGION = "MSG_REGION"
TRACE_SWITCH = "TRACE_ON"
UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
CLUSTER = "CLUSTER"
START_DELIVER_TIME = "__STARTDELIVERTIME"


def properties_to_string(properties: Mapping[str, str | None]) -> str:
    """`messageProperties2String`: None values are skipped; PropertiesError when a name or value
    is empty or holds a separator. The length is not checked (see `encode_properties`)."""
    parts = []
    for name, value in properties.items():
        if value is None:
            continue
        if not name or not value:
            raise PropertiesError(f"property {name!r} has an empty name or value")
        if _has_separator(name) or _has_separator(value):
            raise PropertiesError(f"property {name!r} contains a \\x01 or \\x02 separator")
        parts.append(f"{name}{NAME_VALUE_SEPARATOR}{value}")
    return PROPERTY_SEPARATOR.join(parts)


def encode_properties(properties: Mapping[str, str | None]) -> bytes:
    """The UTF-8 property string of a record; PropertiesError as `properties_to_string`,
    PropertiesTooLargeError above PROPERTIES_LENGTH_MAX_BYTES."""
    if not properties:
        return b""
    encoded = properties_to_string(properties).encode("utf-8")
    check_properties_length(len(encoded))
    return encoded


def check_properties_length(length_bytes: int) -> None:
    """PropertiesTooLargeError when PROPERTIESLENGTH (a signed short) cannot say `length_bytes`."""
    if length_bytes > limits.PROPERTIES_LENGTH_MAX_BYTES:
        raise PropertiesTooLargeError(
            f"properties are {length_bytes} bytes, more than {limits.PROPERTIES_LENGTH_MAX_BYTES}"
        )


def decode_properties(data: bytes | memoryview | str) -> dict[str, str]:
    """Decode a property string as Java does (invalid segments are dropped, later keys win)."""
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", errors="replace")
    result: dict[str, str] = {}
    if not text:
        return result
    for segment in text.split(PROPERTY_SEPARATOR):
        if len(segment) < 3:
            continue
        cut = segment.find(NAME_VALUE_SEPARATOR)
        if cut <= 0 or cut >= len(segment) - 1:
            continue
        result[segment[:cut]] = segment[cut + 1 :]
    return result


def find_property(data: bytes | memoryview, name: bytes) -> str | None:
    """One property's value as Java would read it (a repeated name: the last valid value wins);
    cheap when the name is absent, which is the common case."""
    raw = bytes(data)
    if name + b"\x01" not in raw:
        return None
    return decode_properties(raw).get(name.decode("utf-8"))


def message_keys(value: str | None) -> list[str]:
    """The business keys of a KEYS property (space separated, empty tokens skipped)."""
    if not value:
        return []
    return [key for key in value.split(KEY_SEPARATOR) if key]


def _has_separator(text: str) -> bool:
    return NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text
