"""Typed custom headers <-> extFields (spec §8.5, §8.8, §8.10; real-clients.md §1.3, §1.5)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from shoal.protocol import (
    REQUEST_HEADER_OF_CODE,
    ConsumerSendMsgBackRequestHeader,
    CustomHeader,
    EncodeError,
    EndTransactionRequestHeader,
    HeaderFieldError,
    PullMessageRequestHeader,
    QueryConsumerOffsetResponseHeader,
    RegisterBrokerRequestHeader,
    RequestCode,
    ResponseCode,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    decode_frame,
    encode_frame_bytes,
    make_request,
    response_code_of_error,
    send_message_request_header_of,
)
from shoal.protocol import headers as headers_module
from shoal.protocol.framing import decode_json_header
from shoal.protocol.headers import BOOLEAN, INT, LONG, STRING, JavaType

ALL_HEADER_CLASSES = [
    cls
    for _, cls in inspect.getmembers(headers_module, inspect.isclass)
    if issubclass(cls, CustomHeader) and cls is not CustomHeader
]

_SAMPLES: dict[JavaType, object] = {STRING: "värde", INT: -(2**31), LONG: 2**63 - 1, BOOLEAN: True}


def _sample(cls: type[CustomHeader], with_optional: bool) -> CustomHeader:
    """An instance with extreme values in every required (and optionally every optional) field."""
    values = {spec.attribute: _SAMPLES[spec.java_type] for spec in cls.field_specs() if spec.required or with_optional}
    return cls(**values)


@pytest.mark.parametrize("cls", ALL_HEADER_CLASSES, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("with_optional", [False, True])
def test_every_header_round_trips_through_ext_fields(cls: type[CustomHeader], with_optional: bool) -> None:
    """Goal: to/from extFields are inverse. Method: extreme values per Java type, with/without optionals."""
    header = _sample(cls, with_optional)
    ext_fields = header.to_ext_fields()
    assert all(type(value) is str for value in ext_fields.values())
    assert cls.from_ext_fields(ext_fields) == header


@pytest.mark.parametrize("cls", ALL_HEADER_CLASSES, ids=lambda cls: cls.__name__)
def test_every_header_declares_java_metadata_on_every_field(cls: type[CustomHeader]) -> None:
    """Goal: the generic mechanism covers all fields. Method: specs match dataclass fields one to one."""
    declared = [item.name for item in dataclasses.fields(cls)]  # type: ignore[arg-type]
    assert [spec.attribute for spec in cls.field_specs()] == declared
    java_names = [spec.java_name for spec in cls.field_specs()]
    assert len(set(java_names)) == len(java_names)


def test_missing_required_field_names_it() -> None:
    """Goal: Java's "the custom field <x> is null". Method: drop queueId from a pull header."""
    ext_fields = _sample(PullMessageRequestHeader, False).to_ext_fields()
    del ext_fields["queueId"]
    with pytest.raises(HeaderFieldError, match="<queueId> is null") as caught:
        PullMessageRequestHeader.from_ext_fields(ext_fields)
    assert caught.value.field == "queueId"
    assert response_code_of_error(caught.value) is ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("bad", ["", "x", "1.0", " 1", "2147483648", "-2147483649", "1_0", "0x1"])
def test_invalid_int_field_names_it(bad: str) -> None:
    """Goal: Integer.parseInt rules with range. Method: bad queueId spellings."""
    ext_fields = {"consumerGroup": "g", "topic": "t", "queueId": bad}
    with pytest.raises(HeaderFieldError, match="queueId") as caught:
        headers_module.QueryConsumerOffsetRequestHeader.from_ext_fields(ext_fields)
    assert caught.value.field == "queueId"


def test_long_fields_accept_the_full_java_range_only() -> None:
    """Goal: Long.parseLong range. Method: min/max long accepted, one beyond refused."""
    assert QueryConsumerOffsetResponseHeader.from_ext_fields({"offset": "-9223372036854775808"}).offset == -(2**63)
    with pytest.raises(HeaderFieldError, match="offset"):
        QueryConsumerOffsetResponseHeader.from_ext_fields({"offset": "9223372036854775808"})


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("TRUE", True), ("1", True), ("false", False),
                                               ("0", False), ("yes", False), ("", False)])  # fmt: skip
def test_booleans_follow_parse_boolean_plus_the_cpp_one(raw: str, expected: bool) -> None:
    """Goal: Boolean.parseBoolean, plus "1" from the C++ client. Method: parse `batch` spellings."""
    ext_fields = _sample(SendMessageRequestHeader, False).to_ext_fields() | {"batch": raw}
    assert SendMessageRequestHeader.from_ext_fields(ext_fields).batch is expected


def test_to_ext_fields_omits_none_and_writes_java_strings() -> None:
    """Goal: Java's toString() form. Method: encode a header with None and booleans."""
    header = ConsumerSendMsgBackRequestHeader(offset=371, group="CID_push", delay_level=0)
    assert header.to_ext_fields() == {"offset": "371", "group": "CID_push", "delayLevel": "0", "unitMode": "false"}


def test_to_ext_fields_refuses_values_outside_the_java_type() -> None:
    """Goal: never send what Java cannot parse. Method: a queue id beyond int, a bool as long."""
    with pytest.raises(EncodeError, match="queue_id"):
        headers_module.GetMaxOffsetRequestHeader(topic="t", queue_id=2**31).to_ext_fields()
    with pytest.raises(EncodeError, match="offset"):
        QueryConsumerOffsetResponseHeader(offset=True).to_ext_fields()


