"""The codec's exception tree and the response codes expected failures map to.

    ProtocolError                 base of everything shoal.protocol raises
     +-- FrameError               the incoming byte stream cannot go on: close the connection
     |    +-- FrameTooLargeError  a length prefix announces more than FRAME_SIZE_MAX_BYTES
     |    +-- MalformedFrameError the bytes are not a frame: truncated at end of stream, bad
     |                            frame or header length, unknown serialize type, bad JSON
     |                            header, bad ROCKETMQ binary header, header over its limits
     +-- EncodeError              a command that cannot be put on the wire (a value out of range
     |                            for its binary field, a header or frame over its limit)
     +-- HeaderFieldError         a custom header field is missing or unparseable (-> SYSTEM_ERROR)
     +-- BodyFormatError          a JSON body is not (fastjson-tolerant) JSON or has the wrong
                                  shape (-> SYSTEM_ERROR)

A `FrameError` is fatal for the connection, as in Java (Netty closes the channel on a decode
error); `FrameDecoder` attaches the commands it decoded before the bad frame so a server may
still answer them. `HeaderFieldError` and `BodyFormatError` concern one request: the server
answers it with the code from `RESPONSE_CODE_OF_ERROR` and the error text as remark, like Java's
`RemotingCommandException` -> SYSTEM_ERROR. `EncodeError` is a bug on our side.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.protocol.codes import ResponseCode

if TYPE_CHECKING:
    from shoal.protocol.command import RemotingCommand


class ProtocolError(Exception):
    """Base of every error raised by shoal.protocol."""


class FrameError(ProtocolError):
    """The byte stream is broken; the connection must be closed.

    `decoded_before` holds the commands that the same `FrameDecoder.feed` call decoded before
    it met the bad frame (Netty also delivers those before it reports the error).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.decoded_before: tuple[RemotingCommand, ...] = ()


class FrameTooLargeError(FrameError):
    """A length prefix announces a frame larger than FRAME_SIZE_MAX_BYTES (or negative)."""


class MalformedFrameError(FrameError):
    """A frame (or the end of the stream) is not valid; the message says exactly why."""


class EncodeError(ProtocolError):
    """A command cannot be encoded: a value out of range or a size over its limit."""


class HeaderFieldError(ProtocolError):
    """A custom header field is missing or not parseable; `field` is its Java name."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class BodyFormatError(ProtocolError):
    """A JSON body cannot be parsed, or does not have the expected shape."""


RESPONSE_CODE_OF_ERROR: dict[type[ProtocolError], ResponseCode] = {
    HeaderFieldError: ResponseCode.SYSTEM_ERROR,
    BodyFormatError: ResponseCode.SYSTEM_ERROR,
}


def response_code_of_error(error: ProtocolError) -> ResponseCode | None:
    """The response code that answers a request failing with `error`; None: close instead."""
    for cls in type(error).__mro__:
        code = RESPONSE_CODE_OF_ERROR.get(cls)
        if code is not None:
            return code
    return None
