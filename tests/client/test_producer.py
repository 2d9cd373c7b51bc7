"""Producer pure parts: send-response mapping, queue choice, request preparation (spec §1.10, §1.11, §8.8)."""

from __future__ import annotations

import zlib
from collections import Counter

import pytest

from shoal.client.errors import ClientStateError, InvalidMessageError, MQBrokerError, NoWritableQueueError
from shoal.client.fault import LatencyFaultTolerance, not_available_duration_ms
from shoal.client.message import Message, encode_properties
from shoal.client.producer import (
    Producer,
    QueueRotation,
    SendStatus,
    java_hash_code,
    prepare_batch,
    prepare_message,
    select_by_hash,
    select_by_random,
    send_header,
    send_result_of,
)
from shoal.client.route import TopicPublishInfo
from shoal.client.settings import ProducerSettings
from shoal.formats.properties import decode_properties
from shoal.protocol import (
    MessageQueue,
    RequestCode,
    ResponseCode,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
    make_request,
)
from shoal.protocol.command import RemotingCommand
from shoal.protocol.errors import ProtocolError

MQ = MessageQueue("TopicTest", "broker-a", 3)
SETTINGS = ProducerSettings()


def response(code: int, ext_fields: dict[str, str] | None = None, remark: str | None = None) -> RemotingCommand:
    command = make_request(code, opaque=1, ext_fields=ext_fields, remark=remark)
    command.flag = 1
    return command


OK_FIELDS = {"msgId": "C0A8010A00002A9F0000000000000000", "queueId": "1", "queueOffset": "42", "MSG_REGION": "x"}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, SendStatus.SEND_OK),
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_stored_outcomes_map_to_send_statuses(code: int, status: SendStatus) -> None:
    """Goal: processSendResponse's four stored outcomes. Method: a response per code."""
    result = send_result_of(response(code, OK_FIELDS), MQ, "UNIQ", "b:1")
    assert result.status is status
    assert result.msg_id == "UNIQ"
    assert result.offset_msg_id == OK_FIELDS["msgId"]
    assert result.message_queue == MessageQueue("TopicTest", "broker-a", 1)  # the broker's queue id
    assert result.queue_offset == 42


@pytest.mark.parametrize("code", [1, 2, 13, 14, 16, 17, 26, 215])
def test_other_codes_raise_broker_errors(code: int) -> None:
    """Goal: failures raise MQBrokerError with code and remark. Method: error responses."""
    with pytest.raises(MQBrokerError) as caught:
        send_result_of(response(code, remark="nope"), MQ, "UNIQ", "b:1")
    assert caught.value.code == code
    assert caught.value.remark == "nope"
    assert caught.value.address == "b:1"


def test_success_without_header_fields_is_a_broker_error() -> None:
    """Goal: an unreadable success is not silently accepted. Method: SUCCESS with no extFields."""
    with pytest.raises(MQBrokerError, match="unreadable"):
        send_result_of(response(ResponseCode.SUCCESS), MQ, "UNIQ", "b:1")


@pytest.mark.parametrize(
    "fields",
    [
        {**OK_FIELDS, "queueOffset": "-1"},
        {**OK_FIELDS, "queueId": "\uff11"},  # a non-ASCII digit
        {**OK_FIELDS, "queueId": "99999999999"},
        {**OK_FIELDS, "queueOffset": "x"},
    ],
)
def test_send_responses_outside_the_fast_path_use_the_header_declaration(fields: dict[str, str]) -> None:
    """Goal: the direct read of a send response agrees with the declared header on odd values.
    Method: negative, non-ASCII, out-of-range and non-numeric fields: parsed or refused as declared."""
    try:
        expected = SendMessageResponseHeader.from_ext_fields(fields)
    except ProtocolError:
        with pytest.raises(MQBrokerError, match="unreadable"):
            send_result_of(response(ResponseCode.SUCCESS, fields), MQ, "UNIQ", "b:1")
        return
    result = send_result_of(response(ResponseCode.SUCCESS, fields), MQ, "UNIQ", "b:1")
    assert (result.message_queue.queue_id, result.queue_offset) == (expected.queue_id, expected.queue_offset)


QUEUES = [MessageQueue("T", "a", index) for index in range(4)]


@pytest.mark.parametrize(
    ("arg", "expected"),
    [(0, 0), (5, 1), (-5, 1), (-7, 3), ("order-1", abs(java_hash_code("order-1")) % 4), (True, 1231 % 4)],
)
def test_select_by_hash_matches_java(arg: object, expected: int) -> None:
    """Goal: SelectMessageQueueByHash with Java's remainder (abs of a truncated %). Method: samples."""
    assert select_by_hash(QUEUES, Message("T", b"x"), arg).queue_id == expected