def test_cpp_send_message_request_parses() -> None:
    """Goal: the captured C++ SEND_MESSAGE works. Method: decode its JSON header, parse the header."""
    header_json = (
        '{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"jxWNuE0o8QycInWGIjSUPU/FlRU=",'
        '"batch":"0","bornTimestamp":"1795300479356","defaultTopic":"TBW102","defaultTopicQueueNums":4,"flag":0,'
        '"producerGroup":"PID_probe","properties":"KEYS\\u0001key1 key2\\u0002TAGS\\u0001TagA\\u0002",'
        '"queueId":0,"reconsumeTimes":"0","sysFlag":0,"topic":"TopicTest","unitMode":"0"},'
        '"flag":0,"language":"CPP","opaque":5,"remark":"","version":63}'
    )
    command = decode_json_header(header_json.encode())
    header = send_message_request_header_of(command.code, command.ext_fields)
    assert header == SendMessageRequestHeader(
        producer_group="PID_probe",
        topic="TopicTest",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=1795300479356,
        flag=0,
        properties="KEYS\x01key1 key2\x02TAGS\x01TagA\x02",
        reconsume_times=0,
        unit_mode=False,
        batch=False,
    )
    batch = SendMessageRequestHeader.from_ext_fields(command.ext_fields | {"batch": "1"})
    assert batch.batch is True


def test_cpp_pull_request_parses() -> None:
    """Goal: the captured C++ PULL_MESSAGE works. Method: normalised ext fields from real-clients §1.5."""
    ext_fields = {
        "commitOffset": "2", "consumerGroup": "CID_push", "maxMsgNums": "32", "queueId": "0",
        "queueOffset": "2", "subVersion": "1795300493320", "subscription": "TagA || TagB",
        "suspendTimeoutMillis": "15000", "sysFlag": "7", "topic": "TopicTest",
        "AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "x",
    }  # fmt: skip
    header = PullMessageRequestHeader.from_ext_fields(ext_fields)
    assert (header.queue_offset, header.sys_flag, header.suspend_timeout_ms) == (2, 7, 15000)
    assert header.expression_type is None


def test_send_v2_letters_convert_to_v1_and_back() -> None:
    """Goal: V2 a..n <-> V1 names. Method: convert a full header both ways, check the letters."""
    v1 = _sample(SendMessageRequestHeader, True)
    assert isinstance(v1, SendMessageRequestHeader)
    v2 = v1.to_v2()
    assert v2.to_v1() == v1
    assert sorted(v2.to_ext_fields()) == list("abcdefghijklmn")
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2):
        assert send_message_request_header_of(code, v2.to_ext_fields()) == v1
    assert send_message_request_header_of(RequestCode.SEND_MESSAGE, v1.to_ext_fields()) == v1


def test_java_v2_send_frame_decodes_to_a_send_header() -> None:
    """Goal: a Java SEND_MESSAGE_V2 request end to end. Method: frame -> command -> V1 header."""
    v2 = SendMessageRequestHeaderV2(
        producer_group="pg", topic="TopicTest", default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=3, sys_flag=0, born_timestamp_ms=1700000000000, flag=0,
        properties="UNIQ_KEY\x017F0000010E1F18B4AAC2A4B0F2270000\x02WAIT\x01true\x02TAGS\x01TagA\x02",
        reconsume_times=0, unit_mode=False, max_reconsume_times=16, batch=False,
    )  # fmt: skip
    request = make_request(RequestCode.SEND_MESSAGE_V2, opaque=7, ext_fields=v2.to_ext_fields(), body=b"Hello")
    command = decode_frame(encode_frame_bytes(request))
    header = send_message_request_header_of(command.code, command.ext_fields)
    assert (header.topic, header.queue_id, header.max_reconsume_times) == ("TopicTest", 3, 16)


def test_send_response_header_carries_region_and_trace_fields() -> None:
    """Goal: MSG_REGION / TRACE_ON travel with the send response. Method: encode and inspect."""
    header = SendMessageResponseHeader(
        msg_id="C0A8010A00002A9F0000000000000000", queue_id=0, queue_offset=0, msg_region="DefaultRegion", trace_on=True
    )
    assert header.to_ext_fields() == {
        "msgId": "C0A8010A00002A9F0000000000000000",
        "queueId": "0",
        "queueOffset": "0",
        "MSG_REGION": "DefaultRegion",
        "TRACE_ON": "true",
    }


def test_register_broker_defaults_match_java_primitives() -> None:
    """Goal: missing `compressed`/`bodyCrc32` read as Java's defaults. Method: parse without them."""
    header = RegisterBrokerRequestHeader.from_ext_fields(
        {"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911", "clusterName": "DefaultCluster",
         "haServerAddr": "10.0.0.1:10912", "brokerId": "0"}
    )  # fmt: skip
    assert (header.compressed, header.body_crc32, header.broker_id) == (False, 0, 0)


def test_end_transaction_from_cpp_uses_zero_one_booleans() -> None:
    """Goal: C++ END_TRANSACTION spellings (real-clients §1.3). Method: fromTransactionCheck "1"."""
    header = EndTransactionRequestHeader.from_ext_fields(
        {"producerGroup": "pg", "tranStateTableOffset": "5", "commitLogOffset": "1024", "commitOrRollback": "8",
         "fromTransactionCheck": "1", "msgId": "ID", "transactionId": "ID"}
    )  # fmt: skip
    assert header.from_transaction_check is True
    assert header.commit_or_rollback == 8


def test_request_header_table_points_at_request_headers() -> None:
    """Goal: the code -> header table is consistent. Method: every entry is a *RequestHeader* class."""
    for code, cls in REQUEST_HEADER_OF_CODE.items():
        assert isinstance(code, RequestCode)
        assert "RequestHeader" in cls.__name__, code
