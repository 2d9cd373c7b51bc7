"""Frames, both header encodings and the incremental FrameDecoder (spec §8.1-§8.4, A.2)."""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.protocol import (
    CommandFlag,
    EncodeError,
    FrameDecoder,
    FrameTooLargeError,
    LanguageCode,
    MalformedFrameError,
    ProtocolError,
    PullMessageResponseHeader,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SendMessageRequestHeaderV2,
    SerializeType,
    decode_frame,
    encode_frame,
    encode_frame_bytes,
    make_request,
    make_response,
)
from shoal.protocol.framing import (
    decode_binary_header,
    decode_json_header,
    encode_binary_header,
    encode_json_header,
)
from shoal.protocol.limits import FRAME_SIZE_MAX_BYTES, HEADER_SIZE_MAX_BYTES, REMARK_SIZE_MAX_BYTES


def _json_frame(header: bytes | str, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame around a hand-written header."""
    raw = header.encode() if isinstance(header, str) else header
    return struct.pack(">iI", 4 + len(raw) + len(body), (serialize_type << 24) | len(raw)) + raw + body


def _a2_send_request() -> RemotingCommand:
    """The SEND_MESSAGE_V2 request of appendix A.2: a 254-byte compact JSON header, body Hello."""
    header = SendMessageRequestHeaderV2(
        producer_group="please_rename_unique_group_name",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=1700000000000,
        flag=0,
    )
    return make_request(RequestCode.SEND_MESSAGE_V2, opaque=1, ext_fields=header.to_ext_fields(), body=b"Hello")


def _a2_pull_response() -> RemotingCommand:
    """The PULL_MESSAGE SUCCESS response of appendix A.2 in the ROCKETMQ binary encoding."""
    header = PullMessageResponseHeader(suggest_which_broker_id=0, next_begin_offset=1, min_offset=0, max_offset=1)
    return RemotingCommand(
        code=ResponseCode.SUCCESS,
        language=LanguageCode.JAVA,
        version=407,
        opaque=1,
        flag=CommandFlag.RESPONSE,
        remark="FOUND",
        ext_fields=header.to_ext_fields(),
        serialize_type=SerializeType.ROCKETMQ,
    )


# --- appendix A.2 ---


def test_json_send_request_frame_matches_appendix_a2() -> None:
    """Goal: A.2 JSON vector. Method: encode the 254-byte-header request, compare bytes by hand."""
    expected_header = (
        b'{"code":310,"extFields":{"a":"please_rename_unique_group_name","b":"TopicTest","c":"TBW102",'
        b'"d":"4","e":"0","f":"0","g":"1700000000000","h":"0","k":"false","m":"false"},"flag":0,'
        b'"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    assert len(expected_header) == 254
    frame = encode_frame_bytes(_a2_send_request())
    assert frame[:8] == bytes.fromhex("00000107000000fe")
    assert frame == frame[:8] + expected_header + b"Hello"
    assert len(frame) == 4 + 263


def test_binary_pull_response_frame_matches_appendix_a2() -> None:
    """Goal: A.2 ROCKETMQ vector. Method: encode the FOUND response, compare every byte."""
    entries = b"".join(
        struct.pack(">h", len(key)) + key + struct.pack(">i", len(value)) + value
        for key, value in (
            (b"suggestWhichBrokerId", b"0"),
            (b"nextBeginOffset", b"1"),
            (b"minOffset", b"0"),
            (b"maxOffset", b"1"),
        )
    )
    expected_header = (
        bytes.fromhex("0000000197000000010000000100000005") + b"FOUND" + struct.pack(">i", len(entries)) + entries
    )
    assert len(expected_header) == 107
    frame = encode_frame_bytes(_a2_pull_response())
    assert frame[:8] == bytes.fromhex("0000006f0100006b")
    assert frame[8:] == expected_header
    assert frame[8:34] == bytes.fromhex("0000000197000000010000000100000005464f554e4400000051")


def test_appendix_a2_frames_decode_to_the_commands_that_made_them() -> None:
    """Goal: both A.2 vectors decode back. Method: decode_frame and compare to the source command."""
    for command in (_a2_send_request(), _a2_pull_response()):
        assert decode_frame(encode_frame_bytes(command)) == command


# --- header encodings ---


def _sample_command(serialize_type: SerializeType) -> RemotingCommand:
    return RemotingCommand(
        code=RequestCode.PULL_MESSAGE,
        language=LanguageCode.CPP,
        version=63,
        opaque=-7,
        flag=CommandFlag.ONEWAY,
        remark="remarque: ünïcödé 中文 \x01",
        ext_fields={"topic": "TopicTest", "properties": "TAGS\x01TagA\x02", "中": "文"},
        body=b"\x00\xffbody",
        serialize_type=serialize_type,
    )


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_header_round_trip_preserves_every_field(serialize_type: SerializeType) -> None:
    """Goal: JSON and binary headers lose nothing. Method: encode, decode, compare all fields."""
    command = _sample_command(serialize_type)
    assert decode_frame(encode_frame_bytes(command)) == command


def test_json_header_is_compact_alphabetical_and_omits_null_remark() -> None:
    """Goal: fastjson's compact bean form. Method: encode a small request, compare the text."""
    command = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=3, ext_fields={"topic": "t"})
    assert encode_json_header(command) == (
        b'{"code":105,"extFields":{"topic":"t"},"flag":0,"language":"JAVA","opaque":3,'
        b'"serializeTypeCurrentRPC":"JSON","version":407}'
    )


