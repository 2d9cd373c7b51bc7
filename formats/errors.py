"""What the format codecs raise: plain `ValueError`s, so every caller can translate them at its
own boundary (the store into a PutStatus, the protocol into a ResponseCode, the client into
InvalidMessageError).

    ValueError
     +-- FormatError                 bytes or text that do not follow a RocketMQ format
          +-- PropertiesError        a property name or value the property string cannot hold
          |    +-- PropertiesTooLargeError   above PROPERTIES_LENGTH_MAX_BYTES
          +-- MessageIdError         not a 32/56 hex character message id
          +-- BatchBodyError         a SEND_BATCH_MESSAGE body whose blocks do not add up
          +-- JsonSyntaxError        not JSON, not even as fastjson writes it (line, column)
          +-- TraceDataError         a message trace record that TraceDataEncoder could not have written
          +-- JavaPropertiesError    .properties text Properties.load refuses, or a line without = or :
"""

from __future__ import annotations


class FormatError(ValueError):
    """Bytes or text that do not follow a RocketMQ format."""


class PropertiesError(FormatError):
    """A property name or value is empty or holds a \\x01 / \\x02 separator."""


class PropertiesTooLargeError(PropertiesError):
    """The encoded property string is longer than PROPERTIESLENGTH can say."""


class MessageIdError(FormatError):
    """A message id that is not hex, or not 32 (IPv4) / 56 (IPv6) characters."""


class BatchBodyError(FormatError):
    """A SEND_BATCH_MESSAGE body that is empty, too long, or whose block fields disagree."""


class JsonSyntaxError(FormatError):
    """A document that is not JSON; `line` and `column` (1-based) locate the first error, None for
    whole-document problems. `expected` says what the reader wanted there."""

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        expected: str | None = None,
    ) -> None:
        super().__init__(message)
        self.line = line
        self.column = column
        self.expected = expected


class TraceDataError(FormatError):
    """A trace record of a known type with too few fields, or a number field that is not a number."""


class JavaPropertiesError(FormatError):
    """`.properties` text with a malformed `\\uXXXX` escape, or a line without `=` or `:` where the
    caller requires one. The message is "line {line_number}: {line!r} {reason}"; `line_number`
    (1-based) and `line` (its natural lines as written) locate it, `reason` says what is wrong."""

    def __init__(self, *, line_number: int, line: str, reason: str) -> None:
        super().__init__(f"line {line_number}: {line!r} {reason}")
        self.line_number = line_number
        self.line = line
        self.reason = reason
