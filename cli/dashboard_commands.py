"""`shoal dashboard`: the web UI (shoal.dashboard) for a cluster's NameServers."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import click

from shoal.cli.client_commands import NAMESRV_OPTION
from shoal.cli.server_commands import run_until_signal
from shoal.cli.startup_errors import one_line_startup_errors
from shoal.dashboard import DashboardSettings, serve
from shoal.dashboard.limits import DEFAULT_HOST, DEFAULT_PORT, SAMPLE_INTERVAL_S


@click.command()
@NAMESRV_OPTION
@click.option("--host", default=DEFAULT_HOST, show_default=True, help="Interface to bind (loopback unless told).")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="HTTP port.")
@click.option(
    "--acl-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="plain_acl.yml whose accounts log in (admin: true for changes). Without it there is no login, "
    "everyone is admin, and only a loopback --host is allowed.",
)
@click.option(
    "--access-key", envvar="SHOAL_ACCESS_KEY", default="", help="The dashboard's own account (background charts)."
)
@click.option("--secret-key", envvar="SHOAL_SECRET_KEY", default="", help="Its secret key (or env SHOAL_SECRET_KEY).")
@click.option(
    "--sample-interval",
    type=float,
    default=SAMPLE_INTERVAL_S,
    show_default=True,
    help="Seconds between the samples of TPS and lag the charts draw.",
)
def dashboard(
    namesrv_addr: str,
    host: str,
    port: int,
    acl_file: Path | None,
    access_key: str,
    secret_key: str,
    sample_interval: float,
) -> None:
    """Serve the web dashboard: cluster, topics, consumer groups and their lag, messages and traces,
    dead letters, producers, broker settings and ACL accounts, with TPS and lag charts.

    It speaks the admin protocol of RocketMQ 4.x, so it shows Apache RocketMQ clusters too.
    """
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("--access-key and --secret-key go together")
    try:
        settings = DashboardSettings(
            namesrv=namesrv_addr,
            host=host,
            port=port,
            acl_file=acl_file,
            access_key=access_key,
            secret_key=secret_key,
            sample_interval_s=sample_interval,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from None

    async def main(stop: asyncio.Event) -> None:
        with one_line_startup_errors():
            task = asyncio.create_task(serve(settings, lambda url: click.echo(f"dashboard on {url}", err=True)))
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        task.cancel()
        stopped.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    run_until_signal(main)
