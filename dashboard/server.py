"""The dashboard's aiohttp application (pages, middlewares, templates, static files, the background
sampler) and `serve`, which runs it on a TCP port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp_jinja2
import jinja2
from aiohttp import web

from shoal.dashboard import pages
from shoal.dashboard.accounts import OPEN_USER
from shoal.dashboard.app import DASHBOARD, Dashboard, cluster_errors, guard, security_headers
from shoal.dashboard.history import run_sampler
from shoal.dashboard.settings import DashboardSettings

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent


async def _sampler(app: web.Application) -> AsyncIterator[None]:
    dashboard = app[DASHBOARD]
    admin = await dashboard.admin_for(OPEN_USER)
    task = asyncio.create_task(run_sampler(admin, dashboard.history, dashboard.settings.sample_interval_s))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await dashboard.close()


def build_app(settings: DashboardSettings) -> web.Application:
    app = web.Application(middlewares=[security_headers, cluster_errors, guard])
    app[DASHBOARD] = Dashboard(settings)
    aiohttp_jinja2.setup(
        app,
        loader=jinja2.FileSystemLoader(PACKAGE_DIR / "templates"),
        autoescape=jinja2.select_autoescape(default=True),
        undefined=jinja2.StrictUndefined,
        context_processors=[aiohttp_jinja2.request_processor],
    )
    pages.add_routes(app)
    app.router.add_static("/static/", PACKAGE_DIR / "static")
    app.cleanup_ctx.append(_sampler)
    return app


async def serve(settings: DashboardSettings, ready: Callable[[str], None] | None = None) -> None:
    """Serve until cancelled; `ready` is told the URL once the socket listens."""
    runner = web.AppRunner(build_app(settings), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.host, settings.port)
    await site.start()
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{settings.port}/"
    log.info(
        "dashboard of %s on %s (%s)",
        settings.namesrv,
        url,
        "accounts of " + str(settings.acl_file) if settings.acl_file else "no login: loopback only",
    )
    if ready is not None:
        ready(url)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
