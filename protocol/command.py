"""`RemotingCommand`: one request or response of the remoting protocol, independent of encoding.

The fields are RocketMQ's header model (spec §8.2). Custom headers live in `ext_fields` as
strings (see `shoal.protocol.headers` for typed views); the body is raw bytes. A command carries
the serialize type it arrived in, and `make_response` answers in the same one (spec §8.2, gotcha
12): the C++ client understands only JSON and never sends anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shoal.protocol.codes import CURRENT_VERSION, CommandFlag, LanguageCode, SerializeType
from shoal.protocol.limits import REMARK_SIZE_MAX_BYTES

_RESPONSE_BIT: int = CommandFlag.RESPONSE.value
_ONEWAY_BIT: int = CommandFlag.ONEWAY.value
"""The flag bits as plain ints: `int & IntFlag` runs enum code (about 1 us), and every command
received and every reply asks one of them."""

DEFAULT_LANGUAGE = LanguageCode.JAVA
"""Shoal speaks as a Java 4.9.7 node: peers gate behaviour on (language, version) pairs they know."""


@dataclass(slots=True)
class RemotingCommand:
    """A request (flag bit 0 clear) or response (bit 0 set), matched to each other by `opaque`.

    `body` is None when the frame has none; a decoded body is a read-only memoryview into the
    received bytes (call `bytes()` on it to keep it apart from the receive buffer).
    """

    code: int
    language: LanguageCode = DEFAULT_LANGUAGE
    version: int = CURRENT_VERSION
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes | memoryview | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True for a response (RPC_TYPE bit set)."""
        return self.flag & _RESPONSE_BIT != 0

    @property
    def is_oneway(self) -> bool:
        """True for a request that must not be answered (RPC_ONEWAY bit set)."""
        return self.flag & _ONEWAY_BIT != 0

    @property
    def body_size_bytes(self) -> int:
        """Length of the body in bytes (0 without one)."""
        body = self.body
        if body is None:
            return 0
        return body.nbytes if isinstance(body, memoryview) else len(body)


def make_request(
    code: int,
    *,
    opaque: int,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes | memoryview | None = None,
    oneway: bool = False,
    remark: str | None = None,
    serialize_type: SerializeType = SerializeType.JSON,
    language: LanguageCode = DEFAULT_LANGUAGE,
    version: int = CURRENT_VERSION,
) -> RemotingCommand:
    """A request with the given code; `opaque` is the caller's request id, echoed in the reply."""
    return RemotingCommand(
        code=code,
        language=language,
        version=version,
        opaque=opaque,
        flag=_ONEWAY_BIT if oneway else 0,
        remark=remark,
        ext_fields=dict(ext_fields) if ext_fields else {},
        body=body,
        serialize_type=serialize_type,
    )


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    *,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes | memoryview | None = None,
) -> RemotingCommand:
    """The response to `request`: same opaque and serialize type, RPC_TYPE set.

    A remark longer than REMARK_SIZE_MAX_BYTES is clipped (it is an error text, and a response
    that cannot be encoded would leave the client waiting).
    """
    return RemotingCommand(
        code=code,
        opaque=request.opaque,
        flag=_RESPONSE_BIT,
        remark=clip_remark(remark),
        ext_fields=dict(ext_fields) if ext_fields else {},
        body=body,
        serialize_type=request.serialize_type,
    )


def clip_remark(remark: str | None) -> str | None:
    """`remark` cut to at most REMARK_SIZE_MAX_BYTES of UTF-8, on a character boundary."""
    if remark is None or len(remark) * 4 <= REMARK_SIZE_MAX_BYTES:
        return remark  # even all-4-byte characters fit
    encoded = remark.encode("utf-8", "surrogatepass")
    if len(encoded) <= REMARK_SIZE_MAX_BYTES:
        return remark
    return encoded[:REMARK_SIZE_MAX_BYTES].decode("utf-8", "ignore")
