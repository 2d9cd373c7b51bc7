"""The send path's frames without the general machinery: the hot request of a broker, read and
answered in a few steps instead of through typed headers and `RemotingCommand`s.

* `send_header_of` reads a send request's extFields straight into `SendMessageRequestHeader`:
  the V2 letters (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) written out field by field, falling back to
  the general reader (`shoal.protocol.headers`) for anything it does not take at a glance, so its
  answers and errors are the general reader's.
* `plain_send` reads a SEND_MESSAGE_V2 of the plain kind (most of them: no delay, timer or
  transaction property, no batch, every number a plain decimal) in one call, its property string
  already cut as stored (`stored_properties`); the compiled twin (`_wire_speedups.c`) does it in C.
* `send_ok_frame` writes a successful send's whole response frame (prefix and JSON header) from a
  template: the bytes `encode_frame(make_response(...))` would write, at a fraction of the cost.

`tests/protocol/test_send_frames.py` holds them to the general path byte for byte, and the compiled
`plain_send` to its Python twin.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from json.encoder import encode_basestring

from shoal.formats.compiled import compiled_module
from shoal.formats.message_id import offset_msg_id_of_hex
from shoal.formats.properties import (
    CLUSTER,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    WAIT_STORE_MSG_OK,
    pop_property,
    set_property,
)
from shoal.protocol.codes import CURRENT_VERSION, RequestCode, SerializeType
from shoal.protocol.command import DEFAULT_LANGUAGE, RemotingCommand, make_response
from shoal.protocol.framing import encode_frame_bytes
from shoal.protocol.headers import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_message_request_header_of,
)
from shoal.protocol.limits import HEADER_LENGTH_FIELD_SIZE_BYTES

_compiled = compiled_module("shoal.protocol._wire_speedups")
_PREFIX = struct.Struct(">iI")
_INT_DIGITS_MAX_COUNT = 9  # unsigned decimals this short always fit a Java int
_LONG_DIGITS_MAX_COUNT = 18  # ... a Java long
_V2_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
_JSON_WORD = int(SerializeType.JSON) << 24
# The JSON header of a send's success (fastjson's bean order, as framing.encode_json_header writes
# it); msgId is hex and the numbers are ints, so only the region needs quoting (done once).
_OK_TEMPLATE = (
    '{"code":0,"extFields":{"msgId":"%s","queueId":"%d","queueOffset":"%d","MSG_REGION":%s,"TRACE_ON":"%s"},'
    '"flag":1,"language":"'
    + DEFAULT_LANGUAGE.name
    + '","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
    + str(int(CURRENT_VERSION))
    + "}"
)


def send_header_of(code: int, ext_fields: Mapping[str, str]) -> SendMessageRequestHeader:
    """`headers.send_message_request_header_of`, quicker for the V2 letters a client sends."""
    if code not in _V2_CODES:
        return send_message_request_header_of(code, ext_fields)
    get = ext_fields.get
    group, topic, default_topic, born = get("a"), get("b"), get("c"), lane_long(get("g"))
    queue_nums, queue_id, sys_flag, flag = (
        lane_int(get("d")),
        lane_int(get("e")),
        lane_int(get("f")),
        lane_int(get("h")),
    )
    reconsume_text, max_reconsume_text = get("j"), get("l")
    reconsume, max_reconsume = lane_int(reconsume_text), lane_int(max_reconsume_text)
    if (
        group is None
        or topic is None
        or default_topic is None
        or queue_nums is None
        or queue_id is None
        or sys_flag is None
        or flag is None
        or born is None
        or (reconsume is None and reconsume_text is not None)
        or (max_reconsume is None and max_reconsume_text is not None)
    ):
        return send_message_request_header_of(code, ext_fields)  # errors and unusual numbers
    unit_mode, batch = get("k"), get("m")
    return SendMessageRequestHeader(
        producer_group=group,
        topic=topic,
        default_topic=default_topic,
        default_topic_queue_nums=queue_nums,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp_ms=born,
        flag=flag,
        properties=get("i"),
        reconsume_times=reconsume,
        unit_mode=unit_mode is not None and _is_true(unit_mode),
        max_reconsume_times=max_reconsume,
        batch=batch is not None and _is_true(batch),
        bname=get("n"),
    )


def lane_int(text: str | None) -> int | None:
    """`text` as an int when it is a plain decimal that certainly fits a Java int, else None (then
    the general reader decides: a missing field, a sign, an overflow)."""
    if text is not None and text.isdigit() and text.isascii() and len(text) <= _INT_DIGITS_MAX_COUNT:
        return int(text)
    return None


def lane_long(text: str | None) -> int | None:
    """`lane_int` for a Java long field."""
    if text is not None and text.isdigit() and text.isascii() and len(text) <= _LONG_DIGITS_MAX_COUNT:
        return int(text)
    return None


PlainSend = tuple[str, int, int, int, int, int, bytes | None, bool]
"""`plain_send`'s answer: topic, queueId, sysFlag, flag, bornTimestamp, reconsumeTimes, the property
string as stored (None: not in the usual form, cut it with `general_stored_properties`) and whether
the producer waits for durability."""


def python_plain_send(ext_fields: Mapping[str, str], cluster: str, refused: tuple[str, ...]) -> PlainSend | None:
    """The fields of a SEND_MESSAGE_V2 of the plain kind; None for any other, which the general
    reader then judges: a missing or unusual number (`lane_int`), a batch, a property string
    holding one of the `refused` markers (the broker's delay, timer and transaction properties)
    or not encodable as UTF-8. What it takes, the general reader would read the same way."""
    get = ext_fields.get
    topic = get("b")
    queue_id, sys_flag, flag = lane_int(get("e")), lane_int(get("f")), lane_int(get("h"))
    born, reconsume_text, batch = lane_long(get("g")), get("j"), get("m")
    reconsume = 0 if reconsume_text is None else lane_int(reconsume_text)
    properties = get("i") or ""
    if (
        topic is None
        or queue_id is None
        or sys_flag is None
        or flag is None
        or born is None
        or reconsume is None
        or (batch is not None and batch != "false")
        or "a" not in ext_fields
        or "c" not in ext_fields
        or lane_int(get("d")) is None
        or any(marker in properties for marker in refused)
    ):
        return None
    try:
        properties.encode("utf-8")
    except UnicodeEncodeError:
        return None
    usual = usual_stored_properties(properties, cluster)
    stored, wait = usual if usual is not None else (None, True)
    return topic, queue_id, sys_flag, flag, born, reconsume, stored, wait


def plain_send(ext_fields: Mapping[str, str], cluster: str, refused: tuple[str, ...]) -> PlainSend | None:
    """`python_plain_send`, in C where it was built (for a dict of extFields, as decoders make)."""
    if _compiled is not None and type(ext_fields) is dict:
        answer: PlainSend | None = _compiled.plain_send(ext_fields, cluster, refused)
        return answer
    return python_plain_send(ext_fields, cluster, refused)


def stored_properties(properties: str | None, cluster: str) -> tuple[bytes, bool]:
    """The property string as stored (WAIT removed, CLUSTER added) and whether to wait for a flush."""
    usual = usual_stored_properties(properties or "", cluster)
    return usual if usual is not None else general_stored_properties(properties, cluster)


def usual_stored_properties(text: str, cluster: str) -> tuple[bytes, bool] | None:
    """`stored_properties` of a client's usual string (one WAIT segment, no CLUSTER, no empty
    segment but a trailing one), cut with two finds; None for any other. For the usual string it
    gives what `general_stored_properties` gives (tests/protocol/test_send_frames.py holds it to it)."""
    at = text.find(_WAIT_MARKER)
    if (
        at < 0
        or (at > 0 and text[at - 1] != PROPERTY_SEPARATOR)
        or text.find(_WAIT_MARKER, at + 1) >= 0
        or _CLUSTER_MARKER in text
        or _EMPTY_SEGMENT in text
        or text.startswith(PROPERTY_SEPARATOR)
    ):
        return None
    end = text.find(PROPERTY_SEPARATOR, at)
    if end < 0:
        wait_value, rest = text[at + len(_WAIT_MARKER) :], text[:at]
    else:
        wait_value, rest = text[at + len(_WAIT_MARKER) : end], text[:at] + text[end + 1 :]
    if rest.endswith(PROPERTY_SEPARATOR):
        rest = rest[:-1]
    segment = _CLUSTER_MARKER + cluster
    stored = rest + PROPERTY_SEPARATOR + segment if rest else segment
    return stored.encode("utf-8"), not wait_value or wait_value.lower() != "false"


def general_stored_properties(properties: str | None, cluster: str) -> tuple[bytes, bool]:
    """`stored_properties` for any property string."""
    text, wait_value = pop_property(properties or "", WAIT_STORE_MSG_OK)
    wait = wait_value is None or wait_value.lower() != "false"
    return set_property(text, CLUSTER, cluster).encode("utf-8"), wait


_WAIT_MARKER = WAIT_STORE_MSG_OK + NAME_VALUE_SEPARATOR
_CLUSTER_MARKER = CLUSTER + NAME_VALUE_SEPARATOR
_EMPTY_SEGMENT = PROPERTY_SEPARATOR + PROPERTY_SEPARATOR


def _is_true(text: str) -> bool:
    return text == "true" or text.lower() in ("true", "1")


def _quoted_region(region: str) -> str:
    """`region` as a JSON string literal, made once per region (a broker has one)."""
    quoted = _QUOTED_REGIONS.get(region)
    if quoted is None:
        quoted = encode_basestring(region)
        if len(_QUOTED_REGIONS) < _QUOTED_REGIONS_MAX_COUNT:
            _QUOTED_REGIONS[region] = quoted
    return quoted


_QUOTED_REGIONS: dict[str, str] = {}
_QUOTED_REGIONS_MAX_COUNT = 16  # regionId is one per broker; a bound all the same


def send_ok_frame(
    request: RemotingCommand, msg_id: str, queue_id: int, queue_offset: int, region: str, trace_on: bool
) -> bytes:
    """The whole frame answering `request` with SUCCESS and the send response header, for a JSON
    request (`msg_id` hex digits and commas, as the store makes it); any other serialize type goes
    the general way."""
    if request.serialize_type is not SerializeType.JSON:
        header = SendMessageResponseHeader(
            msg_id=msg_id, queue_id=queue_id, queue_offset=queue_offset, msg_region=region, trace_on=trace_on
        )
        return encode_frame_bytes(make_response(request, 0, None, ext_fields=header.to_ext_fields()))
    header_bytes = (
        _OK_TEMPLATE
        % (msg_id, queue_id, queue_offset, _quoted_region(region), "true" if trace_on else "false", request.opaque)
    ).encode()
    size = len(header_bytes)
    return _PREFIX.pack(HEADER_LENGTH_FIELD_SIZE_BYTES + size, _JSON_WORD | size) + header_bytes


def single_send_ok_frame(
    request: RemotingCommand,
    host_hex: str,
    commitlog_offset: int,
    queue_id: int,
    queue_offset: int,
    region: str,
    trace_on: bool,
) -> bytes:
    """`send_ok_frame` for one message, its msgId the offset id of the store host's upper-case hex
    and its CommitLog offset; in C where it was built (the bytes are the same)."""
    if _compiled is not None and request.serialize_type is SerializeType.JSON:
        frame: bytes = _compiled.send_ok_frame(
            host_hex,
            commitlog_offset,
            queue_id,
            queue_offset,
            _quoted_region(region),
            trace_on,
            request.opaque,
            _LANGUAGE_NAME,
            _VERSION,
        )
        return frame
    msg_id = offset_msg_id_of_hex(host_hex, commitlog_offset)
    return send_ok_frame(request, msg_id, queue_id, queue_offset, region, trace_on)


_LANGUAGE_NAME = DEFAULT_LANGUAGE.name
_VERSION = int(CURRENT_VERSION)