def test_json_header_always_carries_ext_fields() -> None:
    """Goal: clients dereference extFields unchecked. Method: encode a response without fields."""
    response = make_response(make_request(RequestCode.HEART_BEAT, opaque=9), ResponseCode.SUCCESS)
    assert json.loads(encode_json_header(response))["extFields"] == {}


def test_json_header_keeps_non_ascii_as_utf8_and_escapes_control_characters() -> None:
    """Goal: fastjson-like text. Method: encode a remark with 中 and \\x01, inspect the bytes."""
    command = make_request(RequestCode.SEND_MESSAGE, opaque=1, remark="中\x01")
    header = encode_json_header(command)
    assert "中".encode() in header
    assert b"\\u0001" in header


def test_binary_header_decodes_empty_strings_as_null_like_java() -> None:
    """Goal: zero-length remark/key/value are null. Method: hand-build such a header, decode it."""
    entries = (
        struct.pack(">h", 1)
        + b"k"
        + struct.pack(">i", 0)  # empty value: dropped
        + struct.pack(">h", 0)
        + struct.pack(">i", 1)
        + b"v"  # empty key: dropped
        + struct.pack(">h", 1)
        + b"a"
        + struct.pack(">i", 1)
        + b"b"
    )
    header = struct.pack(">hbhiii", 10, 0, 407, 5, 0, 0) + struct.pack(">i", len(entries)) + entries
    command = decode_binary_header(header)
    assert command.remark is None
    assert command.ext_fields == {"a": "b"}


def test_binary_header_does_not_write_empty_strings() -> None:
    """Goal: empty strings are not written (they would decode to null). Method: encode, decode."""
    command = RemotingCommand(code=10, remark="", ext_fields={"a": "", "b": "x"}, serialize_type=SerializeType.ROCKETMQ)
    decoded = decode_binary_header(encode_binary_header(command))
    assert decoded.remark is None
    assert decoded.ext_fields == {"b": "x"}


def test_binary_header_maps_unknown_language_byte_to_other() -> None:
    """Goal: tolerate unknown languages. Method: decode a header with language byte 99 and -1."""
    for language in (99, -1):
        header = struct.pack(">hbhiii", 10, language, 1, 1, 0, 0) + struct.pack(">i", 0)
        assert decode_binary_header(header).language is LanguageCode.OTHER


