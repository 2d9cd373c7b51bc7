"""The cluster a topic stream reads and writes, over the remoting protocol: routes, offsets, pulls.

A thin I/O shell around shoal.client's connections (ClientInstance: NameServer client, broker
API, signed and optionally TLS remoting), with no heartbeats: a stream registers no consumer. It
works against Shoal and any RocketMQ 4.x/5.x broker. Every call goes to a queue's master first and
to its slaves when the master cannot be reached, so a stream keeps reading while a master is down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from shoal.client import BlockingAdmin, Credentials, MQBrokerError, MQClientError, RemotingError
from shoal.client.blocking import EventLoopThread
from shoal.client.client_instance import ClientInstance
from shoal.client.route import is_readable
from shoal.client.settings import ClientSettings
from shoal.protocol import MessageQueue, RequestCode, ResponseCode, TopicList
from shoal.protocol.errors import ProtocolError
from shoal.remoting.tls import ClientTlsSettings
from shoal.spark.errors import ShoalSparkError
from shoal.spark.streaming.offsets import Offsets, QueueKey
from shoal.spark.streaming.options import Connection, ReadOptions

__all__ = ["Queues", "StreamCluster", "client_settings", "consumer_lag", "unreachable"]

log = logging.getLogger("shoal.spark.streaming")

Queues = dict[QueueKey, tuple[str, ...]]
"""Each readable queue and its broker group's addresses, master (id 0) first, then slaves by id."""
CALL_MARGIN_S = 5.0
"""A blocking call waits this much longer than its request timeout (connecting, scheduling)."""
INTERNAL_TOPICS = frozenset(
    {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "OFFSET_MOVED_EVENT",
        "BenchmarkTest",
        "SELF_TEST_TOPIC",
    }
)
INTERNAL_PREFIXES = ("%RETRY%", "%DLQ%", "RMQ_SYS_", "rmq_sys_")
"""RocketMQ's own topics (TopicValidator's list) and the retry and dead-letter topics: a pattern
reads them only when it names them, or starts with their prefix (`%DLQ%.*`)."""


def client_settings(connection: Connection) -> ClientSettings:
    credentials = None
    if connection.access_key is not None and connection.secret_key is not None:
        credentials = Credentials(connection.access_key, connection.secret_key)
    tls = ClientTlsSettings(
        enable=connection.tls,
        test_mode=connection.tls_trust_cert_path is None,
        auth_server=connection.tls_trust_cert_path is not None,
        trust_cert_path=connection.tls_trust_cert_path or "",
    )
    return ClientSettings(request_timeout_s=connection.request_timeout_s, credentials=credentials, tls=tls)


def unreachable(error: BaseException) -> bool:
    """Errors after which the next broker of the group is tried: the connection, not the request."""
    return isinstance(error, RemotingError | OSError | asyncio.TimeoutError)


