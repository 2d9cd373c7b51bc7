"""Bounds of the NameServer, with units, in one place (its connections': `shoal.remoting.limits`)."""

from __future__ import annotations

BROKER_EXPIRED_TIMEOUT_MS = 120_000  # NameServer brokerChannelExpiredTime: no registration this long drops a broker
