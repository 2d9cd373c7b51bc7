"""The client side of a scale-down drain, shared by the process-runner test (tests/kube/test_operator_processes.py)
and the kind test (tests/e2e/test_kind_outside.py): messages left unconsumed on one broker group, then read and
committed so that the operator may remove the group."""

from __future__ import annotations

from shoal.client import Message, MessageQueue, Producer, PullConsumer, PullStatus

PULL_BATCH = 32


async def group_queues(consumer: PullConsumer, topic: str, broker_name: str) -> list[MessageQueue]:
    return [queue for queue in await consumer.fetch_message_queues(topic) if queue.broker_name == broker_name]


async def reaches(namesrv: list[str], topic: str, broker_name: str, consumer_group: str) -> bool:
    """Whether the route of `topic` has queues on `broker_name` yet."""
    async with PullConsumer(consumer_group, namesrv) as consumer:
        return bool(await group_queues(consumer, topic, broker_name))


async def leave_messages(
    namesrv: list[str], topic: str, broker_name: str, consumer_group: str, producer_group: str, count: int
) -> None:
    """`count` messages on queue 0 of `broker_name`, which `consumer_group` consumes from its start."""
    async with PullConsumer(consumer_group, namesrv) as consumer:
        for queue in await group_queues(consumer, topic, broker_name):
            await consumer.update_offset(queue, 0)
        (first,) = [q for q in await group_queues(consumer, topic, broker_name) if q.queue_id == 0]
    async with Producer(producer_group, namesrv) as producer:
        for index in range(count):
            await producer.send(Message(topic, f"drain {index}".encode()), queue=first)


async def read_and_commit(namesrv: list[str], topic: str, broker_name: str, consumer_group: str) -> int:
    """Pull what `consumer_group` has left on `broker_name` (one batch per queue) and commit it; the count read."""
    read = 0
    async with PullConsumer(consumer_group, namesrv) as consumer:
        for queue in await group_queues(consumer, topic, broker_name):
            offset = await consumer.fetch_offset(queue) or 0
            result = await consumer.pull(queue, "*", offset, PULL_BATCH)
            if result.status is PullStatus.FOUND:
                read += len(result.messages)
                await consumer.update_offset(queue, result.next_begin_offset)
    return read
