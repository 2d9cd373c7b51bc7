"""The send path's short cuts (protocol/send_frames.py) against the general codec: the same header
read from the same extFields, the same error for what cannot be read, the same response bytes; and
the compiled `plain_send` (protocol/_wire_speedups.c) against its Python twin."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.formats.message_id import offset_msg_id_of_hex
from shoal.protocol import RemotingCommand, RequestCode, encode_frame_bytes, make_request, make_response, send_frames
from shoal.protocol.codes import SerializeType
from shoal.protocol.errors import HeaderFieldError
from shoal.protocol.headers import SendMessageResponseHeader, send_message_request_header_of
from shoal.protocol.send_frames import (
    general_stored_properties,
    python_plain_send,
    send_header_of,
    send_ok_frame,
    single_send_ok_frame,
    stored_properties,
)

try:  # directly, not through compiled_module: these tests hold even under SHOAL_PURE_PYTHON
    from shoal.protocol import _wire_speedups as COMPILED  # noqa: N812
except ImportError:
    COMPILED = None  # type: ignore[assignment]
needs_compiled = pytest.mark.skipif(
    COMPILED is None and not os.environ.get("CI"),
    reason="shoal.protocol._wire_speedups was not built (no C compiler at install) and this is not CI; "
    "in CI these tests fail instead",
)

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


@pytest.mark.parametrize(
    ("sent", "stored", "wait"),
    [
        (None, b"CLUSTER\x01DefaultCluster", True),
        ("TAGS\x01a", b"TAGS\x01a\x02CLUSTER\x01DefaultCluster", True),
        ("TAGS\x01a\x02", b"TAGS\x01a\x02CLUSTER\x01DefaultCluster", True),
        ("WAIT\x01true\x02TAGS\x01a", b"TAGS\x01a\x02CLUSTER\x01DefaultCluster", True),
        ("TAGS\x01a\x02WAIT\x01FALSE\x02", b"TAGS\x01a\x02CLUSTER\x01DefaultCluster", False),
        ("CLUSTER\x01other\x02TAGS\x01a", b"TAGS\x01a\x02CLUSTER\x01DefaultCluster", True),
    ],
)
def test_stored_properties_drop_wait_and_carry_the_cluster(sent: str | None, stored: bytes, wait: bool) -> None:
    """Goal: WAIT is honoured, not stored; CLUSTER names this broker's cluster, once. Method: the
    pure string edit on the shapes clients send."""
    assert stored_properties(sent, "DefaultCluster") == (stored, wait)


_PROPERTY_PIECES = ["WAIT", "CLUSTER", "TAGS", "true", "false", "FALSE", "", "x", "\x01", "\x02", "é"]


@settings(max_examples=2000, deadline=None)
@given(st.none() | st.lists(st.sampled_from(_PROPERTY_PIECES), max_size=12).map("".join))
def test_stored_properties_cut_short_equal_the_general_edit(sent: str | None) -> None:
    """Goal: the two-find cut of the usual property string gives exactly what the general edit
    (pop WAIT, set CLUSTER) gives, on any string. Method: strings of the pieces that matter."""
    assert stored_properties(sent, "C1") == general_stored_properties(sent, "C1")


REFUSED = ("DELAY\x01", "TIMER_", "__STARTDELIVERTIME\x01", "TRAN_MSG\x01")
_PROPERTY_TEXT = st.lists(
    st.sampled_from([*_PROPERTY_PIECES, "DELAY", "TIMER_", "TRAN_MSG", "KEYS", "\ud800", "\u4e2d"]), max_size=10
).map("".join)
_PLAIN_EXT = {"a": "PID", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0"}


@needs_compiled
@settings(max_examples=3000, deadline=None)
@given(
    st.dictionaries(st.sampled_from([*V2_KEYS, "topic"]), VALUES),
    st.sets(st.sampled_from(sorted(_PLAIN_EXT))),
    st.none() | _PROPERTY_TEXT,
    st.sampled_from(["C1", "DefaultCluster", "\u96c6\u7fa4"]),
)
def test_compiled_plain_send_answers_what_python_does(
    noise: dict[str, str], dropped: set[str], properties: str | None, cluster: str
) -> None:
    """Goal: the C reader of a plain send is its Python twin's double: the same fields, the same
    stored property string, the same refusals. Method: a plain send's extFields with random fields
    dropped or replaced by unusual numbers and texts, and property strings of the pieces that matter."""
    assert COMPILED is not None
    ext = {key: value for key, value in _PLAIN_EXT.items() if key not in dropped}
    ext.update(noise)
    if properties is not None:
        ext["i"] = properties
    assert COMPILED.plain_send(ext, cluster, REFUSED) == python_plain_send(ext, cluster, REFUSED)


def test_plain_send_reads_a_plain_send_and_refuses_the_rest() -> None:
    """Goal: the usual send is read in full, its property string cut as stored; a batch, a timed or
    transactional message, an unusual number take the general path. Method: the Python twin on
    hand-made extFields (the compiled one is held to it above)."""
    ext = {**_PLAIN_EXT, "i": "TAGS\x01a\x02WAIT\x01false\x02", "j": "2", "m": "false"}
    assert python_plain_send(ext, "C1", REFUSED) == (
        "T",
        1,
        0,
        0,
        1700000000000,
        2,
        b"TAGS\x01a\x02CLUSTER\x01C1",
        False,
    )
    assert python_plain_send({**ext, "i": "TAGS\x01a"}, "C1", REFUSED) == (
        "T",
        1,
        0,
        0,
        1700000000000,
        2,
        None,
        True,
    )  # no WAIT: not the usual form, the caller cuts it the general way
    for refused in (
        {"m": "true"},
        {"i": "DELAY\x013"},
        {"i": "TRAN_MSG\x01true"},
        {"e": "-1"},
        {"g": "1" * 19},
        {"j": "x"},
    ):
        assert python_plain_send({**ext, **refused}, "C1", REFUSED) is None, refused


@needs_compiled
@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(["7F00000100002A9F", "00000000000000000000000000000001000004D2"]),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from(["DefaultRegion", "", 'a"b\\c', "\u533a\u57df", "\x01"]),
    st.booleans(),
    st.integers(-(2**31), 2**31 - 1),
)
def test_compiled_single_send_ok_frame_writes_the_python_bytes(
    host_hex: str, offset: int, queue_id: int, queue_offset: int, region: str, trace_on: bool, opaque: int
) -> None:
    """Goal: the C success frame is byte for byte the Python one (whose bytes the general encoder's
    are, above). Method: both on the same answers, offsets of any sign included."""
    request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, opaque=opaque)
    expected = send_ok_frame(request, offset_msg_id_of_hex(host_hex, offset), queue_id, queue_offset, region, trace_on)
    assert single_send_ok_frame(request, host_hex, offset, queue_id, queue_offset, region, trace_on) == expected
    saved = send_frames._compiled
    send_frames._compiled = None
    try:  # the Python fallback of single_send_ok_frame too
        assert single_send_ok_frame(request, host_hex, offset, queue_id, queue_offset, region, trace_on) == expected
    finally:
        send_frames._compiled = saved
