"""The compiled JSON header and frame readers (protocol/_wire_speedups.c) against the Python
reader: where the compiled one answers, it answers what the Python one does; where the Python one
refuses a header or a frame, the compiled one declines it (None, or stops before it), so the
Python error reaches the peer."""

from __future__ import annotations

import json
import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.protocol import RemotingCommand, framing
from shoal.protocol.codes import LanguageCode, SerializeType
from shoal.protocol.command import make_request
from shoal.protocol.errors import ProtocolError
from shoal.protocol.framing import FrameDecoder, encode_frame_bytes, encode_json_header, python_decode_json_header
from shoal.protocol.limits import FRAME_SIZE_MAX_BYTES, HEADER_SIZE_MAX_BYTES, REMARK_SIZE_MAX_BYTES

try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.protocol import _wire_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]
if COMPILED is None:
    pytestmark = pytest.mark.skipif(
        not os.environ.get("CI"),
        reason="shoal.protocol._wire_speedups was not built (no C compiler at install) and this is not CI; "
        "in CI this module's tests fail instead",
    )


def _python(header: bytes) -> RemotingCommand | ProtocolError:
    try:
        return python_decode_json_header(header)
    except ProtocolError as error:
        return error


def _compiled(header: bytes) -> RemotingCommand | None:
    """What `decode_json_header` makes of the compiled reader's answer (None: it declined)."""
    assert COMPILED is not None
    fields = COMPILED.decode_json_header(header)
    if fields is None:
        return None
    saved = framing._compiled
    framing._compiled = COMPILED
    try:
        return framing.decode_json_header(header)
    finally:
        framing._compiled = saved


def _agree(header: bytes) -> RemotingCommand | None:
    compiled = _compiled(header)
    python = _python(header)
    if compiled is None:
        return None
    assert not isinstance(python, ProtocolError), f"compiled took {header!r}, which Python refuses: {python}"
    assert compiled == python
    assert type(compiled.language) is type(python.language)
    return compiled


texts = st.text(max_size=40)
java_ints = st.integers(min_value=-(2**31), max_value=2**31 - 1)


@settings(max_examples=600, deadline=None)
@given(
    java_ints,
    java_ints,
    java_ints,
    java_ints,
    st.none() | texts,
    st.dictionaries(texts, texts, max_size=12),
    st.sampled_from(list(LanguageCode)),
)
def test_headers_as_written_are_read_alike(
    code: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext_fields: dict[str, str],
    language: LanguageCode,
) -> None:
    command = RemotingCommand(
        code=code, language=language, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext_fields
    )
    try:
        header = encode_json_header(command)
    except ProtocolError:
        return  # a lone surrogate in the text: not encodable, never sent
    decoded = _agree(header)
    if "\ud800" not in repr(ext_fields):
        assert decoded is not None, f"the compiled reader declined a header Shoal writes: {header!r}"


@settings(max_examples=600, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["code", "opaque", "flag", "version", "language", "remark", "extFields", "other", "x"]),
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**40), max_value=2**40)
        | st.floats(allow_nan=False)
        | texts
        | st.dictionaries(texts, st.none() | st.booleans() | st.integers() | texts | st.floats(allow_nan=False))
        | st.lists(st.integers(), max_size=3),
    ),
    st.booleans(),
)
def test_json_of_any_shape_is_read_alike_or_declined(fields: dict[str, object], ascii_only: bool) -> None:
    """Numbers where strings belong (the C++ client), nulls, floats, nested values, unknown keys."""
    _agree(json.dumps(fields, ensure_ascii=ascii_only).encode())


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_are_declined_or_read_alike(data: bytes) -> None:
    _agree(data)


@settings(max_examples=800, deadline=None)
@given(st.integers(min_value=0, max_value=300), st.binary(min_size=1, max_size=4))
def test_a_damaged_header_is_declined_or_read_alike(at: int, garbage: bytes) -> None:
    header = bytearray(
        encode_json_header(
            RemotingCommand(code=310, opaque=7, ext_fields={"a": "PID", "b": "Topic\u00e9", "i": "K\x01V\x02"})
        )
    )
    at = min(at, len(header))
    header[at : at + len(garbage)] = garbage
    _agree(bytes(header))


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":10,"extFields":{"queueId":3,"unitMode":false,"a":null,"n":-7},"language":"CPP","opaque":1}',
        b'{"code":10,"extFields":null,"flag":0}',
        b'  {"code" : 10 , "version":null, "language":null, "remark":null}  ',
        b'{"code":10,"extFields":{"k":"v","k":null}}',
        b'{"code":10,"code":11}',
        b'{"code":10,"serializeTypeCurrentRPC":"JSON","other":true,"x":null,"y":-3}',
        b'{"code":10,"remark":"\\u00e9\\ud83d\\ude00\\n\\"\\\\\\/\\b\\f\\r\\t"}',
        b'{"code":10,"language":"NOT_A_LANGUAGE"}',
        b'{"code":-2147483648,"opaque":2147483647}',
    ],
)
def test_forms_clients_send_are_read_by_the_compiled_reader(header: bytes) -> None:
    assert _agree(header) is not None


