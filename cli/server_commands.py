"""`shoal namesrv`, `shoal broker`, `shoal proxy` and `shoal local`: run the processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import click

try:
    import uvloop
except ImportError:  # optional: a faster event loop where it builds
    uvloop = None  # type: ignore[assignment]

from shoal.broker.broker import BrokerController
from shoal.broker.config import BrokerSettings, load_broker_settings
from shoal.cli.local_demo import round_trip
from shoal.cli.startup_errors import one_line_startup_errors
from shoal.namesrv.config import NamesrvConfig, load_namesrv_config
from shoal.namesrv.name_server import NameServer
from shoal.protocol.acl_signature import Credentials
from shoal.proxy import ProxyServer, ProxySettings
from shoal.proxy.limits import GRPC_PORT
from shoal.remoting.heap import freeze_startup_heap
from shoal.remoting.settings import load_tls_config, parse_properties
from shoal.store import limits as store_limits

log = logging.getLogger("shoal")

SWITCH_INTERVAL_S = 0.0005  # lets the flush/dispatch threads get the GIL back quickly (performance.md §1.5)


def run_until_signal(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run `main(stop)` on uvloop when available; SIGTERM/SIGINT set `stop` for a graceful exit."""
    sys.setswitchinterval(SWITCH_INTERVAL_S)

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await main(stop)

    if uvloop is None:
        asyncio.run(runner())
    else:
        uvloop.run(runner())


def serving() -> None:
    """Once a command's servers are up: what starting them made leaves the garbage collector's
    walks for the process's life (remoting/heap.py)."""
    frozen = freeze_startup_heap()
    log.info("%d objects made at start frozen out of garbage collections", frozen)


def _read_conf(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    try:
        return parse_properties(path.read_text())
    except (OSError, ValueError) as error:
        raise click.ClickException(f"{path}: {error}") from None


@click.command()
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="namesrv.conf (Java properties).",
)
@click.option("--port", type=int, default=None, help="Listen port (default 9876, or listenPort from the file).")
@click.option("--host", default=None, help="Interface to bind (default 0.0.0.0, or listenHost from the file).")
def namesrv(config_path: Path | None, port: int | None, host: str | None) -> None:
    """Run a NameServer: brokers register with it, clients ask it for routes."""
    conf = _read_conf(config_path)
    if port is not None:
        conf["listenPort"] = str(port)
    if host is not None:
        conf["listenHost"] = host
    with one_line_startup_errors():
        config, unknown = load_namesrv_config(conf)
        tls = load_tls_config(conf)
    for key in unknown:
        log.warning("namesrv.conf: unknown key %s ignored", key)

    async def main(stop: asyncio.Event) -> None:
        with one_line_startup_errors():
            server = NameServer(config, tls)
        with one_line_startup_errors():
            bound = await server.start()
        click.echo(f"NameServer listening on port {bound}", err=True)
        serving()
        await stop.wait()
        await server.stop()

    run_until_signal(main)


