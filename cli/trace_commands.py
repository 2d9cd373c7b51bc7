"""`shoal trace`: read a message-trace topic and print its records, decoded.

Clients with `enableMsgTrace=true` write Pub / SubBefore / SubAfter / EndTransaction records into
RMQ_SYS_TRACE_TOPIC (or a custom trace topic); `shoal.formats.trace` decodes them. The command
reads every queue of the topic from its first offset to its last with a pull consumer (no group
offset is committed) and prints one JSON line per record.
"""

from __future__ import annotations

import dataclasses
import json
import uuid

import click

from shoal.cli.client_commands import NAMESRV_OPTION
from shoal.client import BlockingPullConsumer, MQClientError
from shoal.client.pull import PullStatus
from shoal.formats.errors import TraceDataError
from shoal.formats.topics import TRACE_TOPIC
from shoal.formats.trace import TraceRecord, decode_trace_data

PULL_BATCH_MAX_COUNT = 32  # messages per pull
GROUP_PREFIX = "shoal_trace_reader_"  # a fresh group each run: its offsets are never committed


def record_json(record: TraceRecord, trace_msg_id: str) -> str:
    """One record as a JSON line: its non-None fields (camelCase as RocketMQ names them) and the id
    of the trace message that carried it."""
    names = {
        "trace_type": "traceType",
        "msg_id": "msgId",
        "timestamp_ms": "timeStamp",
        "region_id": "regionId",
        "group": "groupName",
        "body_length_bytes": "bodyLength",
        "cost_time_ms": "costTime",
        "msg_type": "msgType",
        "offset_msg_id": "offsetMsgId",
        "store_host": "storeHost",
        "client_host": "clientHost",
        "request_id": "requestId",
        "retry_times": "retryTimes",
        "context_code": "contextCode",
        "transaction_id": "transactionId",
        "transaction_state": "transactionState",
        "from_transaction_check": "fromTransactionCheck",
    }
    line: dict[str, object] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if value is not None:
            line[names.get(field.name, field.name)] = value.value if field.name == "trace_type" else value
    line["traceMessageId"] = trace_msg_id
    return json.dumps(line)


def _matches(record: TraceRecord, msg_ids: tuple[str, ...], keys: tuple[str, ...]) -> bool:
    if msg_ids and record.msg_id not in msg_ids and record.offset_msg_id not in msg_ids:
        return False
    return not keys or bool(set(keys) & set(record.keys.split()))


@click.command()
@NAMESRV_OPTION
@click.option("--topic", default=TRACE_TOPIC, show_default=True, help="The trace topic (msgTraceTopicName).")
@click.option("--msg-id", "msg_ids", multiple=True, help="Only records of this message id (repeatable).")
@click.option("--key", "keys", multiple=True, help="Only records of messages with this key (repeatable).")
def trace(namesrv_addr: str, topic: str, msg_ids: tuple[str, ...], keys: tuple[str, ...]) -> None:
    """Print the message-trace records in TOPIC as JSON lines (Pub, SubBefore, SubAfter, EndTransaction)."""
    consumer = BlockingPullConsumer(GROUP_PREFIX + uuid.uuid4().hex[:12], namesrv_addr)
    printed = undecodable = 0
    try:
        consumer.start()
        for queue in consumer.fetch_message_queues(topic):
            offset, end = consumer.min_offset(queue), consumer.max_offset(queue)
            while offset < end:
                result = consumer.pull(queue, "*", offset, PULL_BATCH_MAX_COUNT)
                if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
                    break
                for message in result.messages:
                    try:
                        records = decode_trace_data(message.body)
                    except TraceDataError as error:
                        undecodable += 1
                        click.echo(f"message {message.msg_id} in {topic}: {error}", err=True)
                        continue
                    for record in records:
                        if _matches(record, msg_ids, keys):
                            click.echo(record_json(record, message.msg_id))
                            printed += 1
                offset = result.next_begin_offset
    except MQClientError as error:
        raise click.ClickException(str(error)) from None
    finally:
        consumer.shutdown()
    click.echo(
        f"{printed} trace record(s) from {topic}" + (f", {undecodable} undecodable" if undecodable else ""), err=True
    )
