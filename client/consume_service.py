"""Running the application's listener over pulled messages: concurrently or in queue order.

Concurrent (`ConsumeMessageConcurrentlyService`): batches of up to `consume_batch_max` messages
run on a bounded pool. RECONSUME_LATER (or an exception) sends each message back to the broker
(CONSUMER_SEND_MSG_BACK, delay level 0 = "3 + reconsumeTimes"); a message whose send-back fails
stays cached and is consumed again locally after `local_retry_delay_s`. The committed offset
never passes the lowest message still cached.

Orderly (`ConsumeMessageOrderlyService`): one task per queue consumes it strictly in offset
order, only while the queue's broker lock is held (clustering). SUSPEND_CURRENT_QUEUE_A_MOMENT
(or an exception) puts the same messages back and retries them after `suspend_current_queue_s`;
after `max_reconsume_times` attempts a message goes to the DLQ (send-back with delay level -1).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from shoal.client.client_instance import ClientInstance
from shoal.client.errors import MQBrokerError, RemotingError
from shoal.client.message import PROPERTY_CONSUME_START_TIMESTAMP, MessageExt
from shoal.client.offset_store import OffsetStore
from shoal.client.process_queue import ProcessQueue
from shoal.client.rebalance import Rebalancer
from shoal.client.settings import ConsumerSettings
from shoal.formats.message_id import wall_clock_ms
from shoal.formats.topics import retry_topic
from shoal.protocol import ConsumerSendMsgBackRequestHeader, MessageModel, MessageQueue

log = logging.getLogger(__name__)


class ConsumeStatus(enum.Enum):
    """What a concurrent listener returns (`ConsumeConcurrentlyStatus`)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener returns (`ConsumeOrderlyStatus`)."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


Listener = Callable[[list[MessageExt]], Any]
"""`(messages) -> ConsumeStatus | ConsumeOrderlyStatus`, a plain or an async function."""

_SUCCESSES = (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS)


class ListenerInvoker:
    """Calls the listener: awaits async ones, runs plain ones on a bounded thread pool."""

    def __init__(self, listener: Listener, concurrency: int) -> None:
        self.listener = listener
        self._is_async = inspect.iscoroutinefunction(listener) or inspect.iscoroutinefunction(
            getattr(listener, "__call__", None)  # noqa: B004 - a callable object's async __call__
        )
        self._executor = (
            None if self._is_async else ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="shoal-consume")
        )
        self._warned_none = False

    async def __call__(self, messages: list[MessageExt]) -> bool:
        """Run the listener; True for success, False for retry (exceptions and None included)."""
        try:
            if self._executor is None:
                result = self.listener(messages)
            else:
                result = await asyncio.get_running_loop().run_in_executor(self._executor, self.listener, messages)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the listener failed on %d message(s); they will be consumed again", len(messages))
            return False
        if result is None and not self._warned_none:
            self._warned_none = True
            log.warning("the listener returned None, which counts as a retry (as in Java); return a status")
        return result in _SUCCESSES

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def prepare_for_listener(messages: Sequence[MessageExt], group: str) -> None:
    """`resetRetryAndNamespace`: retried messages show their original topic; stamp the start."""
    group_retry_topic = retry_topic(group)
    started = str(wall_clock_ms())
    for message in messages:
        original = message.retry_topic
        if original and message.topic == group_retry_topic:
            message.topic = original
        message.properties[PROPERTY_CONSUME_START_TIMESTAMP] = started


@dataclass(frozen=True, slots=True)
class ConsumeContext:
    """What both services need from the consumer, passed in explicitly."""

    group: str
    message_model: MessageModel
    max_reconsume_times: int
    consume_batch_max: int
    settings: ConsumerSettings
    instance: ClientInstance
    offset_store: OffsetStore
    rebalancer: Rebalancer


