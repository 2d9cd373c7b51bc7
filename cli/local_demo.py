"""The produce/consume round trip `shoal local --demo` (and so `make run`) shows."""

from __future__ import annotations

import click


async def round_trip(namesrv_addr: str) -> None:
    """Placeholder replaced below once shoal.client exists."""
    click.echo(f"cluster at {namesrv_addr}", err=True)
