"""Frames on the wire <-> `RemotingCommand`, both header encodings, and an incremental decoder.

Frame (spec §8.1), all integers big-endian:

    offset  size        field
    0       4           L: frame length, NOT counting these 4 bytes (= 4 + headerLen + bodyLen)
    4       4           (serializeType << 24) | headerLen   (type 0 = JSON, 1 = ROCKETMQ)
    8       headerLen   header, in the encoding named by the serialize type
    8+hl    L-4-hl      body (absent when empty)

Java closes the connection when L + 4 > FRAME_SIZE_MAX_BYTES (16 MiB); so does `FrameDecoder`,
as soon as it has seen the 4 bytes of L and before it buffers anything of the frame.

ROCKETMQ binary header (spec §8.4, `RocketMQSerializable`):

    offset  size        field
    0       2           code (short)
    2       1           language (byte, LanguageCode)
    3       2           version (short)
    5       4           opaque (int)
    9       4           flag (int)
    13      4           remarkLength (int; 0 = no remark)
    17      remarkLen   remark, UTF-8
    17+rl   4           extFieldsLength (int; total bytes of the map that follows, 0 = none)
    21+rl   ...         entries: short keyLength, key UTF-8, int valueLength, value UTF-8

A zero-length remark, key or value decodes to null, as in Java: a remark becomes None and an
entry with an empty key or value is dropped, so empty strings do not survive a round trip (and
are not written). The JSON header is fastjson's compact bean form, fields in alphabetical order,
null remark omitted; `extFields` is always written (possibly `{}`): clients dereference it
without a null check (spec gotcha 11, real-clients.md §0.6).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from json.encoder import encode_basestring

from shoal.formats.compiled import compiled_module
from shoal.formats.json_compat import JsonKey, JsonValue, parse_decimal
from shoal.protocol.codes import LanguageCode, SerializeType
from shoal.protocol.command import RemotingCommand
from shoal.protocol.errors import (
    BodyFormatError,
    EncodeError,
    FrameError,
    FrameTooLargeError,
    MalformedFrameError,
)
from shoal.protocol.json_compat import ext_value_to_str, loads, normalize_ext_fields
from shoal.protocol.limits import (
    EXT_FIELD_KEY_SIZE_MAX_BYTES,
    EXT_FIELDS_MAX_COUNT,
    FRAME_LENGTH_MIN_BYTES,
    FRAME_PREFIX_SIZE_BYTES,
    FRAME_SIZE_MAX_BYTES,
    HEADER_LENGTH_FIELD_MAX_BYTES,
    HEADER_LENGTH_FIELD_SIZE_BYTES,
    HEADER_SIZE_MAX_BYTES,
    INT_MAX,
    INT_MIN,
    LENGTH_FIELD_SIZE_BYTES,
    REMARK_SIZE_MAX_BYTES,
    SHORT_MAX,
    SHORT_MIN,
)

_LENGTH = struct.Struct(">i")  # L, a signed Java int
_HEADER_WORD = struct.Struct(">I")  # (serializeType << 24) | headerLen
_PREFIX = struct.Struct(">iI")  # both of the above
assert _PREFIX.size == FRAME_PREFIX_SIZE_BYTES

_BINARY_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLength
assert _BINARY_FIXED.size == 17
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_BINARY_HEADER_MIN_BYTES = _BINARY_FIXED.size + _INT.size  # fixed part + extFieldsLength
_EXT_ENTRY_MIN_BYTES = _SHORT.size + _INT.size

_compiled = compiled_module("shoal.protocol._wire_speedups")
COMPILED = _compiled is not None
"""Whether JSON headers in their usual form are read by the compiled reader."""
_LANGUAGES = tuple(LanguageCode)
_LANGUAGE_OF_NAME = {member.name: member for member in LanguageCode}
_FRAMES_CONTEXT = (
    RemotingCommand,
    _LANGUAGE_OF_NAME,
    LanguageCode.JAVA,
    LanguageCode.OTHER,
    SerializeType.JSON,
    FRAME_SIZE_MAX_BYTES,
    HEADER_SIZE_MAX_BYTES,
    REMARK_SIZE_MAX_BYTES // 4,
)
"""What `_wire_speedups.decode_frames` needs besides the bytes: how to make a command, and the
limits past which it leaves a frame to `_decode_payload` (a remark of more than a quarter of the
limit in characters may be over it in UTF-8 bytes)."""
_LANGUAGE_NAMES = {member: member.name for member in LanguageCode}
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # \uD800-\uDFFF: surrogates, paired or not
_quote = encode_basestring  # a JSON string literal; non-ASCII kept, control characters escaped
# fastjson's compact RemotingCommand bean: fields alphabetical; %s after opaque is the remark, if any.
_JSON_HEADER_TEMPLATE = (
    '{"code":%d,"extFields":{%s},"flag":%d,"language":"%s","opaque":%d%s,"serializeTypeCurrentRPC":"JSON","version":%d}'
)


# --- JSON header (spec §8.3) ---


def encode_json_header(command: RemotingCommand) -> bytes:
    """The compact JSON header (fields alphabetical, null remark omitted), UTF-8. Written by the
    compiled writer (`_wire_speedups.c`) where built; `python_encode_json_header` is the
    reference, and writes what the compiled one declines (a key or value that is not a str or
    not encodable), naming the problem."""
    if _compiled is not None and type(command.ext_fields) is dict:
        _check_int_fields(command)
        if len(command.ext_fields) > EXT_FIELDS_MAX_COUNT:
            _checked_ext_fields(command)
        encoded: bytes | None = _compiled.encode_json_header(
            command.code,
            command.ext_fields,
            command.flag,
            _LANGUAGE_NAMES[command.language],
            command.opaque,
            command.remark,
            command.version,
        )
        if encoded is not None:
            return encoded
    return python_encode_json_header(command)


def python_encode_json_header(command: RemotingCommand) -> bytes:
    """`encode_json_header` in Python.

    Written from a template rather than `json.dumps` of a dict: the header is a fixed bean and
    only strings need escaping, which `encode_basestring` (C) does; this halves the cost.
    """
    _check_int_fields(command)
    ext_fields = command.ext_fields
    if len(ext_fields) > EXT_FIELDS_MAX_COUNT:
        _checked_ext_fields(command)
    try:
        ext_text = ",".join([_quote(key) + ":" + _quote(value) for key, value in ext_fields.items()])
    except TypeError:
        _checked_ext_fields(command)  # names the offending entry
        raise
    remark = command.remark
    remark_text = "" if remark is None else ',"remark":' + _quote(remark)
    text = _JSON_HEADER_TEMPLATE % (
        command.code,
        ext_text,
        command.flag,
        _LANGUAGE_NAMES[command.language],
        command.opaque,
        remark_text,
        command.version,
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise EncodeError(f"header text is not encodable as UTF-8: {error}") from None


def decode_json_header(header: memoryview | bytes) -> RemotingCommand:
    """A command (without body) from a JSON header; tolerant of numbers where strings belong.
    The compiled reader (`_wire_speedups.c`) takes the usual form; the rest goes to
    `python_decode_json_header`, the reference, which decides and names what is wrong."""
    if _compiled is not None:
        fields = _compiled.decode_json_header(header)
        if fields is not None:
            code, language, version, opaque, flag, remark, ext_fields = fields
            if remark is not None and len(remark) > REMARK_SIZE_MAX_BYTES // 4:
                _check_remark_size(len(remark.encode("utf-8")))
            return RemotingCommand(
                code,
                LanguageCode.JAVA if language is None else _LANGUAGE_OF_NAME.get(language, LanguageCode.OTHER),
                version,
                opaque,
                flag,
                remark,
                ext_fields,
                None,
                SerializeType.JSON,
            )
    return python_decode_json_header(header)


def python_decode_json_header(header: memoryview | bytes) -> RemotingCommand:
    """`decode_json_header` in Python: every header, fastjson's quirks included."""
    try:
        fields = loads(header)
    except BodyFormatError as error:
        raise MalformedFrameError(f"bad JSON header: {error}") from None
    if not isinstance(fields, dict):
        raise MalformedFrameError(f"bad JSON header: a {type(fields).__name__}, not an object")
    if "code" not in fields:
        raise MalformedFrameError("bad JSON header: no 'code' field")
    remark = fields.get("remark")
    if remark is not None:
        try:
            remark = ext_value_to_str(remark)
        except TypeError:
            raise MalformedFrameError("bad JSON header: 'remark' is not a string") from None
        if remark is not None and len(remark) > REMARK_SIZE_MAX_BYTES // 4:
            _check_remark_size(len(remark.encode("utf-8", "surrogatepass")))
    ext_fields = normalize_ext_fields(fields.get("extFields"))
    if _SURROGATE_ESCAPE.search(header) is not None:
        _check_no_lone_surrogates(remark, ext_fields)
    return RemotingCommand(
        code=_json_int(fields, "code"),
        language=_json_language(fields.get("language")),
        version=_json_int(fields, "version"),
        opaque=_json_int(fields, "opaque"),
        flag=_json_int(fields, "flag"),
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=SerializeType.JSON,
    )


