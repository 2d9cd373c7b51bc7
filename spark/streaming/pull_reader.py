"""One QueueRange read on a Spark worker: PULL_MESSAGE from the queue's broker group, decoded into
Arrow batches of the batch source's schema.

A pull answer's body is the broker's stored records, byte for byte (RocketMQ and Shoal both send
them so), so the columns are cut out of it by the same decoder the file source uses
(record_columns), not through one Python object per message. The range is split into segments of
`pullBatchSize` offsets pulled `pullsInFlight` at a time; a segment keeps only the records below
its end, so segments never overlap and a filtered pull that skips ahead loses nothing. The rows are
exactly the messages with offsets in [start, end) that match the filter, in offset order: a
replayed micro-batch reads the same rows (what exactly-once sinks need), as long as retention has
not deleted them (`failOnDataLoss`).
"""

from __future__ import annotations

import array
import asyncio
import bisect
import functools
import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from shoal.client.subscription import parse_tags
from shoal.client.transport import ClientRemoting
from shoal.formats.message_id import wall_clock_ms
from shoal.formats.record import QUEUE_OFFSET_OFFSET, TIMESTAMP, WalkStop, walk_records
from shoal.protocol import PullMessageRequestHeader, PullMessageResponseHeader, PullSysFlag, RequestCode, ResponseCode
from shoal.protocol.errors import ProtocolError
from shoal.spark import limits as spark_limits
from shoal.spark.errors import ShoalSparkError
from shoal.spark.record_columns import Damage, Framing, RowFilter, decode_records
from shoal.spark.schema import MESSAGE_SCHEMA, arrow_schema
from shoal.spark.streaming.cluster import client_settings, unreachable
from shoal.spark.streaming.offsets import QueueRange
from shoal.spark.streaming.options import ReadOptions
from shoal.spark.worker_heap import freeze_imports

__all__ = ["DataLossError", "read_queue_range"]

log = logging.getLogger("shoal.spark.streaming")

RECORDS_PER_BATCH_MAX = 8192
"""Records decoded into one Arrow batch (each decode costs a few dozen Arrow calls)."""
BATCH_BYTES_MAX = spark_limits.READ_CHUNK_BYTES
"""Bytes of records joined for one decode (Arrow's binary offsets are int32)."""
STALL_TIMEOUT_S = 60.0
"""How long a pull may find nothing where the planned range says messages are (a slave catching up,
a broker restarting) before the task fails and Spark retries it."""
STALL_PAUSE_S = 0.05
_SUBSCRIPTION_ONLY = int(PullSysFlag.SUBSCRIPTION)
_ALL_COLUMNS = tuple(MESSAGE_SCHEMA.fieldNames())
_ARROW_SCHEMA = arrow_schema(MESSAGE_SCHEMA)


class DataLossError(ShoalSparkError):
    """Messages a query still had to read are gone (failOnDataLoss=true)."""


@dataclass
class _Segment:
    start: int
    end: int
    bodies: list[bytes | memoryview] = field(default_factory=list)


def read_queue_range(qrange: QueueRange, addresses: tuple[str, ...], options: ReadOptions) -> Iterator[Any]:
    """Arrow batches (of `options.columns`, all by default) of the range's messages."""
    freeze_imports()
    columns = options.columns or _ALL_COLUMNS
    tags = frozenset(parse_tags(options.filter.expression)) if not options.filter.sql else frozenset()
    tag_values = pa.array(sorted(tags), pa.string())
    loop = asyncio.new_event_loop()
    settings = client_settings(options.connection)
    remoting = ClientRemoting(
        connect_timeout_s=settings.connect_timeout_s,
        credentials=settings.credentials,
        ssl_context=settings.tls.context(),
    )
    puller = _RangePuller(remoting, qrange, addresses, options)
    try:
        while not puller.done:
            records = loop.run_until_complete(puller.next_records())
            for decoded in _decode(records, options.check_crc):
                # The broker matched tag hash codes, which can collide: keep exact tags only.
                batch = decoded.filter(pc.is_in(decoded.column("tags"), tag_values)) if tags else decoded
                if batch.num_rows:
                    yield batch.select(list(columns))
    finally:
        loop.run_until_complete(remoting.close())
        loop.close()