class StreamCluster:
    """The driver's view of the topics a stream reads (a loop thread; `close()` when done)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._loop = EventLoopThread("shoal-spark-stream")
        self._instance = ClientInstance(options.connection.namesrv, client_settings(options.connection))
        self._timeout_s = options.connection.request_timeout_s * 4 + CALL_MARGIN_S

    def close(self) -> None:
        try:
            self._loop.run(self._instance.remoting.close(), self._timeout_s)
        finally:
            self._loop.stop()

    def queues(self) -> Queues:
        """The readable queues of the stream's topics now (the pattern matched again)."""
        return self._loop.run(self._queues(), self._timeout_s)

    def latest(self, queues: Queues) -> Offsets:
        """Each queue's end (GET_MAX_OFFSET); queues no broker of its group answers for are left out."""
        return self._offsets(queues, RequestCode.GET_MAX_OFFSET)

    def earliest(self, queues: Queues) -> Offsets:
        return self._offsets(queues, RequestCode.GET_MIN_OFFSET)

    def at_time(self, queues: Queues, timestamp_ms: int) -> Offsets:
        """The first offset stored at or after `timestamp_ms` in each queue (SEARCH_OFFSET_BY_TIMESTAMP)."""
        return self._offsets(queues, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp_ms)

    def commit(self, queues: Queues, offsets: Offsets) -> None:
        """Store `offsets` as the group's at each queue's master (best effort: a master that is down
        misses this commit, and gets the next one)."""
        self._loop.run(self._commit(queues, offsets), self._timeout_s)

    async def _queues(self) -> Queues:
        options = self.options
        if options.topics is not None:
            topics: Iterable[str] = options.topics
        else:
            topics = [topic for topic in await self._topic_list() if options.wanted(topic) and self._pattern_may(topic)]
        found: Queues = {}
        routes = await asyncio.gather(*(self._instance.namesrv.get_route(topic) for topic in topics))
        for topic, route in zip(topics, routes, strict=True):
            if route is None:
                if options.topics is not None:
                    log.warning("topic %s has no route at the NameServer (not created yet?); read once it has", topic)
                continue
            addresses = {
                broker.broker_name: tuple(address for _id, address in sorted(broker.broker_addrs.items()))
                for broker in route.broker_datas
            }
            for queue_data in route.queue_datas:
                group = addresses.get(queue_data.broker_name, ())
                if not is_readable(queue_data.perm) or not group:
                    continue
                for queue_id in range(queue_data.read_queue_nums):
                    found[(topic, queue_data.broker_name, queue_id)] = group
        return found

    def _pattern_may(self, topic: str) -> bool:
        pattern = self.options.topic_pattern or ""
        prefix = next((prefix for prefix in INTERNAL_PREFIXES if topic.startswith(prefix)), None)
        if prefix is not None:
            return pattern.startswith(prefix)
        return topic not in INTERNAL_TOPICS or topic in pattern

    async def _topic_list(self) -> list[str]:
        response = await self._instance.namesrv.invoke(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        if response.code != ResponseCode.SUCCESS:
            raise ShoalSparkError(f"the NameServer refused the topic list: {response.remark}")
        try:
            return sorted(TopicList.from_json(response.body or b"{}").topic_list)
        except ProtocolError as error:
            raise ShoalSparkError(f"unreadable topic list from the NameServer: {error}") from None

    def _offsets(self, queues: Queues, code: int, timestamp_ms: int = 0) -> Offsets:
        return self._loop.run(self._gather_offsets(queues, code, timestamp_ms), self._timeout_s)

    async def _gather_offsets(self, queues: Queues, code: int, timestamp_ms: int) -> Offsets:
        keys = list(queues)
        answers = await asyncio.gather(*(self._offset(key, queues[key], code, timestamp_ms) for key in keys))
        return {key: offset for key, offset in zip(keys, answers, strict=True) if offset is not None}

    async def _offset(self, key: QueueKey, addresses: tuple[str, ...], code: int, timestamp_ms: int) -> int | None:
        topic, broker, queue_id = key
        queue = MessageQueue(topic, broker, queue_id)
        api = self._instance.api
        for address in addresses:
            try:
                if code == RequestCode.GET_MAX_OFFSET:
                    return await api.max_offset(address, queue)
                if code == RequestCode.GET_MIN_OFFSET:
                    return await api.min_offset(address, queue)
                return await api.search_offset(address, queue, timestamp_ms)
            except MQBrokerError as error:
                refused = f"broker {address} refused offsets of {topic}/{broker}/{queue_id}: {error}"
                raise ShoalSparkError(refused) from None
            except Exception as error:
                if not unreachable(error):
                    raise
                log.info("broker %s of %s is unreachable (%s); trying the next of its group", address, broker, error)
        log.warning("no broker of %s answers for %s/%d; its offset stays where it is", broker, topic, queue_id)
        return None

    async def _commit(self, queues: Queues, offsets: Offsets) -> None:
        api = self._instance.api
        group = self.options.group

        async def one(key: QueueKey, offset: int) -> None:
            addresses = queues.get(key, ())
            if not addresses:
                return
            topic, broker, queue_id = key
            try:
                await api.update_consumer_offset(addresses[0], group, MessageQueue(topic, broker, queue_id), offset)
            except Exception as error:
                if not (unreachable(error) or isinstance(error, MQBrokerError)):
                    raise
                log.info("offset of %s/%s/%d not committed at %s: %s", topic, broker, queue_id, addresses[0], error)

        await asyncio.gather(*(one(key, offset) for key, offset in offsets.items()))


def consumer_lag(connection: Connection) -> list[dict[str, object]]:
    """Every consumer group's committed offset and lag per queue, from each master broker
    (GET_BROKER_CONSUME_STATS, mqadmin brokerConsumeStats); a broker that does not answer is left
    out of this snapshot and logged."""
    rows: list[dict[str, object]] = []
    with BlockingAdmin(connection.namesrv, client_settings=client_settings(connection)) as admin:
        info = admin.cluster_info()
        for broker in info.broker_addr_table.values():
            master = broker.broker_addrs.get(0)
            if master is None:
                continue
            try:
                stats = admin.broker_consume_stats(master)
            except MQClientError as error:
                log.warning("consume stats of %s (%s) not read: %s", broker.broker_name, master, error)
                continue
            for entry in stats.consume_stats_list:
                for group, per_topic in entry.items():
                    for topic_stats in per_topic:
                        for queue, offsets in topic_stats.offset_table.items():
                            rows.append(
                                {
                                    "group": group,
                                    "topic": queue.topic,
                                    "broker": queue.broker_name,
                                    "queue_id": queue.queue_id,
                                    "broker_offset": offsets.broker_offset,
                                    "consumer_offset": offsets.consumer_offset,
                                    "lag": max(0, offsets.broker_offset - offsets.consumer_offset),
                                }
                            )
    return rows