def _check_no_lone_surrogates(remark: str | None, ext_fields: dict[str, str]) -> None:
    """JSON may escape half a surrogate pair (`\\ud800`); such text could never be re-encoded."""
    for text in (remark or "", *ext_fields, *ext_fields.values()):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedFrameError(f"bad JSON header: lone surrogate escape in {text[:40]!r}") from None


def _json_int(fields: dict[JsonKey, JsonValue], name: str) -> int:
    value = fields.get(name)
    if type(value) is int and INT_MIN <= value <= INT_MAX:
        return value
    if value is None:
        return 0  # Java's bean default
    if type(value) is int:
        number: int | None = value
    elif isinstance(value, str):
        number = parse_decimal(value)  # fastjson reads "10" into an int field
    else:
        number = None
    if number is None or not INT_MIN <= number <= INT_MAX:
        raise MalformedFrameError(f"bad JSON header: {name!r} is {value!r:.40}, not a Java int")
    return number


def _json_language(value: object) -> LanguageCode:
    """A name (Java, C++, Go clients) or an ordinal (fastjson accepts both); unknown -> OTHER."""
    if value is None:
        return LanguageCode.JAVA  # RemotingCommand's field initializer
    if isinstance(value, str):
        return _LANGUAGE_OF_NAME.get(value, LanguageCode.OTHER)
    if type(value) is int and 0 <= value < len(_LANGUAGES):
        return _LANGUAGES[value]
    return LanguageCode.OTHER


