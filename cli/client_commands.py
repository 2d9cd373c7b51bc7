"""`shoal admin ...`, `shoal produce`, `shoal consume`: quick checks against a running cluster."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from shoal.client import (
    BlockingAdmin,
    BlockingProducer,
    BlockingPushConsumer,
    ClientSettings,
    ClientTlsSettings,
    ConsumeStatus,
    Message,
    MessageExt,
    MQBrokerError,
    MQClientError,
)
from shoal.client.admin import ha_status_of
from shoal.client.credentials import resolve_credentials
from shoal.protocol import ConsumeFromWhere, ResponseCode

NAMESRV_OPTION = click.option(
    "-n",
    "--namesrv-addr",
    default="127.0.0.1:9876",
    show_default=True,
    envvar="NAMESRV_ADDR",
    help="NameServer(s), ';'-separated.",
)

_Command = TypeVar("_Command", bound=Callable[..., Any])


def _remember(context: click.Context, param: click.Parameter, value: str | None) -> None:
    """Credential options are kept in the context's shared `meta`: `shoal admin --access-key ...
    topics` and `shoal produce --access-key ...` both reach `_settings`."""
    if value is not None:
        context.meta[f"shoal.{param.name}"] = value


def credential_options(command: _Command) -> _Command:
    """--access-key/--secret-key/--credentials-file (else SHOAL_ACCESS_KEY/SHOAL_SECRET_KEY or
    SHOAL_CREDENTIALS_FILE): requests are then ACL-signed, as Java's AclClientRPCHook signs them."""
    command = click.option(
        "--credentials-file",
        type=click.Path(dir_okay=False),
        expose_value=False,
        callback=_remember,
        help="YAML accessKey:/secretKey: (RocketMQ's tools.yml) or AccessKey=/SecretKey= lines.",
    )(command)
    command = click.option(
        "--secret-key", expose_value=False, callback=_remember, help="ACL secret key (or env SHOAL_SECRET_KEY)."
    )(command)
    return click.option(
        "--access-key", expose_value=False, callback=_remember, help="ACL access key (or env SHOAL_ACCESS_KEY)."
    )(command)


def tls_options(command: _Command) -> _Command:
    """--tls (the Java client's -Dtls.enable=true; any server certificate trusted, as RocketMQ's
    default test mode), --tls-trust-cert (check the server's chain, tls.client.authServer=true),
    --tls-cert/--tls-key (a client certificate for brokers that ask for one). Each also from the
    environment: SHOAL_TLS=true, SHOAL_TLS_TRUST_CERT, SHOAL_TLS_CERT, SHOAL_TLS_KEY."""
    for name, help_text in (
        ("--tls-key", "PEM private key of --tls-cert."),
        ("--tls-cert", "PEM client certificate (tls.client.certPath), for brokers that require one."),
        ("--tls-trust-cert", "PEM CA file: check the server certificate against it (tls.client.authServer)."),
    ):
        envvar = "SHOAL_" + name[2:].upper().replace("-", "_")
        command = click.option(
            name, type=click.Path(dir_okay=False), envvar=envvar, expose_value=False, callback=_remember, help=help_text
        )(command)
    return click.option(
        "--tls",
        is_flag=True,
        default=None,
        envvar="SHOAL_TLS",
        expose_value=False,
        callback=_remember,
        help="Connect over TLS (tls.enable=true; env SHOAL_TLS=true).",
    )(command)


def _tls_settings(meta: dict[str, Any]) -> ClientTlsSettings:
    """TLS from the options: any of them turns TLS on; a trust file makes the client check the server."""
    trust, cert, key = meta.get("shoal.tls_trust_cert"), meta.get("shoal.tls_cert"), meta.get("shoal.tls_key")
    enable = bool(meta.get("shoal.tls")) or any((trust, cert, key))
    if bool(cert) != bool(key):
        raise click.UsageError("--tls-cert and --tls-key go together")
    return ClientTlsSettings(
        enable=enable,
        test_mode=not (trust or cert),
        auth_server=bool(trust),
        trust_cert_path=trust or "",
        cert_path=cert or "",
        key_path=key or "",
    )


def _settings() -> ClientSettings:
    """The client settings of this command: the credentials given to it or to `shoal admin`."""
    context = click.get_current_context(silent=True)
    meta = context.meta if context is not None else {}
    try:
        credentials = resolve_credentials(
            meta.get("shoal.access_key"), meta.get("shoal.secret_key"), meta.get("shoal.credentials_file")
        )
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    return ClientSettings(credentials=credentials, tls=_tls_settings(meta))


@contextmanager
def _admin(namesrv_addr: str) -> Iterator[BlockingAdmin]:
    admin = BlockingAdmin(namesrv_addr, client_settings=_settings())
    try:
        admin.start()
        yield admin
    except MQClientError as error:
        raise click.ClickException(str(error)) from None
    finally:
        admin.shutdown()


def _topic_exists(client: BlockingAdmin, topic: str) -> bool:
    """Whether any NameServer routes `topic` (GET_ROUTEINFO_BY_TOPIC answers TOPIC_NOT_EXIST)."""
    try:
        client.topic_route(topic)
    except MQBrokerError as error:
        if error.code == ResponseCode.TOPIC_NOT_EXIST:
            return False
        raise
    return True


def _require_topic(client: BlockingAdmin, topic: str) -> None:
    if not _topic_exists(client, topic):
        raise click.ClickException(f"topic {topic!r} does not exist (`shoal admin topics` lists the topics)")


def check_tag_expression(expression: str) -> str:
    """`*` or tags joined by `||`; refuses what RocketMQ would silently read as something else:
    an empty tag (`TagA ||`) or a single `|` (`TagA | TagB` is one tag named "TagA | TagB")."""
    if expression.strip() in ("", "*"):
        return "*"
    for part in expression.split("||"):
        tag = part.strip()
        if not tag:
            raise click.BadParameter(f"{expression!r} has an empty tag; write 'TagA || TagB', or '*' for all")
        if "|" in tag:
            raise click.BadParameter(f"{expression!r}: tags are joined by '||', not '|'")
        if tag == "*":
            raise click.BadParameter(f"{expression!r}: '*' matches everything and cannot be combined with tags")
    return expression


def _message_json(message: MessageExt) -> str:
    return json.dumps(
        {
            "msgId": message.msg_id,
            "offsetMsgId": message.offset_msg_id,
            "topic": message.topic,
            "tags": message.tags,
            "keys": list(message.keys),
            "queueId": message.queue_id,
            "queueOffset": message.queue_offset,
            "storeTimestamp": message.store_timestamp_ms,
            "reconsumeTimes": message.reconsume_times,
            "properties": dict(message.properties),
            "body": message.body.decode("utf-8", errors="replace"),
        }
    )


@click.group()
@credential_options
@tls_options
def admin() -> None:
    """Inspect and change a running cluster (topics, routes, consumer progress, messages)."""


@admin.command()
@NAMESRV_OPTION
def cluster(namesrv_addr: str) -> None:
    """Clusters, broker names and broker addresses known to the NameServer."""
    with _admin(namesrv_addr) as client:
        info = client.cluster_info()
    for name, brokers in sorted(info.cluster_addr_table.items()):
        click.echo(name)
        for broker in brokers:
            data = info.broker_addr_table.get(broker)
            addrs = ", ".join(f"{bid}={addr}" for bid, addr in sorted((data.broker_addrs if data else {}).items()))
            click.echo(f"  {broker}: {addrs}")


@admin.command()
@NAMESRV_OPTION
def topics(namesrv_addr: str) -> None:
    """Every topic the NameServer routes."""
    with _admin(namesrv_addr) as client:
        for topic in sorted(client.topic_list()):
            click.echo(topic)


@admin.command(name="topic-create")
@NAMESRV_OPTION
@click.argument("topic")
@click.option("--cluster", "cluster_name", default="DefaultCluster", show_default=True)
@click.option("--queues", default=8, show_default=True, help="Read and write queue count.")
@click.option("--order/--no-order", default=False)
@click.option(
    "-a",
    "--attributes",
    default=None,
    help="RocketMQ 5 topic attributes to add (+) or remove (-), as mqadmin's updateTopic -a takes them: "
    "'+message.type=FIFO' (NORMAL, FIFO, DELAY, TRANSACTION; MIXED where the broker has enableMixedMessageType). "
    "RocketMQ 5 clients may only send messages of the topic's type.",
)
def topic_create(
    namesrv_addr: str, topic: str, cluster_name: str, queues: int, order: bool, attributes: str | None
) -> None:
    """Create or update TOPIC on every master of a cluster."""
    with _admin(namesrv_addr) as client:
        brokers = client.create_topic(
            topic,
            cluster=cluster_name,
            read_queue_nums=queues,
            write_queue_nums=queues,
            order=order,
            attributes=attributes,
        )
    click.echo(f"{topic}: {queues} queues on {', '.join(brokers)}" + (f" ({attributes})" if attributes else ""))


@admin.command(name="topic-delete")
@NAMESRV_OPTION
@click.argument("topic")
@click.option("--cluster", "cluster_name", default="DefaultCluster", show_default=True)
def topic_delete(namesrv_addr: str, topic: str, cluster_name: str) -> None:
    """Delete TOPIC from a cluster's brokers and the NameServer."""
    with _admin(namesrv_addr) as client:
        _require_topic(client, topic)
        client.delete_topic(topic, cluster=cluster_name)
    click.echo(f"{topic}: deleted")


@admin.command()
@NAMESRV_OPTION
@click.argument("topic")
def route(namesrv_addr: str, topic: str) -> None:
    """The route of TOPIC: queues and brokers (JSON)."""
    with _admin(namesrv_addr) as client:
        click.echo(client.topic_route(topic).to_json().decode())


@admin.command(name="topic-stats")
@NAMESRV_OPTION
@click.argument("topic")
def topic_stats(namesrv_addr: str, topic: str) -> None:
    """Min and max offsets of every queue of TOPIC."""
    with _admin(namesrv_addr) as client:
        stats = client.topic_stats(topic)
    for mq, offsets in sorted(stats.offset_table.items(), key=lambda item: (item[0].broker_name, item[0].queue_id)):
        click.echo(f"{mq.broker_name} q{mq.queue_id}: min {offsets.min_offset} max {offsets.max_offset}")


@admin.command()
@NAMESRV_OPTION
@click.argument("group")
@click.option("--topic", default=None)
def progress(namesrv_addr: str, group: str, topic: str | None) -> None:
    """Consumer progress of GROUP: broker offset, consumer offset and lag per queue."""
    with _admin(namesrv_addr) as client:
        if topic is not None:
            _require_topic(client, topic)
        queues = client.consumer_progress(group, topic)
    if not queues:  # RocketMQ's mqadmin: "Not found the consumer group consume stats"
        about = f" on topic {topic!r}" if topic else ""
        raise click.ClickException(
            f"consumer group {group!r} has no consume progress{about}: unknown group, or it has not consumed yet"
        )
    total = 0
    for item in queues:
        total += item.lag
        click.echo(
            f"{item.mq.topic} {item.mq.broker_name} q{item.mq.queue_id}: broker {item.broker_offset} "
            f"consumer {item.consumer_offset} lag {item.lag}"
        )
    click.echo(f"total lag {total}")


@admin.command(name="msg-by-id")
@NAMESRV_OPTION
@click.argument("offset_msg_id")
def msg_by_id(namesrv_addr: str, offset_msg_id: str) -> None:
    """The message with OFFSET_MSG_ID (the broker-assigned id), as JSON."""
    with _admin(namesrv_addr) as client:
        click.echo(_message_json(client.view_message(offset_msg_id)))


@admin.command(name="msg-by-key")
@NAMESRV_OPTION
@click.argument("topic")
@click.argument("key")
def msg_by_key(namesrv_addr: str, topic: str, key: str) -> None:
    """Messages of TOPIC whose KEYS or UNIQ_KEY equal KEY, one JSON line each."""
    with _admin(namesrv_addr) as client:
        found = client.query_message(topic, key)
    for message in found:
        click.echo(_message_json(message))
    if not found:
        raise click.ClickException(f"no message with key {key!r} in {topic}")


@admin.command()
@NAMESRV_OPTION
@click.argument("group")
@click.option("-c", "--count", default=32, show_default=True, help="List at most this many (oldest first).")
def dlq(namesrv_addr: str, group: str, count: int) -> None:
    """Dead letters of GROUP (%DLQ%GROUP), one JSON line each; resend one with dlq-resend."""
    with _admin(namesrv_addr) as client:
        found = client.dlq_messages(group, count)
    for message in found:
        click.echo(_message_json(message))
    click.echo(f"{len(found)} dead letter(s) of {group}", err=True)


@admin.command(name="dlq-resend")
@NAMESRV_OPTION
@click.argument("group")
@click.argument("offset_msg_id")
@click.option(
    "--to-retry-topic",
    is_flag=True,
    help="Send to %RETRY%GROUP (only GROUP consumes it) instead of the original topic (every group does).",
)
def dlq_resend(namesrv_addr: str, group: str, offset_msg_id: str, to_retry_topic: bool) -> None:
    """Send the dead letter OFFSET_MSG_ID of GROUP again, with fresh reconsume times."""
    with _admin(namesrv_addr) as client:
        try:
            result = client.resend_dlq_message(group, offset_msg_id, to_retry_topic=to_retry_topic)
        except ValueError as error:
            raise click.ClickException(str(error)) from None
    click.echo(
        f"{result.status.name} topic={result.message_queue.topic} msgId={result.msg_id} "
        f"offsetMsgId={result.offset_msg_id} queue={result.message_queue.queue_id} queueOffset={result.queue_offset}"
    )


@admin.command(name="ha-status")
@click.argument("broker_addr")
@click.option("--json", "as_json", is_flag=True, help="Print the broker's HA fields as JSON.")
def ha_status(broker_addr: str, as_json: bool) -> None:
    """Replication status of the broker at BROKER_ADDR: role, epoch, slaves or master, lag."""
    with _admin(broker_addr) as client:
        try:
            table = client.runtime_info(broker_addr)
        except MQClientError as error:
            raise click.ClickException(f"{broker_addr}: {error}") from None
    if as_json:
        fields = {k: v for k, v in table.items() if k.startswith("ha") or k in ("brokerRole", "brokerId")}
        click.echo(json.dumps(fields, sort_keys=True))
        return
    status = ha_status_of(table)
    head = f"{broker_addr}: {status.role} brokerId {status.broker_id} epoch {status.epoch}"
    lag = f"lag {status.lag_bytes} bytes / {status.lag_ms} ms" if status.lag_bytes >= 0 else "lag unknown"
    if not status.is_master:
        connected = "connected" if status.master_connected else "NOT connected"
        click.echo(f"{head}; master {status.master_address or '?'} {connected}; {lag}")
        click.echo(f"  confirmed offset {status.confirmed_offset}  {status.last_error}".rstrip())
        return
    if not status.slaves:
        click.echo(f"{head}; no slave connected; confirmed offset {status.confirmed_offset}")
        return
    click.echo(f"{head}; {len(status.slaves)} slave(s) connected; confirmed offset {status.confirmed_offset}; {lag}")
    for slave in status.slaves:
        click.echo(
            f"  slave {slave.address}: acked {slave.ack_offset}, lag {slave.lag_bytes} bytes / {slave.lag_ms} ms"
        )


@admin.command()
@click.argument("broker_addr")
@click.option("--epoch", type=int, default=None, help="The new epoch (default: the broker's epoch + 1).")
@click.option("--role", type=click.Choice(["ASYNC_MASTER", "SYNC_MASTER"]), default="ASYNC_MASTER", show_default=True)
@click.option("--force", is_flag=True, help="Promote even while a master still feeds this slave (split brain risk).")
def promote(broker_addr: str, epoch: int | None, role: str, force: bool) -> None:
    """Promote the slave at BROKER_ADDR to master of its group (Shoal's PROMOTE_TO_MASTER, 9001).

    Refused when the slave holds less than its master acknowledged. The old master, when it
    returns, finds the newer epoch and rejoins as a slave, dropping what it wrote alone."""
    with _admin(broker_addr) as client:
        try:
            result = client.promote(broker_addr, epoch=epoch, role=role, force=force)
        except MQBrokerError as error:
            raise click.ClickException(f"promotion refused: {error.remark}") from None
        except MQClientError as error:
            raise click.ClickException(f"{broker_addr}: {error}") from None
    click.echo(f"{broker_addr}: {result.role} at epoch {result.epoch} from offset {result.start_offset}")


@click.command()
@NAMESRV_OPTION
@credential_options
@tls_options
@click.argument("topic")
@click.option("-c", "--count", default=1, show_default=True, help="Messages to send.")
@click.option("-b", "--body", default="hello", show_default=True, help="Body text ({n} is the message number).")
@click.option("--tags", default=None)
@click.option("--keys", default=None, help="Space-separated keys ({n} is the message number).")
@click.option("--group", default="PID_shoal_cli", show_default=True)
def produce(
    namesrv_addr: str, topic: str, count: int, body: str, tags: str | None, keys: str | None, group: str
) -> None:
    """Send COUNT messages to TOPIC and print each send result."""
    with _admin(namesrv_addr) as client:
        is_new = not _topic_exists(client, topic)
    if is_new:
        click.echo(
            f"topic {topic!r} does not exist: the broker creates it on the first send if autoCreateTopicEnable is on "
            "(check the spelling; `shoal admin topics` lists the topics)",
            err=True,
        )
    producer = BlockingProducer(group, namesrv_addr, client_settings=_settings())
    producer.start()
    try:
        started = time.monotonic()
        for number in range(count):
            message = Message(
                topic,
                body.format(n=number).encode(),
                tags=tags,
                keys=tuple(keys.format(n=number).split()) if keys else (),
            )
            result = producer.send(message)
            click.echo(
                f"{result.status.name} msgId={result.msg_id} offsetMsgId={result.offset_msg_id} "
                f"queue={result.message_queue.queue_id} queueOffset={result.queue_offset}"
            )
        click.echo(f"sent {count} in {time.monotonic() - started:.3f} s", err=True)
        if is_new and count:
            click.echo(f"topic {topic!r} was created by the broker", err=True)
    except MQClientError as error:
        raise click.ClickException(str(error)) from None
    finally:
        producer.shutdown()


@click.command()
@NAMESRV_OPTION
@credential_options
@tls_options
@click.argument("topic")
@click.option("--group", default="CID_shoal_cli", show_default=True)
@click.option(
    "--expression",
    default="*",
    show_default=True,
    callback=lambda _context, _param, value: check_tag_expression(value),
    help="Tag expression, e.g. 'TagA || TagB'.",
)
@click.option("-c", "--count", default=0, help="Stop after this many messages (0: until --timeout).")
@click.option("--timeout", "timeout_s", default=10.0, show_default=True, help="Stop after this many idle seconds.")
@click.option("--from-first/--from-last", default=True, help="Where a new group starts.")
def consume(
    namesrv_addr: str, topic: str, group: str, expression: str, count: int, timeout_s: float, from_first: bool
) -> None:
    """Consume TOPIC with a push consumer and print each message as a JSON line."""
    with _admin(namesrv_addr) as client:
        _require_topic(client, topic)
    received = 0
    last = time.monotonic()
    lock = threading.Lock()

    def listener(messages: list[MessageExt]) -> ConsumeStatus:
        nonlocal received, last
        with lock:
            for message in messages:
                click.echo(_message_json(message))
            received += len(messages)
            last = time.monotonic()
        return ConsumeStatus.CONSUME_SUCCESS

    where = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET if from_first else ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consumer = BlockingPushConsumer(group, namesrv_addr, consume_from_where=where, client_settings=_settings())
    consumer.set_listener(listener)
    consumer.subscribe(topic, expression)
    consumer.start()
    try:
        while (count == 0 or received < count) and time.monotonic() - last < timeout_s:
            time.sleep(0.05)
    finally:
        consumer.shutdown()
    click.echo(f"consumed {received} message(s)", err=True)