def test_binary_encoding_refuses_codes_beyond_a_short() -> None:
    """Goal: code/version are shorts in binary. Method: encode code 200050 (a 5.x code)."""
    with pytest.raises(EncodeError, match="short"):
        encode_binary_header(RemotingCommand(code=200050, serialize_type=SerializeType.ROCKETMQ))
    assert decode_json_header(encode_json_header(RemotingCommand(code=200050))).code == 200050


def test_cpp_client_route_request_header_decodes() -> None:
    """Goal: the captured C++ 1.2.3 header works. Method: decode its exact bytes (real-clients §1.2)."""
    header = (
        '{"code":105,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":'
        '"knfJR6n+KEyAptQ/eaMKHLh5j7E=","topic":"%RETRY%CID_srvreq"},"flag":0,"language":"CPP",'
        '"opaque":0,"remark":"","version":63}'
    )
    command = decode_frame(_json_frame(header))
    assert command.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert command.language is LanguageCode.CPP
    assert command.version == 63
    assert command.remark == ""
    assert command.ext_fields["topic"] == "%RETRY%CID_srvreq"
    assert command.body is None


def test_json_header_normalises_numbers_and_booleans_in_ext_fields() -> None:
    """Goal: C++ sends JSON numbers (real-clients §1.3). Method: decode mixed values, expect strings."""
    header = (
        '{"code":10,"extFields":{"queueId":0,"sysFlag":1,"big":1795300479356,"unitMode":true,'
        '"ratio":1.5,"gone":null,"topic":"T"},"flag":0,"language":"CPP","opaque":1,"version":63}'
    )
    ext_fields = decode_json_header(header.encode()).ext_fields
    assert ext_fields == {
        "queueId": "0",
        "sysFlag": "1",
        "big": "1795300479356",
        "unitMode": "true",
        "ratio": "1.5",
        "topic": "T",
    }


def test_json_header_with_a_lone_surrogate_escape_is_malformed_but_pairs_are_fine() -> None:
    """Goal: decoded text is always re-encodable. Method: \\ud800 alone vs. an escaped emoji pair."""
    with pytest.raises(MalformedFrameError, match="surrogate"):
        decode_json_header(b'{"code":10,"extFields":{"k":"\\ud800"}}')
    paired = decode_json_header(b'{"code":10,"remark":"\\ud83d\\ude00","extFields":{"k":"\\uD83D\\uDE00"}}')
    assert paired.remark == paired.ext_fields["k"] == "\U0001f600"


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        ('"GO"', LanguageCode.GO),
        ("3", LanguageCode.PYTHON),
        ('"KOTLIN"', LanguageCode.OTHER),
        ("99", LanguageCode.OTHER),
    ],
)
def test_json_header_accepts_language_names_and_ordinals(language: str, expected: LanguageCode) -> None:
    """Goal: names, ordinals, unknown -> OTHER. Method: decode a header per spelling."""
    header = f'{{"code":34,"language":{language},"opaque":1}}'.encode()
    assert decode_json_header(header).language is expected


def test_json_header_accepts_fastjson_style_numeric_strings_and_missing_fields() -> None:
    """Goal: lenient ints, Java defaults. Method: decode '"code":"10"' with no flag/version."""
    command = decode_json_header(b'{"code":"10","opaque":"5"}')
    assert (command.code, command.opaque, command.flag, command.version) == (10, 5, 0, 0)
    assert command.language is LanguageCode.JAVA
    assert command.ext_fields == {}


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (b"not json", "bad JSON header"),
        (b"[1,2]", "not an object"),
        (b'{"opaque":1}', "no 'code'"),
        (b'{"code":1.5}', "'code'"),
        (b'{"code":4294967296}', "'code'"),
        (b'{"code":true}', "'code'"),
        (b'{"code":1,"extFields":[1]}', "extFields"),
        (b'{"code":1,"extFields":{"a":[1]}}', "extFields"),
        (b'{"code":1,"extFields":{"a":{"b":1}}}', "extFields"),
        (b'{"code":1,"remark":{"a":1}}', "remark"),
        (b"\xff\xfe", "UTF-8"),
        (b"[" * 5000, "nesting"),
    ],
)
def test_bad_json_header_is_malformed_with_precise_message(header: bytes, message: str) -> None:
    """Goal: every bad JSON header says why. Method: decode each in a frame, match the message."""
    with pytest.raises(MalformedFrameError, match=message):
        FrameDecoder().feed(_json_frame(header))


