"""Tests of shoal.store.message: what the store refuses before it encodes a record."""

from __future__ import annotations

import pytest

from shoal.formats.record import record_length
from shoal.store.errors import MessageIllegalError, PropertiesTooLargeError
from shoal.store.message import validate_message


def test_validate_message_accepts_the_limits_exactly() -> None:
    """A 127-byte topic, 32767 bytes of properties and a record of exactly maxMessageSize pass."""
    size = record_length(1024, 127, 32767)
    validate_message(b"t" * 127, 1024, 32767, size_max_bytes=size)


@pytest.mark.parametrize("topic", [b"", b"t" * 128])
def test_validate_message_refuses_empty_or_long_topics(topic: bytes) -> None:
    """Topics must be 1..127 bytes (TOPICLENGTH is a signed byte): MessageIllegalError."""
    with pytest.raises(MessageIllegalError, match="topic"):
        validate_message(topic, 0, 0, size_max_bytes=1024)


def test_validate_message_refuses_a_record_above_max_message_size() -> None:
    """A record one byte over maxMessageSize raises MessageIllegalError naming maxMessageSize, though
    its body alone is under it (RocketMQ's doAppend compares the whole record); IPv6 hosts count."""
    size = record_length(1000, 1, 0)
    validate_message(b"t", 1000, 0, size_max_bytes=size)
    with pytest.raises(MessageIllegalError, match=f"maxMessageSize={size - 1}"):
        validate_message(b"t", 1000, 0, size_max_bytes=size - 1)
    with pytest.raises(MessageIllegalError, match=f"record is {size + 24} bytes"):
        validate_message(b"t", 1000, 0, size_max_bytes=size, hosts_bytes=40)


def test_validate_message_refuses_properties_above_32767_bytes() -> None:
    """Properties of 32768 bytes raise PropertiesTooLargeError (a MessageIllegalError)."""
    with pytest.raises(PropertiesTooLargeError):
        validate_message(b"t", 0, 32768, size_max_bytes=1024)