@click.command()
@click.option(
    "-c",
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="broker.conf (RocketMQ key names); missing keys take the embedded defaults.",
)
@click.option("-n", "--namesrv-addr", default=None, help="NameServer addresses, ';'-separated (overrides namesrvAddr).")
@click.option("--store-dir", type=click.Path(path_type=Path), default=None, help="storePathRootDir override.")
@click.option("--port", type=int, default=None, help="listenPort override (0: any free port).")
@click.option(
    "--grpc-port",
    type=int,
    default=None,
    help="Also serve RocketMQ 5 clients (gRPC) on this port from the broker's process, as RocketMQ 5's "
    "local proxy mode does (0: any free port; -1: not). Overrides grpcServerPort (default -1).",
)
def broker(
    config_path: Path | None, namesrv_addr: str | None, store_dir: Path | None, port: int | None, grpc_port: int | None
) -> None:
    """Run a Broker: stores messages and serves producers and consumers."""
    conf = _read_conf(config_path)
    if namesrv_addr:
        conf["namesrvAddr"] = namesrv_addr
    if store_dir is not None:
        conf["storePathRootDir"] = str(store_dir)
    if port is not None:
        conf["listenPort"] = str(port)
    if grpc_port is not None:
        conf["grpcServerPort"] = str(grpc_port)
    with one_line_startup_errors():
        settings = load_broker_settings(conf, config_path=config_path)
    for key in settings.unknown_keys:
        log.warning("broker.conf: key %s is not used by Shoal", key)

    async def main(stop: asyncio.Event) -> None:
        with one_line_startup_errors():
            controller = BrokerController(settings)
            await controller.start()
        click.echo(f"Broker {settings.broker.broker_name} listening on port {controller.port}", err=True)
        proxy: ProxyServer | None = None
        if settings.broker.grpc_server_port >= 0:
            try:
                with one_line_startup_errors():
                    proxy = ProxyServer(local_proxy_settings(settings, settings.broker.grpc_server_port))
                    bound = await proxy.start()
            except BaseException:
                await controller.stop()
                raise
            click.echo(f"gRPC proxy listening on port {bound}", err=True)
        serving()
        await stop.wait()
        if proxy is not None:
            await proxy.stop()
        await controller.stop()

    run_until_signal(main)


@click.command()
@click.option("-n", "--namesrv-addr", required=True, help="NameServer addresses, ';'-separated.")
@click.option("--port", type=int, default=GRPC_PORT, show_default=True, help="gRPC port (0: any free port).")
@click.option("--host", default="0.0.0.0", show_default=True, help="Interface to bind.")
@click.option(
    "--advertised-host",
    default=None,
    help="Host clients are told to connect to in routes (default: --host, or 127.0.0.1 for 0.0.0.0).",
)
@click.option(
    "--acl-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="plain_acl.yml: check every call's MQv2-HMAC-SHA1 signature and permissions (reloaded on change).",
)
@click.option(
    "--access-key", envvar="SHOAL_ACCESS_KEY", default=None, help="The proxy's account for brokers with aclEnable."
)
@click.option("--secret-key", envvar="SHOAL_SECRET_KEY", default=None, help="Its secret key (or env SHOAL_SECRET_KEY).")
@click.option(
    "--tls-cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain): the gRPC port then speaks TLS only (needs --tls-key).",
)
@click.option(
    "--tls-key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None, help="Its PEM key."
)
@click.option(
    "--topic-message-type-check/--no-topic-message-type-check",
    default=True,
    show_default=True,
    help="Refuse a send whose type (normal, FIFO, delay, transaction) is not its topic's message.type "
    "attribute (NORMAL when unset), as RocketMQ 5's proxy does (enableTopicMessageTypeCheck).",
)
def proxy(
    namesrv_addr: str,
    port: int,
    host: str,
    advertised_host: str | None,
    acl_file: Path | None,
    access_key: str | None,
    secret_key: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    topic_message_type_check: bool,
) -> None:
    """Run a gRPC proxy for RocketMQ 5 clients (apache.rocketmq.v2.MessagingService).

    It serves the official v5 clients (Java rocketmq-client-java, Python rocketmq-python-client,
    Go rocketmq-clients) in front of every broker the NameServers know, as RocketMQ 5's proxy does
    in cluster mode: sends, and POP consumption (SimpleConsumer, PushConsumer) through the brokers.
    """
    addresses = tuple(address.strip() for address in namesrv_addr.split(";") if address.strip())
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("--access-key and --secret-key go together")
    if (tls_cert is None) != (tls_key is None):
        raise click.UsageError("--tls-cert and --tls-key go together")
    settings = ProxySettings(
        namesrv_addrs=addresses,
        host=host,
        port=port,
        advertised_host=advertised_host,
        plain_acl_file=acl_file,
        credentials=Credentials(access_key, secret_key) if access_key and secret_key else None,
        tls_cert=tls_cert,
        tls_key=tls_key,
        check_message_type=topic_message_type_check,
    )

    async def main(stop: asyncio.Event) -> None:
        with one_line_startup_errors():
            server = ProxyServer(settings)
            bound = await server.start()
        click.echo(f"gRPC proxy listening on port {bound} (NameServers {';'.join(addresses)})", err=True)
        serving()
        await stop.wait()
        await server.stop()

    run_until_signal(main)