class ConsumeServiceBase:
    """Task bookkeeping and send-back, shared by both services."""

    def __init__(self, context: ConsumeContext, invoker: ListenerInvoker) -> None:
        self.context = context
        self.invoker = invoker
        self.semaphore = asyncio.Semaphore(context.settings.consume_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._delaying: set[asyncio.Task[None]] = set()  # still in their delay: cancelled at shutdown
        self.stopping = False

    def spawn(self, coroutine: Coroutine[Any, Any, None], delay_s: float = 0.0) -> None:
        if self.stopping:
            coroutine.close()
            return
        task = asyncio.get_running_loop().create_task(self._delayed(coroutine, delay_s))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if delay_s > 0:
            self._delaying.add(task)
            task.add_done_callback(self._delaying.discard)

    async def _delayed(self, coroutine: Coroutine[Any, Any, None], delay_s: float) -> None:
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s)
                task = asyncio.current_task()
                if task is not None:
                    self._delaying.discard(task)
            if not self.stopping:
                await coroutine
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("a consume task failed")
        finally:
            coroutine.close()  # a no-op once it ran; avoids "never awaited" when cancelled in the delay

    async def shutdown(self, timeout_s: float) -> None:
        """Start no more listener calls; wait up to `timeout_s` for running ones, then cancel them.

        Messages not consumed by then are not committed: the next owner of the queue gets them.
        """
        self.stopping = True
        for task in self._delaying:
            task.cancel()
        tasks = set(self._tasks)
        if tasks:
            _done, pending = await asyncio.wait(tasks, timeout=timeout_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
        self.invoker.shutdown()

    async def send_back(self, message: MessageExt, mq: MessageQueue, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the queue's master (or the message's store host)."""
        context = self.context
        address = context.instance.routes.master_address(mq.broker_name) or message.store_host
        header = ConsumerSendMsgBackRequestHeader(
            offset=message.commitlog_offset,
            group=context.group,
            delay_level=delay_level,
            origin_msg_id=message.msg_id,
            origin_topic=message.topic,
            max_reconsume_times=context.max_reconsume_times,
        )
        try:
            await context.instance.api.send_back(address, header)
        except (RemotingError, MQBrokerError) as error:
            log.warning("sending message %s back to %s failed: %s", message.msg_id, address, error)
            return False
        return True


class ConcurrentConsumeService(ConsumeServiceBase):
    """Listener calls in parallel, offsets committed up to the lowest unconsumed message."""

    def submit(self, process_queue: ProcessQueue, messages: Sequence[MessageExt], delay_s: float = 0.0) -> None:
        size = self.context.consume_batch_max
        for start in range(0, len(messages), size):
            self.spawn(self._consume(process_queue, list(messages[start : start + size])), delay_s)

    async def _consume(self, process_queue: ProcessQueue, messages: list[MessageExt]) -> None:
        async with self.semaphore:
            if process_queue.dropped or self.stopping:
                return
            prepare_for_listener(messages, self.context.group)
            success = await self.invoker(messages)
        if process_queue.dropped:
            return  # rebalanced away meanwhile: the new owner consumes these again
        failed: list[MessageExt] = []
        if not success:
            failed = await self._send_back_all(process_queue.mq, messages)
        failed_ids = {id(message) for message in failed}
        offset = process_queue.remove([message for message in messages if id(message) not in failed_ids])
        if offset >= 0 and not process_queue.dropped:
            self.context.offset_store.update(process_queue.mq, offset, increase_only=True)
        if failed:
            for message in failed:
                message.reconsume_times += 1
            self.submit(process_queue, failed, self.context.settings.local_retry_delay_s)

    async def _send_back_all(self, mq: MessageQueue, messages: list[MessageExt]) -> list[MessageExt]:
        """The messages whose send-back failed (broadcasting consumers drop failures, as Java)."""
        if self.context.message_model == MessageModel.BROADCASTING:
            for message in messages:
                log.warning("broadcasting consumer drops message %s after RECONSUME_LATER", message.msg_id)
            return []
        results = await asyncio.gather(*(self.send_back(message, mq, 0) for message in messages))
        return [message for message, sent in zip(messages, results, strict=True) if not sent]


class OrderlyConsumeService(ConsumeServiceBase):
    """One consumer per queue at a time, in offset order, under the queue's broker lock."""

    def submit(self, process_queue: ProcessQueue, dispatch: bool, delay_s: float = 0.0) -> None:
        if dispatch:
            self.spawn(self._consume_queue(process_queue), delay_s)

    async def _consume_queue(self, process_queue: ProcessQueue) -> None:
        context = self.context
        settings = context.settings
        async with process_queue.consume_lock:
            while not process_queue.dropped and not self.stopping:
                if context.rebalancer.needs_locks and (
                    not process_queue.locked or process_queue.lock_expired(settings.lock_max_live_s)
                ):
                    if not await context.rebalancer.lock(process_queue.mq):
                        self.submit(process_queue, True, settings.lock_retry_delay_s)
                        return
                    continue
                messages = process_queue.take(context.consume_batch_max)
                if not messages:
                    return
                prepare_for_listener(messages, context.group)
                async with self.semaphore:
                    if self.stopping:
                        process_queue.make_consume_again(messages)
                        return
                    success = await self.invoker(messages)
                if process_queue.dropped:
                    return
                if not success and await self._must_retry(process_queue.mq, messages):
                    process_queue.make_consume_again(messages)
                    self.submit(process_queue, True, settings.suspend_current_queue_s)
                    return
                offset = process_queue.commit()
                if offset >= 0:
                    context.offset_store.update(process_queue.mq, offset, increase_only=False)

    async def _must_retry(self, mq: MessageQueue, messages: list[MessageExt]) -> bool:
        """`checkReconsumeTimes`: True to suspend and retry; messages past the limit go to the DLQ."""
        context = self.context
        retry = False
        for message in messages:
            exhausted = (
                context.message_model == MessageModel.CLUSTERING
                and context.max_reconsume_times >= 0
                and message.reconsume_times >= context.max_reconsume_times
            )
            if exhausted and await self.send_back(message, mq, -1):
                continue
            retry = True
            message.reconsume_times += 1
        return retry