# --- ROCKETMQ binary header (spec §8.4) ---


def encode_binary_header(command: RemotingCommand) -> bytes:
    """The ROCKETMQ binary header; code and version must fit a Java short."""
    _check_int_fields(command)
    for name, number in (("code", command.code), ("version", command.version)):
        if not SHORT_MIN <= number <= SHORT_MAX:
            raise EncodeError(f"{name} {number} does not fit the short of a ROCKETMQ binary header")
    ext_fields = _checked_ext_fields(command)
    try:
        remark = command.remark.encode("utf-8") if command.remark else b""
        entries = [
            _SHORT.pack(len(key_bytes)) + key_bytes + _INT.pack(len(value_bytes)) + value_bytes
            for key_bytes, value_bytes in [(key.encode(), value.encode()) for key, value in ext_fields.items()]
            if key_bytes and value_bytes  # an empty string would decode to null and be dropped anyway
        ]
    except UnicodeEncodeError as error:
        raise EncodeError(f"header text is not encodable as UTF-8: {error}") from None
    except struct.error:
        raise EncodeError(f"an extFields key is longer than {EXT_FIELD_KEY_SIZE_MAX_BYTES} bytes") from None
    ext_map = b"".join(entries)
    fixed = _BINARY_FIXED.pack(
        command.code, command.language, command.version, command.opaque, command.flag, len(remark)
    )
    return b"".join((fixed, remark, _INT.pack(len(ext_map)), ext_map))


def decode_binary_header(header: memoryview | bytes) -> RemotingCommand:
    """A command (without body) from a ROCKETMQ binary header; every length is bounds-checked."""
    size = len(header) if isinstance(header, bytes) else header.nbytes
    if size < _BINARY_HEADER_MIN_BYTES:
        raise MalformedFrameError(
            f"bad ROCKETMQ header: {size} bytes, shorter than the {_BINARY_HEADER_MIN_BYTES}-byte minimum"
        )
    code, language, version, opaque, flag, remark_size = _BINARY_FIXED.unpack_from(header, 0)
    position = _BINARY_FIXED.size
    if not 0 <= remark_size <= size - position - _INT.size:
        raise MalformedFrameError(
            f"bad ROCKETMQ header: remark length {remark_size} does not fit the "
            f"{size - position - _INT.size} bytes left in a {size}-byte header"
        )
    _check_remark_size(remark_size)
    remark = _utf8(header[position : position + remark_size], "remark") if remark_size else None
    position += remark_size
    (ext_size,) = _INT.unpack_from(header, position)
    position += _INT.size
    if ext_size != size - position:
        raise MalformedFrameError(
            f"bad ROCKETMQ header: extFields length {ext_size} but {size - position} bytes follow it"
        )
    return RemotingCommand(
        code=code,
        language=_LANGUAGES[language] if 0 <= language < len(_LANGUAGES) else LanguageCode.OTHER,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=_decode_ext_map(header, position, size) if ext_size else {},
        serialize_type=SerializeType.ROCKETMQ,
    )