# --- frames and the decoder ---


def _commands(count: int) -> list[RemotingCommand]:
    commands = []
    for index in range(count):
        serialize_type = SerializeType(index % 2)
        body = bytes(range(index % 256)) * 3 or None
        commands.append(
            make_request(
                RequestCode.SEND_MESSAGE,
                opaque=index,
                ext_fields={"i": str(index)},
                body=body,
                serialize_type=serialize_type,
            )
        )
    return commands


def test_feeding_byte_by_byte_yields_the_same_commands() -> None:
    """Goal: partial frames are buffered. Method: feed a stream of 20 frames one byte at a time."""
    commands = _commands(20)
    stream = b"".join(encode_frame_bytes(command) for command in commands)
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    for index in range(len(stream)):
        decoded += decoder.feed(stream[index : index + 1])
    assert decoded == commands
    assert decoder.buffered_bytes == 0
    decoder.end_of_stream()


def test_feeding_in_uneven_chunks_yields_the_same_commands() -> None:
    """Goal: frames span and share chunks. Method: feed the stream cut at several chunk sizes."""
    commands = _commands(30)
    stream = b"".join(encode_frame_bytes(command) for command in commands)
    for chunk_size in (3, 7, 64, 1000, len(stream)):
        decoder = FrameDecoder()
        decoded: list[RemotingCommand] = []
        for start in range(0, len(stream), chunk_size):
            decoded += decoder.feed(stream[start : start + chunk_size])
        assert decoded == commands, chunk_size


def test_decoded_body_is_a_view_into_the_fed_bytes() -> None:
    """Goal: no body copy when a frame arrives whole. Method: check the memoryview's base object."""
    data = encode_frame_bytes(make_request(RequestCode.SEND_MESSAGE, opaque=1, body=b"payload"))
    (command,) = FrameDecoder().feed(data)
    assert isinstance(command.body, memoryview)
    assert command.body.obj is data
    assert command.body.readonly
    assert bytes(command.body) == b"payload"


def test_feed_copies_mutable_input_so_bodies_never_alias_a_reused_buffer() -> None:
    """Goal: bodies stay valid. Method: feed a bytearray, overwrite it, re-read the body."""
    data = bytearray(encode_frame_bytes(make_request(RequestCode.SEND_MESSAGE, opaque=1, body=b"payload")))
    (command,) = FrameDecoder().feed(data)  # type: ignore[arg-type]
    data[-7:] = b"XXXXXXX"
    assert command.body == b"payload"


def test_encode_frame_does_not_copy_the_body() -> None:
    """Goal: gather-friendly encoding. Method: the body object itself is the last part."""
    body = memoryview(bytearray(b"x" * 1000))
    parts = encode_frame(make_request(RequestCode.SEND_MESSAGE, opaque=1, body=body))
    assert len(parts) == 2
    assert parts[1] is body
    no_body = encode_frame(make_request(RequestCode.HEART_BEAT, opaque=1))
    assert len(no_body) == 1


def test_oversized_length_prefix_is_rejected_before_buffering() -> None:
    """Goal: no 16 MiB buffering. Method: feed only the 4-byte prefix of a too-large frame."""
    decoder = FrameDecoder()
    prefix = struct.pack(">i", FRAME_SIZE_MAX_BYTES - 4 + 1)
    assert decoder.feed(prefix[:3]) == []
    with pytest.raises(FrameTooLargeError, match=str(FRAME_SIZE_MAX_BYTES)):
        decoder.feed(prefix[3:])
    assert decoder.buffered_bytes == 0
    with pytest.raises(FrameTooLargeError):
        FrameDecoder().feed(prefix + b"\x00" * 100)


