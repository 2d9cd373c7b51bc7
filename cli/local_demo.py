"""The produce/consume round trip `shoal local --demo` (and so `make run`) shows."""

from __future__ import annotations

import asyncio
import time

import click

from shoal.client import Admin, ConsumeStatus, Message, MessageExt, Producer, PushConsumer
from shoal.protocol import ConsumeFromWhere

DEMO_TOPIC = "DemoTopic"
DEMO_GROUP = "CID_demo"
DEMO_MESSAGES = 10
DEMO_TIMEOUT_S = 30.0


async def round_trip(namesrv_addr: str) -> None:
    """Create a topic, send messages with tags and keys, consume them with a push consumer, and
    look one up by key, printing each step."""
    admin = Admin(namesrv_addr)
    await admin.start()
    try:
        cluster = await admin.cluster_info()
        click.echo(f"[demo] cluster: {', '.join(sorted(cluster.broker_addr_table))}", err=True)
        await admin.create_topic(DEMO_TOPIC, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        click.echo(f"[demo] topic {DEMO_TOPIC} created with 4 queues", err=True)
        received: list[MessageExt] = []
        done = asyncio.Event()

        def listener(messages: list[MessageExt]) -> ConsumeStatus:
            received.extend(messages)
            if len(received) >= DEMO_MESSAGES:
                done.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            DEMO_GROUP, namesrv_addr, listener=listener, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe(DEMO_TOPIC, "TagA || TagB")
        await consumer.start()
        producer = Producer("PID_demo", namesrv_addr)
        await producer.start()
        started = time.monotonic()
        for number in range(DEMO_MESSAGES):
            message = Message(
                DEMO_TOPIC,
                f"hello from shoal #{number}".encode(),
                tags="TagA" if number % 2 else "TagB",
                keys=(f"order-{number}",),
            )
            result = await producer.send(message)
            click.echo(
                f"[demo] sent #{number}: {result.status.name} queue {result.message_queue.queue_id} "
                f"offset {result.queue_offset} id {result.msg_id}",
                err=True,
            )
        try:
            await asyncio.wait_for(done.wait(), DEMO_TIMEOUT_S)
        except TimeoutError:
            raise click.ClickException(
                f"only {len(received)} of {DEMO_MESSAGES} messages consumed in {DEMO_TIMEOUT_S:.0f} s"
            ) from None
        elapsed_ms = (time.monotonic() - started) * 1000
        for message in sorted(received, key=lambda m: m.body):
            click.echo(
                f"[demo] consumed {message.body.decode()!r} tags={message.tags} queue {message.queue_id}", err=True
            )
        click.echo(f"[demo] round trip of {DEMO_MESSAGES} messages in {elapsed_ms:.0f} ms", err=True)
        found = await admin.query_message(DEMO_TOPIC, "order-3")
        click.echo(f"[demo] query by key order-3: {[m.body.decode() for m in found]}", err=True)
        await producer.shutdown()
        await consumer.shutdown()
    finally:
        await admin.shutdown()