def _decode_ext_map(header: memoryview | bytes, position: int, end: int) -> dict[str, str]:
    """The extFields entries between `position` and `end` (the end of the header)."""
    data = bytes(header)  # one small copy; slicing and decoding bytes is faster than views
    fields: dict[str, str] = {}
    unpack_short, unpack_int = _SHORT.unpack_from, _INT.unpack_from
    count = 0
    try:
        while position < end:
            count += 1
            if count > EXT_FIELDS_MAX_COUNT or end - position < _EXT_ENTRY_MIN_BYTES:
                _ext_entry_error(count, position, end, "is cut off")
            key_size = unpack_short(data, position)[0]
            key_end = position + 2 + key_size
            if key_size < 0 or key_end + 4 > end:
                _ext_entry_error(count, position, end, f"has a key length of {key_size}")
            value_size = unpack_int(data, key_end)[0]
            value_end = key_end + 4 + value_size
            if value_size < 0 or value_end > end:
                _ext_entry_error(count, position, end, f"has a value length of {value_size}")
            if key_size and value_size:  # a zero-length string is Java's null
                fields[data[position + 2 : key_end].decode()] = data[key_end + 4 : value_end].decode()
            position = value_end
    except UnicodeDecodeError as error:
        raise MalformedFrameError(f"bad ROCKETMQ header: extFields entry {count} is not UTF-8: {error}") from None
    return fields


def _ext_entry_error(count: int, position: int, end: int, what: str) -> None:
    if count > EXT_FIELDS_MAX_COUNT:
        raise MalformedFrameError(f"bad ROCKETMQ header: more than {EXT_FIELDS_MAX_COUNT} extFields")
    raise MalformedFrameError(
        f"bad ROCKETMQ header: extFields entry {count} at byte {position} {what}, "
        f"which does not fit the {end - position} bytes left"
    )


def _utf8(data: memoryview | bytes, what: str) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as error:
        raise MalformedFrameError(f"bad ROCKETMQ header: {what} is not valid UTF-8: {error}") from None


# --- shared checks ---


def _check_int_fields(command: RemotingCommand) -> None:
    code, version, opaque, flag = command.code, command.version, command.opaque, command.flag
    if (
        INT_MIN <= code <= INT_MAX
        and INT_MIN <= version <= INT_MAX
        and INT_MIN <= opaque <= INT_MAX
        and (INT_MIN <= flag <= INT_MAX)
    ):
        return
    for name, value in (("code", code), ("version", version), ("opaque", opaque), ("flag", flag)):
        if not INT_MIN <= value <= INT_MAX:
            raise EncodeError(f"{name} {value} does not fit a Java int")


def _checked_ext_fields(command: RemotingCommand) -> dict[str, str]:
    ext_fields = command.ext_fields
    if len(ext_fields) > EXT_FIELDS_MAX_COUNT:
        raise EncodeError(f"{len(ext_fields)} extFields, more than the limit of {EXT_FIELDS_MAX_COUNT}")
    for key, value in ext_fields.items():
        if type(value) is not str or type(key) is not str:
            raise EncodeError(f"extFields[{key!r}] = {value!r:.40}: keys and values must be str")
    return ext_fields


def _check_remark_size(size: int) -> None:
    if size > REMARK_SIZE_MAX_BYTES:
        raise MalformedFrameError(f"remark of {size} bytes exceeds the limit of {REMARK_SIZE_MAX_BYTES}")


# --- frames ---


def encode_header(command: RemotingCommand) -> bytes:
    """The header in the command's serialize type."""
    if command.serialize_type == SerializeType.ROCKETMQ:
        return encode_binary_header(command)
    return encode_json_header(command)