@pytest.mark.parametrize(
    "header",
    [
        b'{"code":2147483648}',  # beyond a Java int
        b'{"code":1.0}',
        b'{"code":"10"}',  # fastjson reads it; the Python reader does
        b'{"code":10,"extFields":{"a":1.5}}',
        b'{"code":10,"extFields":{"a":-0}}',  # Python's text is "0"
        b'{"code":10,"extFields":{"a":[1]}}',
        b'{"code":10,"remark":"\\ud800"}',  # a lone surrogate
        b'{"code":10,"remark":"\x01"}',  # a raw control character
        b'{"code":10,"remark":"\xff"}',  # not UTF-8
        b'\xef\xbb\xbf{"code":10}',  # a BOM
        b'{"code":10} x',
        b'{"code":10,}',
        b'{"opaque":1}',  # no code
        b'{"code":01}',
        b"[]",
        b"",
        b'{"code":10,"extFields":{' + b",".join(b'"k%d":"v"' % i for i in range(1025)) + b"}}",
    ],
)
def test_forms_it_does_not_take_are_left_to_the_python_reader(header: bytes) -> None:
    assert COMPILED is not None
    assert COMPILED.decode_json_header(header) is None
    _agree(header)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12) | st.sampled_from(
    ["", '"', "\\", "\n\r\t\b\f", "\x00\x01\x1f\x7f", "区域", "\U0001f600", "a\u2028b"]
)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(_TEXT, _TEXT, max_size=8),
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from(list(LanguageCode)),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | _TEXT,
    st.integers(-(2**31), 2**31 - 1),
)
def test_the_compiled_header_writer_writes_the_python_bytes(
    code: int,
    ext_fields: dict[str, str],
    flag: int,
    language: LanguageCode,
    opaque: int,
    remark: str | None,
    version: int,
) -> None:
    """Goal: the C writer's header is byte for byte the Python writer's (and reads back as the
    command). Method: both on commands with every kind of text to escape."""
    assert COMPILED is not None
    command = RemotingCommand(
        code=code, language=language, version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext_fields
    )
    expected = framing.python_encode_json_header(command)
    assert COMPILED.encode_json_header(code, ext_fields, flag, language.name, opaque, remark, version) == expected
    assert json.loads(expected)["extFields"] == ext_fields


def test_the_compiled_header_writer_leaves_what_is_not_text_to_the_python_writer() -> None:
    """A value that is not a str, or a lone surrogate (not UTF-8): None from C, and the Python
    writer's precise error from `encode_json_header`."""
    assert COMPILED is not None
    for fields in ({"a": 1}, {2: "b"}, {"a": "\udc80"}, {"\ud800": "x"}):
        assert COMPILED.encode_json_header(10, fields, 0, "JAVA", 1, None, 1) is None  # type: ignore[arg-type]
        with pytest.raises((ProtocolError, TypeError)):
            encode_json_header(RemotingCommand(code=10, ext_fields=fields))  # type: ignore[arg-type]
    assert COMPILED.encode_json_header(10, {}, 0, "JAVA", 1, "\udc80", 1) is None
    with pytest.raises(ProtocolError, match="not encodable"):
        encode_json_header(RemotingCommand(code=10, remark="\udc80"))


# --- whole frames: FrameDecoder with the compiled frame reader against the Python decoder ---


def _frame(header: bytes, body: bytes, serialize_type: int) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def _feed_all(stream: bytes, step: int, compiled: object) -> tuple[list[RemotingCommand], str | None, int]:
    """The commands `FrameDecoder` makes of `stream` fed `step` bytes at a time (with `compiled` as
    the wire module: None is the Python path), the error that stopped it, and what it buffered."""
    saved = framing._compiled
    framing._compiled = compiled  # type: ignore[assignment]
    try:
        decoder = FrameDecoder()
        commands: list[RemotingCommand] = []
        try:
            for start in range(0, len(stream), step):
                commands += decoder.feed(stream[start : start + step])
        except ProtocolError as error:
            before = list(getattr(error, "decoded_before", ()))
            return commands + before, f"{type(error).__name__}: {error}", decoder.buffered_bytes
        return commands, None, decoder.buffered_bytes
    finally:
        framing._compiled = saved


