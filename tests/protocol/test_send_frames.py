"""The send path's short cuts (protocol/send_frames.py) against the general codec: the same header
read from the same extFields, the same error for what cannot be read, the same response bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.protocol import RemotingCommand, RequestCode, encode_frame_bytes, make_request, make_response
from shoal.protocol.codes import SerializeType
from shoal.protocol.errors import HeaderFieldError
from shoal.protocol.headers import SendMessageResponseHeader, send_message_request_header_of
from shoal.protocol.send_frames import send_header_of, send_ok_frame

SEND_CODES = [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE]
V2_KEYS = "abcdefghijklmn"
NUMBERS = st.sampled_from(
    ["0", "7", "123456789", "1234567890", "2147483648", "-1", "+1", "01", " 1", "x", "", "\u0661", "99999999999999999"]
)
VALUES = NUMBERS | st.sampled_from(["true", "false", "TRUE", "1", "0", "topic", "K\x01V\x02"]) | st.text(max_size=6)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(SEND_CODES), st.dictionaries(st.sampled_from([*V2_KEYS, "topic", "queueId"]), VALUES))
def test_send_header_of_reads_what_the_general_reader_reads(code: int, ext_fields: dict[str, str]) -> None:
    _assert_read_alike(code, ext_fields)


def _assert_read_alike(code: int, ext_fields: dict[str, str]) -> None:
    try:
        expected = send_message_request_header_of(code, ext_fields)
    except HeaderFieldError as error:
        with pytest.raises(HeaderFieldError) as raised:
            send_header_of(code, ext_fields)
        assert str(raised.value) == str(error)
        return
    assert send_header_of(code, ext_fields) == expected


JAVA_V2 = {
    "a": "PID",
    "b": "Topic",
    "c": "TBW102",
    "d": "4",
    "e": "3",
    "f": "0",
    "g": "1700000000000",
    "h": "0",
    "i": "WAIT\x01true\x02",
    "j": "0",
    "k": "false",
    "m": "false",
}


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(SEND_CODES),
    st.dictionaries(st.sampled_from(list(V2_KEYS)), VALUES, max_size=3),
    st.sets(st.sampled_from(list(V2_KEYS)), max_size=2),
)
def test_a_full_header_with_a_few_fields_changed_is_read_alike(
    code: int, changes: dict[str, str], removed: set[str]
) -> None:
    ext = {key: value for key, value in {**JAVA_V2, **changes}.items() if key not in removed}
    _assert_read_alike(code, ext)


def test_a_java_clients_v2_header_is_read_in_full() -> None:
    ext = JAVA_V2
    header = send_header_of(RequestCode.SEND_MESSAGE_V2, ext)
    assert header == send_message_request_header_of(RequestCode.SEND_MESSAGE_V2, ext)
    assert (header.topic, header.queue_id, header.born_timestamp_ms, header.batch) == ("Topic", 3, 1700000000000, False)


@settings(max_examples=800, deadline=None)
@given(
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.lists(st.text(alphabet="0123456789ABCDEF", min_size=32, max_size=40), min_size=1, max_size=3).map(",".join),
    st.integers(min_value=0, max_value=2**31 - 1),
    st.integers(min_value=0, max_value=2**63 - 1),
    st.text(max_size=20),
    st.booleans(),
    st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]),
)
def test_send_ok_frame_is_the_general_encoding(
    opaque: int,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    region: str,
    trace_on: bool,
    serialize_type: SerializeType,
) -> None:
    if any(0xD800 <= ord(character) <= 0xDFFF for character in region):
        return  # not encodable: never a configured region
    request = make_request(RequestCode.SEND_MESSAGE_V2, opaque=opaque, serialize_type=serialize_type)
    header = SendMessageResponseHeader(
        msg_id=msg_id, queue_id=queue_id, queue_offset=queue_offset, msg_region=region, trace_on=trace_on
    )
    expected = encode_frame_bytes(make_response(request, 0, None, ext_fields=header.to_ext_fields()))
    frame = send_ok_frame(request, msg_id, queue_id, queue_offset, region, trace_on)
    assert frame == expected
    assert isinstance(request, RemotingCommand)