class _RangePuller:
    """Pulls one range in order, `pullsInFlight` segments at a time, from the first broker of the
    group that answers (the master, else a slave)."""

    def __init__(self, remoting: ClientRemoting, qrange: QueueRange, addresses: tuple[str, ...], options: ReadOptions):
        if not addresses:
            raise ShoalSparkError(f"{qrange.topic}/{qrange.broker}/{qrange.queue_id}: no broker address to read from")
        self.remoting = remoting
        self.qrange = qrange
        self.addresses = addresses
        self.options = options
        self.address_index = 0
        self.next_start = qrange.start
        self.running: deque[asyncio.Task[_Segment]] = deque()
        self.done = qrange.start >= qrange.end

    async def next_records(self) -> list[tuple[bytes | memoryview, int]]:
        """The next bodies, each with the end its records are cut at, up to about a batch."""
        found: list[tuple[bytes | memoryview, int]] = []
        count = size = 0
        while not self.done and count < RECORDS_PER_BATCH_MAX and size < BATCH_BYTES_MAX // 2:
            while len(self.running) < self.options.pulls_in_flight and self.next_start < self.qrange.end:
                end = min(self.next_start + self.options.pull_batch_size, self.qrange.end)
                segment = _Segment(self.next_start, end)
                self.running.append(asyncio.ensure_future(self._fill(segment)))
                self.next_start = end
            segment = await self.running.popleft()
            for body in segment.bodies:
                found.append((body, segment.end))
                size += len(body)
            count += segment.end - segment.start
            self.done = not self.running and self.next_start >= self.qrange.end
        return found

    async def _fill(self, segment: _Segment) -> _Segment:
        position = segment.start
        stalled_since: float | None = None
        while position < segment.end:
            code, header, body = await self._pull(position, segment.end - position)
            if position < header.min_offset:
                position = self._lost(position, header.min_offset, segment.end)
                continue
            if code == ResponseCode.SUCCESS and body:
                segment.bodies.append(body)
            advanced = header.next_begin_offset
            if advanced > position:
                position, stalled_since = advanced, None
                continue
            if code in (ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_RETRY_IMMEDIATELY) and advanced < position:
                # The queue is behind where this range was planned: its messages are not there.
                position = self._lost(position, segment.end, segment.end)
                continue
            stalled_since = stalled_since or time.monotonic()
            if time.monotonic() - stalled_since > STALL_TIMEOUT_S:
                raise ShoalSparkError(
                    f"{self._name()}: no message at offset {position} for {STALL_TIMEOUT_S:.0f} s, though the "
                    f"range was planned up to {self.qrange.end} (broker max offset now {header.max_offset})"
                )
            await asyncio.sleep(STALL_PAUSE_S)
        return segment

    def _lost(self, position: int, resume: int, end: int) -> int:
        message = f"{self._name()}: messages at offsets {position} to {min(resume, end) - 1} are gone (retention?)"
        if self.options.fail_on_data_loss:
            raise DataLossError(message + "; failOnDataLoss=false skips them")
        log.warning("%s; skipped (failOnDataLoss=false)", message)
        return resume

    def _name(self) -> str:
        return f"{self.qrange.topic}/{self.qrange.broker}/{self.qrange.queue_id}"

    async def _pull(self, offset: int, count: int) -> tuple[int, PullMessageResponseHeader, bytes | memoryview]:
        qrange, row_filter = self.qrange, self.options.filter
        fields = PullMessageRequestHeader(
            consumer_group=self.options.group,
            topic=qrange.topic,
            queue_id=qrange.queue_id,
            queue_offset=offset,
            max_msg_nums=count,
            sys_flag=_SUBSCRIPTION_ONLY,
            commit_offset=0,
            suspend_timeout_ms=0,
            subscription=row_filter.expression,
            sub_version=wall_clock_ms(),
            expression_type=row_filter.expression_type,
        ).to_ext_fields()
        timeout_s = self.options.connection.request_timeout_s
        deadline = time.monotonic() + STALL_TIMEOUT_S
        while True:
            address = self.addresses[self.address_index]
            try:
                response = await self.remoting.invoke(address, RequestCode.PULL_MESSAGE, fields, timeout_s=timeout_s)
                if response.code != ResponseCode.TOPIC_NOT_EXIST:
                    break
                # A slave that has not copied the topic's config yet (it syncs it every few seconds).
                problem = f"it does not know the topic yet ({response.remark})"
            except Exception as error:
                if not unreachable(error):
                    raise
                problem = f"unreachable ({error})"
            if time.monotonic() > deadline:
                raise ShoalSparkError(f"{self._name()}: no broker of the group serves the pull: {address} {problem}")
            self.address_index = (self.address_index + 1) % len(self.addresses)
            log.info("%s: broker %s %s; pulling from %s", self._name(), address, problem,
                     self.addresses[self.address_index])  # fmt: skip
            if self.address_index == 0:
                await asyncio.sleep(STALL_PAUSE_S * 10)
        expected = (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        )
        if response.code not in expected:
            refused = f"{self._name()}: broker {address} refused the pull: {response.code} {response.remark}"
            raise ShoalSparkError(refused)
        try:
            header = PullMessageResponseHeader.from_ext_fields(response.ext_fields)
        except ProtocolError as error:
            raise ShoalSparkError(f"{self._name()}: unreadable pull answer from {address}: {error}") from None
        return response.code, header, response.body or b""


def _decode(records: list[tuple[bytes | memoryview, int]], check_crc: bool) -> Iterator[Any]:
    """Join the bodies' records below each one's end into one buffer and decode it at once."""
    if not records:
        return
    parts: list[bytes | memoryview] = []
    starts, ends = array.array("i"), array.array("i")
    size = 0
    for body, end in records:
        walk = walk_records(body, 0, len(body), len(body), len(body))
        if walk.stop not in (WalkStop.LIMIT, WalkStop.STOP_AT) or walk.end != len(body):
            raise ShoalSparkError(f"a pull answer holds something that is not a run of records (at byte {walk.end})")
        positions = walk.positions
        # A pull answers a queue's records in offset order: those at or past `end` (a filtered
        # pull that ran ahead) are a tail, found by bisection instead of reading every record.
        kept = bisect.bisect_left(positions, end, key=functools.partial(_queue_offset_at, body))
        if not kept:
            continue
        starts.extend(positions[:kept] if not size else [size + position for position in positions[:kept]])
        ends.extend(starts[len(starts) - kept + 1 :])
        ends.append(size + (positions[kept] if kept < len(positions) else walk.end))  # records are contiguous
        parts.append(body)
        size += len(body)
    if not starts:
        return
    framing = Framing(b"".join(parts), 0, starts, ends, offsets_from_records=True)
    decoded = decode_records(framing, _ALL_COLUMNS, _ARROW_SCHEMA, RowFilter(), damage=Damage.STOP, check_crc=check_crc)
    if decoded.damage_offset is not None:
        damaged = f"a pulled record at CommitLog offset {decoded.damage_offset} is damaged: {decoded.damage_reason}"
        raise ShoalSparkError(damaged)
    yield from decoded.batches


def _queue_offset_at(body: bytes | memoryview, position: int) -> int:
    return int(TIMESTAMP.unpack_from(body, position + QUEUE_OFFSET_OFFSET)[0])
