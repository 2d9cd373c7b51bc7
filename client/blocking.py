"""Synchronous facades for scripts: each runs its asyncio client on an event loop in a thread.

    with BlockingProducer("pg", "127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicTest", b"hello"))

Methods mirror the async classes and block until done. A push consumer's plain-function listener
runs on the consumer's thread pool, never on the event loop. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Generic, Self, TypeVar

from shoal.client import limits
from shoal.client.admin import Admin, Connection, ConsumerConnection, HaStatus, Promotion, QueueProgress
from shoal.client.errors import ClientStateError, RemotingTimeoutError
from shoal.client.lifecycle import ClientLifecycle
from shoal.client.message import Message, MessageExt
from shoal.client.producer import MessageQueueSelector, Producer, SendResult
from shoal.client.pull import PullResult
from shoal.client.pull_consumer import PullConsumer
from shoal.client.push_consumer import PushConsumer
from shoal.client.transaction_producer import TransactionListener, TransactionProducer, TransactionSendResult
from shoal.protocol import (
    ClusterInfo,
    ConsumeStats,
    ConsumeStatsList,
    MessageQueue,
    TopicConfig,
    TopicRouteData,
    TopicStatsTable,
)
from shoal.protocol.bodies import ConsumerRunningInfo

_T = TypeVar("_T")
_ClientT = TypeVar("_ClientT", bound=ClientLifecycle)
_LIFECYCLE_TIMEOUT_S = 120.0  # start/shutdown: shutdown waits for running listener calls
_CALL_MARGIN_S = 5.0  # on top of a call's own timeout, for scheduling and connecting
_THREAD_JOIN_TIMEOUT_S = 10.0


class EventLoopThread:
    """An event loop running forever in a daemon thread until `stop()`."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self.stopped = False

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    def run(self, coroutine: Coroutine[Any, Any, _T], timeout_s: float) -> _T:
        """Run `coroutine` on the loop and wait for its result, at most `timeout_s`."""
        if self.stopped:
            coroutine.close()
            raise ClientStateError("this client was shut down")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise RemotingTimeoutError(f"no result within {timeout_s:.1f} s") from None

    def call(self, function: Callable[[], _T]) -> _T:
        """Run a plain function on the loop's thread (for methods that touch loop state)."""

        async def wrapper() -> _T:
            return function()

        return self.run(wrapper(), _LIFECYCLE_TIMEOUT_S)

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_THREAD_JOIN_TIMEOUT_S)


class _BlockingBase(Generic[_ClientT]):
    """Owns the loop thread and the async client built on it; starts and stops that client."""

    def __init__(self, name: str, factory: Callable[[], _ClientT]) -> None:
        self._thread = EventLoopThread(name)
        self._client = self._create(factory)

    def _create(self, factory: Callable[[], _ClientT]) -> _ClientT:
        """Build the async client on the loop's thread; the thread stops if that fails."""
        try:
            return self._thread.call(factory)
        except BaseException:
            self._thread.stop()
            raise

    def start(self) -> None:
        """Start the wrapped client (blocking)."""
        self._thread.run(self._client.start(), _LIFECYCLE_TIMEOUT_S)

    def shutdown(self) -> None:
        """Stop the wrapped client (blocking), then the loop thread; nothing after the first time."""
        if self._thread.stopped:
            return
        try:
            self._thread.run(self._client.shutdown(), _LIFECYCLE_TIMEOUT_S)
        finally:
            self._thread.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.shutdown()