def test_length_prefix_at_the_limit_is_accepted_and_buffered() -> None:
    """Goal: the limit is inclusive (L + 4 == 16 MiB). Method: feed that prefix and a little data."""
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">iI", FRAME_SIZE_MAX_BYTES - 4, 10) + b"{") == []
    assert decoder.buffered_bytes == 9


def test_large_body_frame_round_trips() -> None:
    """Goal: near-limit frames work. Method: a body of 16 MiB - 1 KiB through encode and decode."""
    body = b"\xab" * (FRAME_SIZE_MAX_BYTES - 1024)
    command = make_request(RequestCode.SEND_MESSAGE, opaque=1, body=body)
    data = encode_frame_bytes(command)
    decoder = FrameDecoder()
    assert decoder.feed(data[:100_000]) == []
    (decoded,) = decoder.feed(data[100_000:])
    assert decoded.body == body


def test_encode_refuses_a_frame_over_the_limit() -> None:
    """Goal: never send what Java would reject. Method: encode a 16 MiB body."""
    with pytest.raises(EncodeError, match="exceeds"):
        encode_frame(make_request(RequestCode.SEND_MESSAGE, opaque=1, body=b"x" * FRAME_SIZE_MAX_BYTES))


def test_encode_refuses_non_string_ext_values_and_out_of_range_ints() -> None:
    """Goal: extFields are strings, ints fit Java. Method: encode bad commands, expect EncodeError."""
    with pytest.raises(EncodeError, match="must be str"):
        encode_frame(RemotingCommand(code=10, ext_fields={"queueId": 3}))  # type: ignore[dict-item]
    with pytest.raises(EncodeError, match="Java int"):
        encode_frame(RemotingCommand(code=10, opaque=2**31))
    with pytest.raises(EncodeError, match="UTF-8"):
        encode_frame(RemotingCommand(code=10, remark="\ud800"))


@pytest.mark.parametrize(
    ("frame", "error", "message"),
    [
        (struct.pack(">i", -1), MalformedFrameError, "negative frame length"),
        (struct.pack(">i", 3) + b"abc", MalformedFrameError, "cannot hold"),
        (struct.pack(">iI", 4, 1), MalformedFrameError, "header length 1 exceeds the 0 bytes"),
        (struct.pack(">iI", 6, (2 << 24) | 2) + b"{}", MalformedFrameError, "unknown serialize type 2"),
        (struct.pack(">iI", 6, (0xFF << 24) | 2) + b"{}", MalformedFrameError, "unknown serialize type 255"),
        (struct.pack(">iI", 4 + 10, (1 << 24) | 10) + b"\x00" * 10, MalformedFrameError, "shorter than"),
    ],
)
def test_malformed_frames_raise_with_precise_messages(frame: bytes, error: type[Exception], message: str) -> None:
    """Goal: every structural fault is named. Method: feed each bad frame, match the message."""
    with pytest.raises(error, match=message):
        FrameDecoder().feed(frame)


def test_header_length_over_the_limit_is_malformed() -> None:
    """Goal: header bounded by HEADER_SIZE_MAX_BYTES. Method: a frame whose header is 1 byte over."""
    size = HEADER_SIZE_MAX_BYTES + 1
    with pytest.raises(MalformedFrameError, match="limit"):
        FrameDecoder().feed(struct.pack(">iI", 4 + size, size) + b" " * size)


def test_binary_header_truncated_at_every_offset_is_malformed() -> None:
    """Goal: every cut of a binary header is caught. Method: re-frame each prefix of the A.2 header."""
    header = encode_binary_header(_a2_pull_response())
    for cut in range(len(header)):
        with pytest.raises(MalformedFrameError):
            FrameDecoder().feed(_json_frame(header[:cut], serialize_type=1))


