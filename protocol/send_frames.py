"""The send path's frames without the general machinery: the hot request of a broker, read and
answered in a few steps instead of through typed headers and `RemotingCommand`s.

* `send_header_of` reads a send request's extFields straight into `SendMessageRequestHeader`:
  the V2 letters (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE) written out field by field, falling back to
  the general reader (`shoal.protocol.headers`) for anything it does not take at a glance, so its
  answers and errors are the general reader's.
* `send_ok_frame` writes a successful send's whole response frame (prefix and JSON header) from a
  template: the bytes `encode_frame(make_response(...))` would write, at a fraction of the cost.

`tests/protocol/test_send_frames.py` holds both to the general path byte for byte.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from json.encoder import encode_basestring

from shoal.protocol.codes import CURRENT_VERSION, RequestCode, SerializeType
from shoal.protocol.command import DEFAULT_LANGUAGE, RemotingCommand, make_response
from shoal.protocol.framing import encode_frame_bytes
from shoal.protocol.headers import (
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    send_message_request_header_of,
)
from shoal.protocol.limits import HEADER_LENGTH_FIELD_SIZE_BYTES

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