def encode_frame(command: RemotingCommand) -> list[bytes | memoryview]:
    """The frame as parts for `writelines`: prefix + header, then the body itself (not copied)."""
    header = encode_header(command)
    header_size = len(header)
    if header_size > HEADER_SIZE_MAX_BYTES:
        raise EncodeError(f"header of {header_size} bytes exceeds the limit of {HEADER_SIZE_MAX_BYTES}")
    body = command.body
    body_size = command.body_size_bytes
    frame_length = HEADER_LENGTH_FIELD_SIZE_BYTES + header_size + body_size
    if LENGTH_FIELD_SIZE_BYTES + frame_length > FRAME_SIZE_MAX_BYTES:
        raise EncodeError(
            f"frame of {LENGTH_FIELD_SIZE_BYTES + frame_length} bytes exceeds the limit of "
            f"{FRAME_SIZE_MAX_BYTES} (body {body_size} bytes)"
        )
    first = _PREFIX.pack(frame_length, (int(command.serialize_type) << 24) | header_size) + header
    if body is None or body_size == 0:
        return [first]
    return [first, body]


def encode_frame_with_body_parts(
    command: RemotingCommand, body_parts: Sequence[bytes | memoryview]
) -> list[bytes | memoryview]:
    """A frame whose body is the concatenation of `body_parts` (e.g. CommitLog records for a pull),
    as gather-write parts: prefix + header, then the parts themselves, none of them copied.
    `command.body` is ignored."""
    header = encode_header(command)
    header_size = len(header)
    if header_size > HEADER_SIZE_MAX_BYTES:
        raise EncodeError(f"header of {header_size} bytes exceeds the limit of {HEADER_SIZE_MAX_BYTES}")
    body_size = sum(part.nbytes if isinstance(part, memoryview) else len(part) for part in body_parts)
    frame_length = HEADER_LENGTH_FIELD_SIZE_BYTES + header_size + body_size
    if LENGTH_FIELD_SIZE_BYTES + frame_length > FRAME_SIZE_MAX_BYTES:
        raise EncodeError(
            f"frame of {LENGTH_FIELD_SIZE_BYTES + frame_length} bytes exceeds the limit of "
            f"{FRAME_SIZE_MAX_BYTES} (body {body_size} bytes)"
        )
    first = _PREFIX.pack(frame_length, (int(command.serialize_type) << 24) | header_size) + header
    return [first, *body_parts]


def encode_frame_bytes(command: RemotingCommand) -> bytes:
    """The whole frame as one bytes object (copies the body; for tests and small frames)."""
    return b"".join(encode_frame(command))


def decode_frame(frame: bytes) -> RemotingCommand:
    """One complete frame, length field included, and nothing after it."""
    size = len(frame)
    if size < LENGTH_FIELD_SIZE_BYTES:
        raise MalformedFrameError(f"truncated frame: {size} bytes, not even the 4-byte length")
    frame_length = _checked_frame_length(_LENGTH.unpack_from(frame, 0)[0])
    expected = LENGTH_FIELD_SIZE_BYTES + frame_length
    if size < expected:
        raise MalformedFrameError(f"truncated frame: {size} of {expected} bytes")
    if size > expected:
        raise MalformedFrameError(f"{size - expected} bytes after a frame of {expected} bytes")
    return _decode_payload(memoryview(frame)[LENGTH_FIELD_SIZE_BYTES:])


def _checked_frame_length(frame_length: int) -> int:
    """L, or FrameError when it is negative, too short for the header-length int, or too large."""
    if frame_length < 0:
        raise MalformedFrameError(f"negative frame length {frame_length}")
    if LENGTH_FIELD_SIZE_BYTES + frame_length > FRAME_SIZE_MAX_BYTES:
        raise FrameTooLargeError(f"frame length {frame_length} (+4) exceeds the limit of {FRAME_SIZE_MAX_BYTES} bytes")
    if frame_length < FRAME_LENGTH_MIN_BYTES:
        raise MalformedFrameError(
            f"frame length {frame_length} cannot hold the {FRAME_LENGTH_MIN_BYTES}-byte header-length field"
        )
    return frame_length


def _decode_payload(payload: memoryview) -> RemotingCommand:
    """A command from the L bytes after the length field; the body is a view into `payload`."""
    frame_length = payload.nbytes
    (word,) = _HEADER_WORD.unpack_from(payload, 0)
    serialize_type = word >> 24
    header_size = word & HEADER_LENGTH_FIELD_MAX_BYTES  # the low 24 bits
    room = frame_length - HEADER_LENGTH_FIELD_SIZE_BYTES
    if header_size > room:
        raise MalformedFrameError(
            f"header length {header_size} exceeds the {room} bytes left in a frame of length {frame_length}"
        )
    if header_size > HEADER_SIZE_MAX_BYTES:
        raise MalformedFrameError(f"header length {header_size} exceeds the limit of {HEADER_SIZE_MAX_BYTES} bytes")
    header_end = HEADER_LENGTH_FIELD_SIZE_BYTES + header_size
    header = payload[HEADER_LENGTH_FIELD_SIZE_BYTES:header_end]
    if serialize_type == SerializeType.JSON:
        command = decode_json_header(header)
    elif serialize_type == SerializeType.ROCKETMQ:
        command = decode_binary_header(header)
    else:
        raise MalformedFrameError(f"unknown serialize type {serialize_type} in header-length field 0x{word:08x}")
    if header_end < frame_length:
        command.body = payload[header_end:]
    return command