def test_binary_header_with_corrupted_lengths_is_malformed() -> None:
    """Goal: lengths are bounds-checked. Method: set each length field to -1 and to a huge value."""
    header = bytearray(encode_binary_header(_a2_pull_response()))
    remark_at, ext_at, key_at = 13, 22, 26
    for offset, fmt in ((remark_at, ">i"), (ext_at, ">i"), (key_at, ">h")):
        for value in (-1, 30000):
            bad = bytearray(header)
            struct.pack_into(fmt, bad, offset, value)
            with pytest.raises(MalformedFrameError, match="length"):
                decode_binary_header(bytes(bad))


def test_binary_header_with_invalid_utf8_is_malformed() -> None:
    """Goal: text must be UTF-8. Method: a remark of b'\\xff'."""
    header = struct.pack(">hbhiii", 0, 0, 1, 1, 1, 1) + b"\xff" + struct.pack(">i", 0)
    with pytest.raises(MalformedFrameError, match="UTF-8"):
        decode_binary_header(header)


def test_remark_over_the_limit_is_malformed() -> None:
    """Goal: remark bounded. Method: binary header announcing REMARK_SIZE_MAX_BYTES + 1 bytes."""
    size = REMARK_SIZE_MAX_BYTES + 1
    header = struct.pack(">hbhiii", 0, 0, 1, 1, 1, size) + b"r" * size + struct.pack(">i", 0)
    with pytest.raises(MalformedFrameError, match="remark"):
        decode_binary_header(header)


def test_end_of_stream_inside_a_frame_is_truncation() -> None:
    """Goal: a cut-off last frame is reported. Method: feed all but the last byte, end the stream."""
    data = encode_frame_bytes(_a2_send_request())
    for cut in (2, len(data) - 1):
        decoder = FrameDecoder()
        decoder.feed(data[:cut])
        with pytest.raises(MalformedFrameError, match="truncated"):
            decoder.end_of_stream()


def test_decode_frame_rejects_truncated_and_trailing_bytes() -> None:
    """Goal: one-shot decoding checks the exact length. Method: drop and add one byte."""
    data = encode_frame_bytes(_a2_send_request())
    with pytest.raises(MalformedFrameError, match="truncated"):
        decode_frame(data[:-1])
    with pytest.raises(MalformedFrameError, match="after a frame"):
        decode_frame(data + b"\x00")
    with pytest.raises(MalformedFrameError, match="truncated"):
        decode_frame(b"\x00")


def test_error_carries_the_commands_decoded_before_it() -> None:
    """Goal: good frames before a bad one are not lost. Method: two frames then garbage in one feed."""
    good = _commands(2)
    data = b"".join(encode_frame_bytes(command) for command in good) + _json_frame(b"garbage")
    with pytest.raises(MalformedFrameError) as caught:
        FrameDecoder().feed(data)
    assert list(caught.value.decoded_before) == good


def test_decoder_refuses_input_after_a_failure() -> None:
    """Goal: errors are final. Method: feed garbage, then a valid frame."""
    decoder = FrameDecoder()
    with pytest.raises(MalformedFrameError):
        decoder.feed(_json_frame(b"garbage"))
    with pytest.raises(MalformedFrameError, match="already failed"):
        decoder.feed(encode_frame_bytes(_a2_send_request()))


def test_make_response_echoes_opaque_and_serialize_type_and_sets_response_flag() -> None:
    """Goal: response rules of spec §8.2. Method: answer a oneway binary request."""
    request = make_request(RequestCode.PULL_MESSAGE, opaque=77, oneway=True, serialize_type=SerializeType.ROCKETMQ)
    assert request.is_oneway and not request.is_response
    response = make_response(request, ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", ext_fields={"a": "1"})
    assert response.opaque == 77
    assert response.is_response and not response.is_oneway
    assert response.serialize_type is SerializeType.ROCKETMQ
    assert response.remark == "OFFSET_OVERFLOW_ONE"
    assert response.ext_fields == {"a": "1"}


def test_make_response_clips_an_overlong_remark_on_a_character_boundary() -> None:
    """Goal: a huge error text still yields a sendable response. Method: a 100k-character remark."""
    request = make_request(RequestCode.SEND_MESSAGE, opaque=1)
    response = make_response(request, ResponseCode.SYSTEM_ERROR, "中" * 100_000)
    assert response.remark is not None
    assert len(response.remark.encode()) <= REMARK_SIZE_MAX_BYTES
    assert decode_frame(encode_frame_bytes(response)).remark == response.remark


# --- properties ---

_commands_strategy = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from(LanguageCode),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    remark=st.none() | st.text(min_size=1, max_size=50),
    ext_fields=st.dictionaries(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=40), max_size=8),
    body=st.none() | st.binary(min_size=1, max_size=200),
    serialize_type=st.sampled_from(SerializeType),
)