def test_java_hash_code_of_longs_folds_the_halves() -> None:
    """Goal: Long.hashCode for values outside int range. Method: 2**32 + 1 and -2**40."""
    assert java_hash_code(2**32 + 1) == 0
    assert java_hash_code(2**40) == 256
    assert java_hash_code(-1) == -1
    assert java_hash_code("TagA") == 2598919


def test_select_by_hash_is_stable_for_a_key() -> None:
    """Goal: ordered sends keep a key on one queue. Method: select the same key repeatedly."""
    chosen = {select_by_hash(QUEUES, Message("T", b"x"), "order-42") for _ in range(20)}
    assert len(chosen) == 1


def test_select_by_random_stays_within_the_queues() -> None:
    """Goal: a random queue of the list. Method: 100 picks."""
    assert {select_by_random(QUEUES, Message("T", b"x"), None) for _ in range(100)} <= set(QUEUES)


def test_rotation_is_round_robin() -> None:
    """Goal: queues are used evenly. Method: 400 selections over 4 queues."""
    rotation = QueueRotation()
    info = TopicPublishInfo("T", tuple(QUEUES))
    counts = Counter(rotation.select(info, None) for _ in range(400))
    assert set(counts.values()) == {100}


def test_rotation_avoids_the_broker_that_failed() -> None:
    """Goal: a retry goes to another broker when there is one. Method: two brokers, last = a."""
    rotation = QueueRotation()
    info = TopicPublishInfo("T", (MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0)))
    assert {rotation.select(info, "a").broker_name for _ in range(50)} == {"b"}
    single = TopicPublishInfo("T", (MessageQueue("T", "a", 0),))
    assert rotation.select(single, "a") == MessageQueue("T", "a", 0)


def test_prepare_gives_a_uniq_key_and_leaves_small_bodies_alone() -> None:
    """Goal: UNIQ_KEY in properties and result; no compression below 4096 bytes. Method: prepare."""
    message = Message("T", b"x" * 4095, tags="A")
    outgoing = prepare_message(message, SETTINGS)
    properties = decode_properties(outgoing.properties)
    assert properties["UNIQ_KEY"] == outgoing.msg_id
    assert len(outgoing.msg_id) == 32
    assert properties["TAGS"] == "A"
    assert (outgoing.sys_flag, outgoing.body) == (0, message.body)
    assert outgoing.code == RequestCode.SEND_MESSAGE_V2
    assert "UNIQ_KEY" not in message.properties  # the caller's message is not changed


@pytest.mark.parametrize("wait", [True, False])
def test_plain_messages_get_the_property_string_of_the_general_path(wait: bool) -> None:
    """Goal: the shortcut for messages without tags, keys, delay or properties writes what the
    general path writes. Method: encode the same message's wire properties with that UNIQ_KEY."""
    message = Message("T", b"body", wait_store_msg_ok=wait)
    outgoing = prepare_message(message, SETTINGS)
    assert outgoing.properties == encode_properties(message.wire_properties(outgoing.msg_id))
    assert decode_properties(outgoing.properties) == {"WAIT": str(wait).lower(), "UNIQ_KEY": outgoing.msg_id}


def test_bodies_of_4096_bytes_or_more_are_zlib_compressed() -> None:
    """Goal: compressMsgBodyOverHowmuch, zlib stream, sysFlag bit 0. Method: a 4096-byte body."""
    body = b"abcd" * 1024
    outgoing = prepare_message(Message("T", body), SETTINGS)
    assert outgoing.sys_flag & 1
    assert zlib.decompress(outgoing.body) == body


