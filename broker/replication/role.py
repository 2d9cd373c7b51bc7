"""The broker's role (master or slave) and brokerId while it runs.

broker.conf gives the first value, `config/epoch.json` may override it at start, and promotion
and fencing change it at run time. `ReplicationService` owns the one `BrokerRoleState` and is the
only writer; everything else reads it (`broker.role.is_master`). `BrokerConfig` stays what
broker.conf said: it is never rewritten.

What else must follow a role change (the delay service runs on a master only, the GET_ALL_DELAY_OFFSET
answer for slaves) reaches replication as `RoleHooks`, given at start, instead of replication
reaching into the broker for its parts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from shoal.broker.config import BrokerRole


@dataclass(slots=True)
class BrokerRoleState:
    role: BrokerRole
    broker_id: int
    """0 on a master, above 0 on a slave (RocketMQ's BrokerStartup rules)."""

    @property
    def is_master(self) -> bool:
        return self.role is not BrokerRole.SLAVE

    @property
    def sync_master(self) -> bool:
        return self.role is BrokerRole.SYNC_MASTER

    def switch(self, role: BrokerRole, broker_id: int) -> None:
        assert broker_id >= 0, broker_id
        self.role, self.broker_id = role, broker_id


@dataclass(frozen=True, slots=True)
class RoleHooks:
    """What the broker does when its role changes, and what replication serves on its behalf."""

    became_master: Callable[[], None]
    """After a promotion: start the work a master alone does (delivering delayed messages)."""
    became_slave: Callable[[], Awaitable[None]]
    """While being fenced, before following the new master: stop that work."""
    delay_offsets: Callable[[], bytes]
    """delayOffset.json's text, for GET_ALL_DELAY_OFFSET from our slaves."""