def _same_commands(compiled: list[RemotingCommand], python: list[RemotingCommand]) -> None:
    assert compiled == python
    for mine, theirs in zip(compiled, python, strict=True):
        assert type(mine.language) is type(theirs.language)
        assert type(mine.body) is type(theirs.body)  # a view into the fed bytes, or None


_frame_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from(LanguageCode),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | _TEXT,
    ext_fields=st.dictionaries(_TEXT, _TEXT, max_size=6),
    body=st.none() | st.binary(min_size=1, max_size=64),
    serialize_type=st.sampled_from(SerializeType),
)
_frames = st.one_of(
    _frame_commands.map(encode_frame_bytes),
    st.builds(  # hand-written JSON headers, unusual languages and long remarks included
        _frame,
        st.sampled_from(
            [
                b'{"code":310,"extFields":{"a":1},"language":"CPP","opaque":9}',
                b'{"code":310,"language":"NOT_A_LANGUAGE"}',
                b'{"code":310,"language":null,"remark":null}',
                b'{"code":"310"}',
                b'{"opaque":1}',
                b"not json",
                b'{"code":1,"remark":"' + b"r" * (REMARK_SIZE_MAX_BYTES // 4 + 1) + b'"}',
                b'{"code":1,"remark":"' + "é".encode() * (REMARK_SIZE_MAX_BYTES // 2 + 1) + b'"}',
            ]
        ),
        st.binary(max_size=16),
        st.sampled_from([0, 0, 1, 2]),
    ),
    st.builds(  # lengths and header sizes that do not fit
        lambda length, word, tail: struct.pack(">iI", length, word) + tail,
        st.sampled_from([-1, 0, 3, 4, 7, 12, FRAME_SIZE_MAX_BYTES - 3, FRAME_SIZE_MAX_BYTES - 4, 2**31 - 1]),
        st.sampled_from([0, 5, 0xFFFFFF, HEADER_SIZE_MAX_BYTES + 1, 1 << 24 | 2, 3 << 24]),
        st.binary(max_size=8),
    ),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_frames, min_size=1, max_size=6), st.integers(1, 300), st.integers(0, 2000), st.binary(max_size=3))
def test_frames_are_decoded_by_the_compiled_reader_as_by_the_python_decoder(
    frames: list[bytes], step: int, at: int, garbage: bytes
) -> None:
    """Any stream of frames, usual, unusual, damaged, too large, cut anywhere: the same commands,
    the same error after the same commands, the same bytes left buffered."""
    assert COMPILED is not None
    stream = bytearray(b"".join(frames))
    if garbage:
        at %= len(stream)
        stream[at : at + len(garbage)] = garbage
    compiled = _feed_all(bytes(stream), step, COMPILED)
    python = _feed_all(bytes(stream), step, None)
    _same_commands(compiled[0], python[0])
    assert compiled[1:] == python[1:]


def test_the_compiled_reader_takes_a_run_of_usual_frames_and_leaves_the_others() -> None:
    """It decodes every usual frame itself and stops at the first it does not take, and at a cut."""
    assert COMPILED is not None
    usual = [encode_frame_bytes(make_request(310, opaque=n, ext_fields={"b": "T"}, body=b"m%d" % n)) for n in range(3)]
    binary = encode_frame_bytes(make_request(11, opaque=9, serialize_type=SerializeType.ROCKETMQ))
    data = b"".join(usual) + binary + usual[0][:10]
    commands: list[RemotingCommand] = []
    position = COMPILED.decode_frames(data, memoryview(data), 0, commands, *framing._FRAMES_CONTEXT)
    assert position == sum(map(len, usual))
    read = [(command.opaque, bytes(command.body or b"")) for command in commands]
    assert read == [(0, b"m0"), (1, b"m1"), (2, b"m2")]
    assert COMPILED.decode_frames(data, memoryview(data), position, commands, *framing._FRAMES_CONTEXT) == position
    after = position + len(binary)
    assert COMPILED.decode_frames(data, memoryview(data), after, commands, *framing._FRAMES_CONTEXT) == after
    with pytest.raises(ValueError, match="position outside the data"):
        COMPILED.decode_frames(data, memoryview(data), len(data) + 1, commands, *framing._FRAMES_CONTEXT)
