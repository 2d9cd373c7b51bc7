"""Tests of shoal.store.message: what the store refuses before it encodes a record."""

from __future__ import annotations

import pytest

from shoal.store.errors import MessageIllegalError, PropertiesTooLargeError
from shoal.store.message import validate_message


def test_validate_message_accepts_the_limits_exactly() -> None:
    """A 127-byte topic, a body of exactly the max and 32767 bytes of properties pass."""
    validate_message(b"t" * 127, 1024, 32767, body_max_bytes=1024)


@pytest.mark.parametrize("topic", [b"", b"t" * 128])
def test_validate_message_refuses_empty_or_long_topics(topic: bytes) -> None:
    """Topics must be 1..127 bytes (TOPICLENGTH is a signed byte): MessageIllegalError."""
    with pytest.raises(MessageIllegalError, match="topic"):
        validate_message(topic, 0, 0, body_max_bytes=1024)


def test_validate_message_refuses_a_body_above_max_message_size() -> None:
    """A body one byte over maxMessageSize raises MessageIllegalError naming maxMessageSize."""
    with pytest.raises(MessageIllegalError, match="maxMessageSize=1024"):
        validate_message(b"t", 1025, 0, body_max_bytes=1024)


def test_validate_message_refuses_properties_above_32767_bytes() -> None:
    """Properties of 32768 bytes raise PropertiesTooLargeError (a MessageIllegalError)."""
    with pytest.raises(PropertiesTooLargeError):
        validate_message(b"t", 0, 32768, body_max_bytes=1024)
