"""shoal.dashboard: a web UI for operators on call, on the admin API every RocketMQ 4.x broker speaks
(so it shows Apache RocketMQ 4.9.7 clusters as well as Shoal's): cluster, topics, consumer groups
with their lag, messages and their traces, dead letters, producers, broker settings, ACL accounts.

Server-rendered (aiohttp + Jinja2, charts as inline SVG): no script runs in the browser. `serve`
runs it; `build_app` gives the aiohttp application (tests, embedding)."""

from __future__ import annotations

from shoal.dashboard.server import build_app, serve
from shoal.dashboard.settings import DashboardSettings

__all__ = ["DashboardSettings", "build_app", "serve"]