def test_retry_topic_messages_move_reconsume_fields_into_the_header() -> None:
    """Goal: RECONSUME_TIME / MAX_RECONSUME_TIMES become header fields j / l. Method: prepare + header."""
    message = Message("%RETRY%g", b"x", properties={"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "16"})
    outgoing = prepare_message(message, SETTINGS)
    assert "RECONSUME_TIME" not in decode_properties(outgoing.properties)
    fields = send_header("pg", outgoing, 2, SETTINGS)
    header = SendMessageRequestHeaderV2.from_ext_fields(fields)
    assert (header.reconsume_times, header.max_reconsume_times) == (3, 16)


def test_send_header_uses_v2_letters_and_java_defaults() -> None:
    """Goal: SendMessageRequestHeaderV2 as Java fills it. Method: read the extFields back."""
    outgoing = prepare_message(Message("TopicTest", b"hello", flag=9), SETTINGS)
    fields = send_header("pg", outgoing, 3, SETTINGS)
    assert fields["a"] == "pg"
    assert fields["b"] == "TopicTest"
    assert (fields["c"], fields["d"]) == ("TBW102", "4")
    assert (fields["e"], fields["f"], fields["h"]) == ("3", "0", "9")
    assert fields["i"] == outgoing.properties
    assert fields["m"] == "false"
    assert int(fields["g"]) > 1_600_000_000_000


def test_batches_are_never_compressed_and_join_their_ids() -> None:
    """Goal: SEND_BATCH_MESSAGE with batch=true, WAIT batch property, comma-joined ids. Method: prepare."""
    messages = [Message("T", b"y" * 5000), Message("T", b"z")]
    outgoing = prepare_batch(messages, SETTINGS)
    assert outgoing.code == RequestCode.SEND_BATCH_MESSAGE
    assert outgoing.sys_flag == 0
    assert outgoing.properties == "WAIT\x01true"
    assert len(outgoing.msg_id.split(",")) == 2
    assert send_header("pg", outgoing, 0, SETTINGS)["m"] == "true"


def test_oversized_batches_are_refused() -> None:
    """Goal: a batch body must fit maxMessageSize. Method: two bodies just under the limit."""
    settings = ProducerSettings(body_size_max_bytes=100)
    with pytest.raises(InvalidMessageError, match="batch"):
        prepare_batch([Message("T", b"x" * 60), Message("T", b"y" * 60)], settings)


def test_sending_before_start_is_refused() -> None:
    """Goal: a clear state error. Method: send on a producer never started."""
    import asyncio

    producer = Producer("pg", "127.0.0.1:1")
    with pytest.raises(ClientStateError):
        asyncio.run(producer.send(Message("T", b"x")))


def test_invalid_group_names_are_refused() -> None:
    """Goal: Validators.checkGroup. Method: a space in the group."""
    with pytest.raises(ValueError, match="group"):
        Producer("bad group", "127.0.0.1:1")


def test_fast_send_header_agrees_with_the_header_declaration() -> None:
    """Goal: the hand-built send header equals the generic encoding. Method: build both and compare."""
    from shoal.client.producer import OutgoingMessage, send_header

    settings = ProducerSettings()
    for code, max_reconsume in ((RequestCode.SEND_MESSAGE_V2, None), (RequestCode.SEND_BATCH_MESSAGE, 3)):
        outgoing = OutgoingMessage(
            topic="T",
            body=b"x",
            properties="TAGS\x01a",
            sys_flag=1,
            flag=7,
            code=code,
            reconsume_times=2,
            max_reconsume_times=max_reconsume,
            msg_id="ID",
        )
        fast = send_header("G", outgoing, 5, settings)
        generic = SendMessageRequestHeaderV2(
            producer_group="G",
            topic="T",
            default_topic=settings.default_topic,
            default_topic_queue_nums=settings.default_topic_queue_nums,
            queue_id=5,
            sys_flag=1,
            born_timestamp_ms=int(fast["g"]),
            flag=7,
            properties="TAGS\x01a",
            reconsume_times=2,
            unit_mode=False,
            max_reconsume_times=max_reconsume,
            batch=code == RequestCode.SEND_BATCH_MESSAGE,
        ).to_ext_fields()
        assert fast == generic


def test_rotation_over_no_queue_raises_a_retriable_error() -> None:
    """Goal: no bare AssertionError on a route without writable queues (issue 12, item 4).
    Method: select from an empty publish info."""
    with pytest.raises(NoWritableQueueError, match="no writable queue"):
        QueueRotation().select(TopicPublishInfo("T", ()), None)


def test_fault_strategy_skips_a_failed_broker_until_its_time_is_up() -> None:
    """Goal: MQFaultStrategy (sendLatencyFaultEnable): a failed broker is left out for 600 s, a
    550 ms answer for 30 s, and when every broker is out the least bad one is used. Method: two
    brokers, faults recorded at fixed times."""
    assert [not_available_duration_ms(ms) for ms in (0, 99, 100, 550, 999, 3000, 15000, 30000)] == [
        0,
        0,
        0,
        30000,
        30000,
        180000,
        600000,
        600000,
    ]
    rotation = QueueRotation()
    info = TopicPublishInfo("T", (MessageQueue("T", "a", 0), MessageQueue("T", "b", 0)))
    faults = LatencyFaultTolerance(enabled=True)
    faults.update("a", 0, isolation=True, now_s=0.0)
    assert {rotation.select(info, None, faults, 1.0).broker_name for _ in range(20)} == {"b"}
    assert {rotation.select(info, None, faults, 600.0).broker_name for _ in range(20)} == {"a", "b"}
    faults.update("b", 600, isolation=False, now_s=600.0)  # slow: out for 30 s; a failed again
    faults.update("a", 0, isolation=True, now_s=600.0)
    assert {rotation.select(info, None, faults, 601.0).broker_name for _ in range(20)} == {"b"}
    disabled = LatencyFaultTolerance(enabled=False)
    disabled.update("a", 0, isolation=True, now_s=0.0)
    assert disabled.is_available("a", 1.0)