def _encodable(command: RemotingCommand) -> bool:
    texts = [command.remark or "", *command.ext_fields, *command.ext_fields.values()]
    return all(not any(0xD800 <= ord(char) <= 0xDFFF for char in text) for text in texts)


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_commands_strategy, max_size=5), st.integers(1, 50))
def test_random_commands_round_trip_through_encoder_and_decoder(commands: list[RemotingCommand], chunk: int) -> None:
    """Goal: encode/decode are inverse for any valid command. Method: hypothesis, chunked feeding."""
    commands = [command for command in commands if _encodable(command)]
    stream = b"".join(encode_frame_bytes(command) for command in commands)
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    for start in range(0, len(stream), chunk):
        decoded += decoder.feed(stream[start : start + chunk])
    assert decoded == commands


def _framed(payload: bytes, serialize_type: int, header_size: int) -> bytes:
    return struct.pack(">iI", 4 + len(payload), (serialize_type << 24) | header_size) + payload


_json_scalars = st.none() | st.booleans() | st.integers(-5, 500) | st.integers() | st.floats() | st.text(max_size=10)
_json_header_fields = st.fixed_dictionaries(
    {"code": _json_scalars},
    optional={
        "extFields": st.dictionaries(st.text(max_size=5), _json_scalars | st.lists(_json_scalars), max_size=5)
        | _json_scalars,
        "flag": _json_scalars,
        "language": _json_scalars | st.sampled_from([member.name for member in LanguageCode]),
        "opaque": _json_scalars,
        "remark": _json_scalars,
        "version": _json_scalars,
        "serializeTypeCurrentRPC": _json_scalars,
    },
)
_json_headers = st.one_of(
    _json_header_fields.map(lambda fields: json.dumps(fields).encode()),
    st.recursive(_json_scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=5).map(
        lambda value: json.dumps(value).encode()
    ),
)


def _mutated(command: RemotingCommand, position: int, value: int) -> bytes:
    """A valid frame of `command` with one byte replaced."""
    frame = bytearray(encode_frame_bytes(command))
    frame[position % len(frame)] = value
    return bytes(frame)


_fuzz_input = st.one_of(
    st.binary(max_size=300),
    st.builds(_framed, st.binary(max_size=200), st.integers(0, 3), st.integers(0, 220)),
    st.builds(_json_frame, _json_headers, st.binary(max_size=10)),
    st.builds(_mutated, _commands_strategy, st.integers(0, 10_000), st.integers(0, 255)),
)


@settings(max_examples=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_fuzz_input, min_size=1, max_size=4), st.integers(1, 64))
def test_random_bytes_only_ever_yield_commands_or_protocol_errors(chunks: list[bytes], step: int) -> None:
    """Goal: hostile input yields commands (re-encodable) or ProtocolErrors only. Method: hypothesis."""
    decoder = FrameDecoder()
    data = b"".join(chunks)
    with contextlib.suppress(ProtocolError):
        for start in range(0, len(data), step):
            for command in decoder.feed(data[start : start + step]):
                assert isinstance(command, RemotingCommand)
                assert all(type(key) is str and type(value) is str for key, value in command.ext_fields.items())
                assert decode_frame(encode_frame_bytes(command)).ext_fields == command.ext_fields
        decoder.end_of_stream()