class BlockingProducer(_BlockingBase[Producer]):
    """`Producer`, synchronously."""

    def __init__(self, group: str, namesrv_addrs: str | Sequence[str], **options: Any) -> None:
        super().__init__(f"shoal-producer-{group}", lambda: Producer(group, namesrv_addrs, **options))

    @property
    def client_id(self) -> str:
        return self._client.client_id

    def send(
        self,
        message: Message,
        *,
        timeout_s: float = 3.0,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        coroutine = self._client.send(message, timeout_s=timeout_s, queue=queue, selector=selector, arg=arg)
        return self._thread.run(coroutine, timeout_s + _CALL_MARGIN_S)

    def send_oneway(
        self,
        message: Message,
        *,
        queue: MessageQueue | None = None,
        selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> None:
        coroutine = self._client.send_oneway(message, queue=queue, selector=selector, arg=arg)
        self._thread.run(coroutine, _LIFECYCLE_TIMEOUT_S)

    def send_batch(
        self, messages: Sequence[Message], *, timeout_s: float = 3.0, queue: MessageQueue | None = None
    ) -> SendResult:
        coroutine = self._client.send_batch(messages, timeout_s=timeout_s, queue=queue)
        return self._thread.run(coroutine, timeout_s + _CALL_MARGIN_S)

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return self._thread.run(self._client.fetch_publish_queues(topic), _LIFECYCLE_TIMEOUT_S)


class BlockingTransactionProducer(_BlockingBase[TransactionProducer]):
    """`TransactionProducer`, synchronously. Plain-function listener methods run in worker
    threads; a local transaction may take up to `_LIFECYCLE_TIMEOUT_S` beyond the send timeout."""

    def __init__(
        self, group: str, namesrv_addrs: str | Sequence[str], listener: TransactionListener, **options: Any
    ) -> None:
        super().__init__(
            f"shoal-transaction-producer-{group}",
            lambda: TransactionProducer(group, namesrv_addrs, listener, **options),
        )

    @property
    def client_id(self) -> str:
        return self._client.client_id

    def send_message_in_transaction(
        self, message: Message, arg: Any = None, *, timeout_s: float = 3.0
    ) -> TransactionSendResult:
        coroutine = self._client.send_message_in_transaction(message, arg, timeout_s=timeout_s)
        return self._thread.run(coroutine, timeout_s + _CALL_MARGIN_S + _LIFECYCLE_TIMEOUT_S)

    def send(self, message: Message, *, timeout_s: float = 3.0) -> SendResult:
        """A plain (non-transactional) send through the same producer."""
        return self._thread.run(self._client.send(message, timeout_s=timeout_s), timeout_s + _CALL_MARGIN_S)

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """Also registers the producer with the topic's brokers, so it can answer their checks."""
        return self._thread.run(self._client.fetch_publish_queues(topic), _LIFECYCLE_TIMEOUT_S)


class BlockingPushConsumer(_BlockingBase[PushConsumer]):
    """`PushConsumer`, synchronously; the options are PushConsumer's keyword arguments."""

    def __init__(self, group: str, namesrv_addrs: str | Sequence[str], **options: Any) -> None:
        super().__init__(f"shoal-consumer-{group}", lambda: PushConsumer(group, namesrv_addrs, **options))

    @property
    def client_id(self) -> str:
        return self._thread.call(lambda: self._client.client_id)

    def set_listener(self, listener: Callable[[list[MessageExt]], Any]) -> None:
        self._client.listener = listener

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._thread.call(lambda: self._client.subscribe(topic, expression))

    def unsubscribe(self, topic: str) -> None:
        self._thread.call(lambda: self._client.unsubscribe(topic))

    def assigned_queues(self) -> list[MessageQueue]:
        return self._thread.call(self._client.assigned_queues)


class BlockingPullConsumer(_BlockingBase[PullConsumer]):
    """`PullConsumer`, synchronously."""

    def __init__(self, group: str, namesrv_addrs: str | Sequence[str], **options: Any) -> None:
        super().__init__(f"shoal-pull-{group}", lambda: PullConsumer(group, namesrv_addrs, **options))

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._thread.run(self._client.fetch_message_queues(topic), _LIFECYCLE_TIMEOUT_S)

    def pull(
        self,
        mq: MessageQueue,
        expression: str,
        offset: int,
        max_nums: int = 32,
        *,
        block: bool = False,
        timeout_s: float = 10.0,
    ) -> PullResult:
        coroutine = self._client.pull(mq, expression, offset, max_nums, block=block, timeout_s=timeout_s)
        margin_s = limits.LONG_POLL_RESPONSE_MARGIN_S + _CALL_MARGIN_S
        return self._thread.run(coroutine, timeout_s + margin_s)

    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        self._thread.run(self._client.update_offset(mq, offset), _LIFECYCLE_TIMEOUT_S)

    def fetch_offset(self, mq: MessageQueue) -> int | None:
        return self._thread.run(self._client.fetch_offset(mq), _LIFECYCLE_TIMEOUT_S)

    def min_offset(self, mq: MessageQueue) -> int:
        return self._thread.run(self._client.min_offset(mq), _LIFECYCLE_TIMEOUT_S)

    def max_offset(self, mq: MessageQueue) -> int:
        return self._thread.run(self._client.max_offset(mq), _LIFECYCLE_TIMEOUT_S)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._thread.run(self._client.search_offset(mq, timestamp_ms), _LIFECYCLE_TIMEOUT_S)


class BlockingAdmin(_BlockingBase[Admin]):
    """`Admin`, synchronously."""

    def __init__(self, namesrv_addrs: str | Sequence[str], **options: Any) -> None:
        super().__init__("shoal-admin", lambda: Admin(namesrv_addrs, **options))

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self._thread.run(coroutine, _LIFECYCLE_TIMEOUT_S)

    def cluster_info(self) -> ClusterInfo:
        return self._run(self._client.cluster_info())

    def broker_topic_configs(self, broker_addr: str) -> dict[str, TopicConfig]:
        return self._run(self._client.broker_topic_configs(broker_addr))

    def broker_consume_stats(self, broker_addr: str, *, order_only: bool = False) -> ConsumeStatsList:
        return self._run(self._client.broker_consume_stats(broker_addr, order_only=order_only))

    def topic_list(self) -> list[str]:
        return self._run(self._client.topic_list())

    def topic_route(self, topic: str) -> TopicRouteData:
        return self._run(self._client.topic_route(topic))

    def cluster_masters(self, cluster: str) -> list[str]:
        return self._run(self._client.cluster_masters(cluster))

    def runtime_info(self, broker_addr: str) -> dict[str, str]:
        return self._run(self._client.runtime_info(broker_addr))

    def ha_status(self, broker_addr: str) -> HaStatus:
        return self._run(self._client.ha_status(broker_addr))

    def promote(
        self, broker_addr: str, *, epoch: int | None = None, role: str = "ASYNC_MASTER", force: bool = False
    ) -> Promotion:
        return self._run(self._client.promote(broker_addr, epoch=epoch, role=role, force=force))

    def set_write_permission(self, broker_name: str, *, writable: bool) -> int:
        return self._run(self._client.set_write_permission(broker_name, writable=writable))

    def broker_consumer_lag(self, broker_addr: str) -> int:
        return self._run(self._client.broker_consumer_lag(broker_addr))

    def create_topic(self, topic: str, **options: Any) -> list[str]:
        return self._run(self._client.create_topic(topic, **options))

    def delete_topic(self, topic: str, *, cluster: str | None = None) -> None:
        self._run(self._client.delete_topic(topic, cluster=cluster))

    def topic_stats(self, topic: str) -> TopicStatsTable:
        return self._run(self._client.topic_stats(topic))

    def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        return self._run(self._client.consume_stats(group, topic))

    def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        return self._run(self._client.consumer_progress(group, topic))

    def consumer_connections(self, group: str) -> ConsumerConnection:
        return self._run(self._client.consumer_connections(group))

    def consumer_running_info(self, group: str, client_id: str) -> ConsumerRunningInfo:
        return self._run(self._client.consumer_running_info(group, client_id))

    def consumer_ids(self, group: str) -> list[str]:
        return self._run(self._client.consumer_ids(group))

    def view_message(self, offset_msg_id: str) -> MessageExt:
        return self._run(self._client.view_message(offset_msg_id))

    def query_message(self, topic: str, key: str, **options: Any) -> list[MessageExt]:
        return self._run(self._client.query_message(topic, key, **options))

    def query_message_by_unique_key(self, topic: str, uniq_key: str, *, max_num: int = 32) -> list[MessageExt]:
        return self._run(self._client.query_message_by_unique_key(topic, uniq_key, max_num=max_num))

    def dlq_messages(self, group: str, max_count: int = 32) -> list[MessageExt]:
        return self._run(self._client.dlq_messages(group, max_count))

    def resend_dlq_message(self, group: str, offset_msg_id: str, *, to_retry_topic: bool = False) -> SendResult:
        return self._run(self._client.resend_dlq_message(group, offset_msg_id, to_retry_topic=to_retry_topic))

    def messages_between(self, topic: str, begin_ms: int, end_ms: int, *, max_count: int = 32) -> list[MessageExt]:
        return self._run(self._client.messages_between(topic, begin_ms, end_ms, max_count=max_count))

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        return self._run(self._client.broker_config(broker_addr))

    def update_broker_config(self, broker_addr: str, changes: dict[str, str]) -> None:
        self._run(self._client.update_broker_config(broker_addr, changes))

    def subscription_groups(self, broker_addr: str) -> list[str]:
        return self._run(self._client.subscription_groups(broker_addr))

    def producer_connections(self, broker_addr: str, group: str) -> tuple[Connection, ...]:
        return self._run(self._client.producer_connections(broker_addr, group))

    def reset_offset_by_time(
        self, topic: str, group: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        return self._run(self._client.reset_offset_by_time(topic, group, timestamp_ms, force=force))
