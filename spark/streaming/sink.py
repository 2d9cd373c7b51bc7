"""Rows sent to a topic: the `format("rocketmq")` writer, for streams and batch DataFrames.

Each Spark task sends its rows with one producer, `sendsInFlight` sends outstanding, and returns
once every send is acknowledged (SEND_OK; anything else fails the task, and Spark retries it). The
producer's acknowledgements are the commit: nothing is staged, so the guarantee is at least once.
A micro-batch replayed after a driver kill, or a retried task, sends its rows again; each message
carries `SPARK_ROW` = `<query id>/<batch id>/<partition>/<row>`, the same on every replay of a
deterministic query, so a consumer that must see each row once drops repeats by it.

Columns read from each row (by name, others ignored): `body` (binary or string, required),
`topic` (else the `topic` option), `tags`, `keys` (a string of space-separated keys, or an array),
`properties` (map<string,string>).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, MapType, StringType, StructType

from shoal.client import Message, Producer, SendStatus
from shoal.spark.errors import ReadOptionError, ShoalSparkError
from shoal.spark.streaming.cluster import client_settings
from shoal.spark.streaming.options import WriteOptions

__all__ = ["ROW_PROPERTY", "SentRows", "TopicBatchWriter", "TopicStreamWriter", "row_message"]

ROW_PROPERTY = "SPARK_ROW"
"""The user property naming a message's row: `<query id>/<batch id>/<partition>/<row>`."""
_QUERY_ID_KEY = "sql.streaming.queryId"
_BATCH_ID_KEY = "streaming.sql.batchId"
"""Spark's local properties for the running streaming query and micro-batch (StreamExecution)."""


@dataclass
class SentRows(WriterCommitMessage):
    """What one task sent: its partition and how many messages the brokers acknowledged."""

    partition: int
    sent: int


def check_schema(schema: StructType, options: WriteOptions) -> None:
    """Refuse a DataFrame the sink cannot send, before any task runs."""
    fields = {field.name: field.dataType for field in schema.fields}
    if "body" not in fields or not isinstance(fields["body"], BinaryType | StringType):
        raise ReadOptionError("the rocketmq sink needs a `body` column (binary or string)")
    if "topic" not in fields and options.topic is None:
        raise ReadOptionError('rows have no `topic` column: set .option("topic", ...)')
    if "properties" in fields and not isinstance(fields["properties"], MapType):
        raise ReadOptionError("`properties` must be a map<string,string>")


def row_message(row: Row, default_topic: str | None, row_id: str) -> Message:
    """The message one row becomes."""
    values = row.asDict()
    topic = values.get("topic") or default_topic
    if not topic:
        raise ShoalSparkError(f"row {row_id} has no topic and the sink has no topic option")
    body = values.get("body")
    if body is None:
        raise ShoalSparkError(f"row {row_id} has a null body")
    keys = values.get("keys") or ()
    properties = {str(key): str(value) for key, value in (values.get("properties") or {}).items()}
    properties[ROW_PROPERTY] = row_id
    return Message(
        topic=str(topic),
        body=body.encode() if isinstance(body, str) else bytes(body),
        tags=values.get("tags") or None,
        keys=keys if isinstance(keys, str) else tuple(str(key) for key in keys),
        properties=properties,
    )


class _Sender:
    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options

    def send_rows(self, rows: Iterator[Row]) -> SentRows:
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        query = (context.getLocalProperty(_QUERY_ID_KEY) if context is not None else None) or "batch"
        batch = (context.getLocalProperty(_BATCH_ID_KEY) if context is not None else None) or "0"
        prefix = f"{query}/{batch}/{partition}/"
        sent = asyncio.run(self._send_all(rows, prefix))
        return SentRows(partition, sent)

    async def _send_all(self, rows: Iterator[Row], prefix: str) -> int:
        options = self.options
        producer = Producer(
            options.producer_group, options.connection.namesrv, client_settings=client_settings(options.connection)
        )
        await producer.start()
        window = asyncio.Semaphore(options.sends_in_flight)
        pending: set[asyncio.Task[None]] = set()
        failures: list[BaseException] = []
        sent = 0

        async def send(message: Message, row_id: str) -> None:
            nonlocal sent
            try:
                result = await producer.send(message, timeout_s=options.send_timeout_s)
                if result.status is not SendStatus.SEND_OK:
                    raise ShoalSparkError(f"row {row_id} was stored, but {result.status.name}, not SEND_OK")
                sent += 1
            except BaseException as error:
                failures.append(error)
            finally:
                window.release()

        try:
            for index, row in enumerate(rows):
                if failures:
                    break
                row_id = f"{prefix}{index}"
                await window.acquire()
                task = asyncio.ensure_future(send(row_message(row, options.topic, row_id), row_id))
                pending.add(task)
                task.add_done_callback(pending.discard)
            if pending:
                await asyncio.gather(*pending)
        finally:
            await producer.shutdown()
        if failures:
            failed = f"{len(failures)} send(s) failed; the task fails and Spark retries it"
            raise ShoalSparkError(failed) from failures[0]
        return sent


class TopicStreamWriter(_Sender, DataSourceStreamWriter):
    """A micro-batch's rows, sent; the batch commits once every task's sends are acknowledged."""

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return self.send_rows(iterator)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (PySpark's name)
        """Nothing to do: each message was acknowledged before its task ended."""

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (PySpark's name)
        """Sent messages cannot be taken back; the batch is replayed (at least once)."""


class TopicBatchWriter(_Sender, DataSourceWriter):
    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return self.send_rows(iterator)