class FrameDecoder:
    """Incremental decoder: feed received bytes, get the commands completed so far.

    Partial frames are buffered; a frame is checked against FRAME_SIZE_MAX_BYTES as soon as its
    4-byte length is known, before any of it is buffered. Any `FrameError` is final: the
    decoder refuses further input and the caller closes the connection. Decoded bodies are
    read-only views into the fed bytes (or into a copy of a frame that spanned several feeds).
    """

    __slots__ = ("_buffer", "_failure", "_frame_size")

    def __init__(self) -> None:
        self._buffer = bytearray()  # the start of an incomplete frame
        self._frame_size = 0  # 4 + L of the buffered frame once its length is known, else 0
        self._failure: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes of an incomplete frame held until more data arrives."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """Decode every frame completed by `data`, in order; buffer the incomplete rest."""
        if self._failure is not None:
            raise MalformedFrameError(f"decoder already failed: {self._failure}")
        if type(data) is not bytes:
            data = bytes(data)  # bodies are views: never into a buffer the caller may reuse
        commands: list[RemotingCommand] = []
        try:
            position = self._complete_buffered(data, commands) if self._buffer else 0
            if position < len(data):
                self._decode_run(data, position, commands)
        except FrameError as error:
            error.decoded_before = tuple(commands)
            self._failure = error
            self._buffer = bytearray()
            self._frame_size = 0
            raise
        return commands

    def end_of_stream(self) -> None:
        """The peer closed the stream: MalformedFrameError if a frame was left incomplete."""
        if self._buffer and self._failure is None:
            expected = f"{self._frame_size} bytes" if self._frame_size else "a frame whose length is unknown"
            raise MalformedFrameError(
                f"truncated frame: the stream ended after {len(self._buffer)} bytes of {expected}"
            )

    def _complete_buffered(self, data: bytes, commands: list[RemotingCommand]) -> int:
        """Extend the buffered frame from `data`; return how many bytes of `data` it used."""
        buffer = self._buffer
        view = memoryview(data)
        position = 0
        if not self._frame_size:
            position = min(LENGTH_FIELD_SIZE_BYTES - len(buffer), len(data))
            buffer += view[:position]
            if len(buffer) < LENGTH_FIELD_SIZE_BYTES:
                return position
            frame_length = _checked_frame_length(_LENGTH.unpack_from(buffer, 0)[0])
            self._frame_size = LENGTH_FIELD_SIZE_BYTES + frame_length
        take = min(self._frame_size - len(buffer), len(data) - position)
        buffer += view[position : position + take]
        position += take
        if len(buffer) == self._frame_size:
            frame = bytes(buffer)
            buffer.clear()
            self._frame_size = 0
            commands.append(_decode_payload(memoryview(frame)[LENGTH_FIELD_SIZE_BYTES:]))
        return position

    def _decode_run(self, data: bytes, position: int, commands: list[RemotingCommand]) -> None:
        """Decode whole frames straight from `data` (no copies); buffer what is left. The compiled
        reader takes the run of usual frames; a frame it leaves is decoded (or refused) here."""
        view = memoryview(data)
        size = len(data)
        while size - position >= LENGTH_FIELD_SIZE_BYTES:
            if _compiled is not None:
                position = _compiled.decode_frames(data, view, position, commands, *_FRAMES_CONTEXT)
                if size - position < LENGTH_FIELD_SIZE_BYTES:
                    break
            frame_length = _checked_frame_length(_LENGTH.unpack_from(data, position)[0])
            end = position + LENGTH_FIELD_SIZE_BYTES + frame_length
            if end > size:
                self._frame_size = LENGTH_FIELD_SIZE_BYTES + frame_length
                break
            commands.append(_decode_payload(view[position + LENGTH_FIELD_SIZE_BYTES : end]))
            position = end
        if position < size:
            self._buffer += view[position:]
