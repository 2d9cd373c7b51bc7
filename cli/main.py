"""The `shoal` command."""

from __future__ import annotations

import logging

import click

from shoal.cli.client_commands import admin, consume, produce
from shoal.cli.dashboard_commands import dashboard
from shoal.cli.demo import demo, demo_writer
from shoal.cli.server_commands import broker, local, namesrv, proxy
from shoal.cli.spark_commands import spark_group
from shoal.cli.store_commands import store_group
from shoal.cli.trace_commands import trace


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--log-level",
    default=None,
    help="DEBUG, INFO, WARNING or ERROR (default: INFO for servers and the demo, WARNING for client commands).",
)
@click.pass_context
def cli(context: click.Context, log_level: str | None) -> None:
    """Shoal: a RocketMQ-compatible, persistent message broker.

    \b
    shoal local           a NameServer, a Broker and the gRPC proxy in one process (`make run`)
    shoal namesrv         run a NameServer
    shoal broker          run a Broker (-c broker.conf)
    shoal proxy           run the gRPC proxy RocketMQ 5 clients connect to (-n namesrv)
    shoal admin           topics, routes, consumer progress, messages by id or key
    shoal dashboard       the web UI: cluster, topics, groups and lag, messages, traces, DLQ
    shoal produce         send messages;  shoal consume   print consumed messages
    shoal demo            write, crash, recover and read back a store
    shoal store inspect   decode the files of a store directory
    shoal store verify    check every record's CRC and the indexes against the CommitLog
    shoal spark run JOB   analyse a store with Spark (the [spark] extra); spark submit: via spark-submit
    """
    if log_level is None:
        log_level = "INFO" if context.invoked_subcommand in SERVER_COMMANDS else "WARNING"
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


SERVER_COMMANDS = frozenset({"namesrv", "broker", "proxy", "local", "demo", "demo-writer", "dashboard"})

cli.add_command(demo)
cli.add_command(demo_writer)
cli.add_command(store_group)
cli.add_command(spark_group)
cli.add_command(namesrv)
cli.add_command(broker)
cli.add_command(local)
cli.add_command(proxy)
cli.add_command(admin)
cli.add_command(produce)
cli.add_command(consume)
cli.add_command(trace)
cli.add_command(dashboard)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
