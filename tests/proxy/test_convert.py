"""The proxy's pure conversions: receipt handles, v2 messages to SEND_MESSAGE_V2 fields, stored
messages back to v2 messages."""

from __future__ import annotations

import zlib

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from shoal.client.message import MessageExt
from shoal.formats.properties import decode_properties
from shoal.protocol.headers import SendMessageRequestHeaderV2
from shoal.protocol.v2 import definition_pb2 as v2
from shoal.proxy.convert import Receipt, decode_receipt, delivered, encode_receipt, send_request, timestamp_ms
from shoal.proxy.errors import ProxyError

NOW_MS = 1_800_000_000_000


def message(**system: object) -> v2.Message:
    built = v2.Message(body=b"payload")
    built.topic.name = "T"
    for name, value in system.items():
        if name == "keys":
            built.system_properties.keys.extend(value)  # type: ignore[arg-type]
        elif name == "delivery_timestamp":
            built.system_properties.delivery_timestamp.CopyFrom(value)  # type: ignore[arg-type]
        else:
            setattr(built.system_properties, name, value)
    return built


def sent_properties(built: v2.Message) -> tuple[SendMessageRequestHeaderV2, dict[str, str]]:
    fields, body = send_request(built, 3, "PID", NOW_MS)
    assert body == b"payload"
    header = SendMessageRequestHeaderV2.from_ext_fields(fields)
    return header, decode_properties((header.properties or "").encode())


def test_receipts_round_trip_and_a_broker_name_may_hold_the_separator() -> None:
    receipt = Receipt("broker a", "Topic", 2, 41, 1_700_000_000_123, 30_000, 987_654)
    assert decode_receipt(encode_receipt(receipt)) == receipt
    assert receipt.extra_info().split(" ")[1] == "1700000000123"  # the broker reads the pop time there


@pytest.mark.parametrize("text", ["", "garbage", "s1 x 1 2 3 4 T b", "s0 1 2 3 4 5 T b"])
def test_a_receipt_this_proxy_did_not_write_is_refused(text: str) -> None:
    with pytest.raises(ProxyError) as refused:
        decode_receipt(text)
    assert refused.value.code == v2.INVALID_RECEIPT_HANDLE


def test_a_normal_message_keeps_its_tag_keys_id_and_user_properties() -> None:
    built = message(tag="TagA", keys=["k1", "k2"], message_id="01ABC", message_type=v2.NORMAL)
    built.user_properties["color"] = "blue"
    header, properties = sent_properties(built)
    assert (header.topic, header.queue_id, header.producer_group) == ("T", 3, "PID")
    assert properties == {"color": "blue", "TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "01ABC"}


def test_fifo_and_delay_map_to_rocketmq_5_properties() -> None:
    _, fifo = sent_properties(message(message_group="orders-7", message_type=v2.FIFO))
    assert fifo["__SHARDINGKEY"] == "orders-7"
    at = Timestamp()
    at.FromMilliseconds(NOW_MS + 5_000)
    _, delayed = sent_properties(message(delivery_timestamp=at, message_type=v2.DELAY))
    assert delayed["TIMER_DELIVER_MS"] == str(NOW_MS + 5_000)


def test_a_delivery_time_written_in_milliseconds_as_seconds_is_read_as_milliseconds() -> None:
    """rocketmq-python-client 5.1.2 puts milliseconds in Timestamp.seconds."""
    assert timestamp_ms(Timestamp(seconds=NOW_MS)) == NOW_MS
    assert timestamp_ms(Timestamp(seconds=1_800_000_000, nanos=5_000_000)) == 1_800_000_000_005


@pytest.mark.parametrize(
    ("system", "code"),
    [
        ({"message_group": "g", "message_type": v2.NORMAL}, v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        ({"message_type": v2.FIFO}, v2.ILLEGAL_MESSAGE_GROUP),
        ({"message_type": v2.DELAY}, v2.ILLEGAL_DELIVERY_TIME),
        ({"tag": "a|b"}, v2.ILLEGAL_MESSAGE_TAG),
        ({"keys": ["has space"]}, v2.ILLEGAL_MESSAGE_KEY),
    ],
)
def test_inconsistent_messages_get_the_v2_code_that_says_why(system: dict[str, object], code: int) -> None:
    with pytest.raises(ProxyError) as refused:
        send_request(message(**system), 0, "PID", NOW_MS)
    assert refused.value.code == code


def test_a_user_property_may_not_use_a_system_name() -> None:
    built = message()
    built.user_properties["TAGS"] = "sneaky"
    with pytest.raises(ProxyError) as refused:
        send_request(built, 0, "PID", NOW_MS)
    assert refused.value.code == v2.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_a_body_over_the_limit_is_refused_before_any_broker_sees_it() -> None:
    built = message()
    built.body = b"x" * (4 * 1024 * 1024 + 1)
    with pytest.raises(ProxyError) as refused:
        send_request(built, 0, "PID", NOW_MS)
    assert refused.value.code == v2.MESSAGE_BODY_TOO_LARGE


def test_a_stored_message_is_delivered_with_its_lease_and_digest() -> None:
    ext = MessageExt(topic="T", body=b"hello")
    ext.properties = {
        "TAGS": "TagA",
        "KEYS": "a b",
        "UNIQ_KEY": "01XYZ",
        "__SHARDINGKEY": "g1",
        "mine": "1",
        "WAIT": "true",
    }
    ext.queue_id, ext.queue_offset, ext.commitlog_offset = 1, 7, 4096
    ext.born_timestamp_ms, ext.store_timestamp_ms = NOW_MS, NOW_MS + 1
    ext.born_host, ext.store_host = "10.0.0.1:5000", "10.0.0.2:10911"
    receipt = Receipt("broker-a", "T", 1, 7, NOW_MS + 2, 15_000, 4096)
    out = delivered(ext, receipt, 3, "ns")
    system = out.system_properties
    assert (out.topic.name, out.topic.resource_namespace, out.body) == ("T", "ns", b"hello")
    assert dict(out.user_properties) == {"mine": "1"}
    assert (system.tag, list(system.keys), system.message_id) == ("TagA", ["a", "b"], "01XYZ")
    assert (system.message_type, system.message_group) == (v2.FIFO, "g1")
    assert (system.delivery_attempt, system.queue_offset, system.born_host) == (3, 7, "10.0.0.1")
    assert system.body_encoding == v2.IDENTITY
    assert system.body_digest.checksum == f"{zlib.crc32(b'hello'):08X}"
    assert decode_receipt(system.receipt_handle) == receipt