def local_proxy_settings(settings: BrokerSettings, port: int) -> ProxySettings:
    """The gRPC proxy a broker runs beside itself: its NameServers, listen host and ACL file, and
    its own account towards the brokers."""
    config, tls = settings.broker, settings.tls.server
    serve_tls = tls.serves_tls and bool(tls.cert_path and tls.key_path)
    credentials = Credentials(config.access_key, config.secret_key) if config.access_key else None
    return ProxySettings(
        namesrv_addrs=tuple(config.namesrv_addresses),
        host=config.listen_host,
        port=port,
        advertised_host=config.advertised_address.rpartition(":")[0],  # brokerIP1, as clients reach the broker
        plain_acl_file=Path(config.plain_acl_file) if config.acl_enable and config.plain_acl_file else None,
        credentials=credentials,
        # gRPC cannot offer plain and TLS on one port; v5 clients default to TLS, so a broker that
        # serves TLS at all (enforcing or permissive) serves it on the gRPC port.
        tls_cert=Path(tls.cert_path) if serve_tls else None,
        tls_key=Path(tls.key_path) if serve_tls else None,
        remoting_tls=settings.tls.client,
        check_message_type=config.enable_topic_message_type_check,
    )


LOCAL_STORE_CONF = {
    # RocketMQ's sizes (1 GiB CommitLog segments, a 420 MB IndexFile, 6 MB per ConsumeQueue file)
    # are for servers; a laptop cluster gets files of a few MB (docs/operations.md, "Sizes").
    "mappedFileSizeCommitLog": str(16 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(60_000 * 20),
    "maxIndexNum": "100000",  # maxHashSlotNum stays RocketMQ's: readers of the IndexFile assume it
}
"""Store sizes for `shoal local`: 16 MiB segments, 1.2 MB ConsumeQueue files, a 22 MB IndexFile."""


def load_local_settings(data_dir: Path, namesrv_port: int, broker_port: int) -> BrokerSettings:
    """The embedded config with LOCAL_STORE_CONF, on loopback, the store in DATA_DIR/store."""
    return load_broker_settings(
        {
            **LOCAL_STORE_CONF,
            "namesrvAddr": f"127.0.0.1:{namesrv_port}",
            "listenPort": str(broker_port),
            "listenHost": "127.0.0.1",  # a local cluster is for this machine only
            "metricsHost": "127.0.0.1",
            "storePathRootDir": str(data_dir.resolve() / "store"),
        }
    )


def local_allocation_text(settings: BrokerSettings) -> str:
    """What the local store allocates, for a person deciding whether their disk can take it."""
    store_settings = settings.store
    segment_bytes = store_settings.commitlog.segment_size_bytes
    queue_file_bytes = store_settings.consume_queue.units_per_file * store_limits.CONSUME_QUEUE_UNIT_SIZE_BYTES
    index_bytes = (
        store_limits.INDEX_HEADER_SIZE_BYTES
        + store_settings.index.hash_slots * store_limits.INDEX_HASH_SLOT_SIZE_BYTES
        + store_settings.index.entries * store_limits.INDEX_ENTRY_SIZE_BYTES
    )
    mib = 1024 * 1024
    return (
        f"store {store_settings.root_dir}: CommitLog segments of {segment_bytes / mib:.0f} MiB "
        "(the next one preallocated), "
        f"ConsumeQueue files of {queue_file_bytes / mib:.1f} MiB per queue, IndexFile {index_bytes / mib:.1f} MiB; "
        f"about {(2 * segment_bytes + index_bytes) / mib:.0f} MiB to start"
    )


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=Path("data"),
    show_default=True,
    help="Where the store lives (the store itself is DATA_DIR/store).",
)
@click.option("--namesrv-port", type=int, default=9876, show_default=True)
@click.option("--broker-port", type=int, default=10911, show_default=True)
@click.option(
    "--demo/--no-demo",
    default=False,
    help="Produce and consume a few messages once the cluster is up, then keep running.",
)
@click.option(
    "--exit-after-demo",
    is_flag=True,
    default=False,
    help="With --demo: shut down cleanly once the demo is done (exit 1 if it failed), for scripts and CI.",
)
@click.option(
    "--grpc-port",
    type=int,
    default=GRPC_PORT,
    show_default=True,
    help="Port of the gRPC proxy for RocketMQ 5 clients (0: any free port; -1: no proxy).",
)
def local(
    data_dir: Path, namesrv_port: int, broker_port: int, demo: bool, exit_after_demo: bool, grpc_port: int
) -> None:
    """Run a NameServer, a Broker and a gRPC proxy (RocketMQ 5 clients) in one process with the
    embedded default config (Ctrl-C stops).

    The store uses small files (16 MiB CommitLog segments, a 22 MB IndexFile) rather than
    RocketMQ's server sizes; `shoal broker -c broker.conf` uses RocketMQ's.
    """
    if exit_after_demo and not demo:
        raise click.UsageError("--exit-after-demo needs --demo")
    with one_line_startup_errors():
        settings = load_local_settings(data_dir, namesrv_port, broker_port)
    logging.getLogger("shoal.client").setLevel(logging.WARNING)  # the demo narrates the client side itself
    click.echo(local_allocation_text(settings), err=True)
    failed = False

    async def main(stop: asyncio.Event) -> None:
        nonlocal failed
        name_server = NameServer(NamesrvConfig())
        with one_line_startup_errors():
            await name_server.start(host="127.0.0.1", port=namesrv_port)
        try:
            with one_line_startup_errors():
                controller = BrokerController(settings)
                await controller.start()
        except BaseException:
            await name_server.stop()
            raise
        proxy: ProxyServer | None = None
        if grpc_port >= 0:
            proxy = ProxyServer(
                ProxySettings(namesrv_addrs=(f"127.0.0.1:{namesrv_port}",), host="127.0.0.1", port=grpc_port)
            )
            try:
                with one_line_startup_errors():
                    await proxy.start()
            except BaseException:
                await controller.stop()
                await name_server.stop()
                raise
        serving_text = (
            f"NameServer 127.0.0.1:{namesrv_port}, broker {settings.broker.broker_name} "
            f"127.0.0.1:{controller.port} (VIP channel :{controller.vip_port}), "
            f"metrics http://127.0.0.1:{controller.metrics_port}/metrics"
            + (f", gRPC for RocketMQ 5 clients 127.0.0.1:{proxy.port}" if proxy is not None else "")
        )
        click.echo(f"local cluster up: {serving_text}, store {settings.store.root_dir}", err=True)
        serving()
        try:
            if demo:
                try:
                    await round_trip(f"127.0.0.1:{namesrv_port}")
                except Exception as error:  # the cluster stays up for a look at what went wrong
                    failed = True
                    text = error.format_message() if isinstance(error, click.ClickException) else repr(error)
                    click.echo(f"[demo] failed: {text}", err=True)
            if not exit_after_demo:
                click.echo(
                    f"still serving ({serving_text}); point your clients at namesrvAddr=127.0.0.1:{namesrv_port}. "
                    "Ctrl-C (or SIGTERM) stops the cluster cleanly.",
                    err=True,
                )
                await stop.wait()
        finally:
            click.echo("stopping the local cluster ...", err=True)
            if proxy is not None:
                await proxy.stop()
            await controller.stop()
            await name_server.stop()
            click.echo("local cluster stopped", err=True)

    run_until_signal(main)
    if failed:
        sys.exit(1)
