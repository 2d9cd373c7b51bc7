"""Promotion and fencing, beyond RocketMQ 4.x (which cannot switch roles without DLedger).

* PROMOTE_TO_MASTER (Shoal request 9001, `shoal admin promote`): an operator (or the Kubernetes
  operator) makes an in-sync slave the master with a new, higher epoch. Automatic failover is
  deliberately not in the broker: deciding that a master is dead needs a view of the whole group.
* Fencing: before every registration as master, a master asks the NameServers who is brokerId 0
  of its group; if another broker is, and that broker's epoch (GET_BROKER_RUNTIME_INFO `haEpoch`)
  is higher, this master is stale. It turns into a slave of the new master, whose epoch history
  tells it where to cut its CommitLog (`shoal.broker.replication.epoch.divergence_offset`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Protocol

from shoal.broker.config import BrokerRole
from shoal.broker.replication import limits
from shoal.broker.replication.codec import EpochEntry
from shoal.broker.replication.errors import RESPONSE_CODE_OF_ERROR, ReplicationError
from shoal.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode, make_response
from shoal.protocol.route_bodies import BrokerData, ClusterInfo
from shoal.remoting import RemotingClient, RemotingError
from shoal.remoting.server import ServerConnection

log = logging.getLogger(__name__)

PROMOTABLE_ROLES = (BrokerRole.ASYNC_MASTER, BrokerRole.SYNC_MASTER)


@dataclass(frozen=True)
class NewerLeader:
    """The master of our group in a newer epoch, as the NameServer and that master tell it."""

    address: str
    ha_address: str
    epoch: int
    broker_id_for_us: int
    """The id we take as its slave: the lowest free one in the group."""


async def find_newer_leader(
    client: RemotingClient,
    namesrv_addresses: list[str],
    broker_name: str,
    own_address: str,
    own_epoch: int,
    known_older: frozenset[str] = frozenset(),
) -> NewerLeader | None:
    """Ask the NameServers (all at once: a dead one costs one timeout, not one each) for our
    group's brokerId 0; None unless it is another broker of a newer epoch. Unreachable NameServers
    or masters are skipped: fencing needs evidence, not silence. `known_older`: masters whose epoch
    is known to be older (the one a promoted slave followed: a hung master must not delay the
    promotion's registration by a timeout)."""
    groups = await asyncio.gather(*(_group_of(client, namesrv, broker_name) for namesrv in namesrv_addresses))
    for group in groups:
        if group is None:
            continue
        master = group.broker_addrs.get(0)
        if master is None or master == own_address or master in known_older:
            continue
        table = await _runtime_info(client, master)
        if table is None:
            continue
        epoch = _int(table.get("haEpoch"))
        if epoch is None or epoch <= own_epoch:
            continue
        used = {broker_id for broker_id, address in group.broker_addrs.items() if address != own_address}
        free_id = next(candidate for candidate in range(1, limits.BROKER_ID_MAX) if candidate not in used)
        return NewerLeader(master, table.get("haListenAddr", ""), epoch, free_id)
    return None


async def _group_of(client: RemotingClient, namesrv: str, broker_name: str) -> BrokerData | None:
    try:
        response = await client.invoke(
            namesrv, RequestCode.GET_BROKER_CLUSTER_INFO, timeout_s=limits.FENCING_CHECK_TIMEOUT_S
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return ClusterInfo.from_json(response.body or b"{}").broker_addr_table.get(broker_name)
    except (RemotingError, ProtocolError) as error:
        log.debug("fencing check: NameServer %s: %s", namesrv, error)
        return None


async def _runtime_info(client: RemotingClient, address: str) -> dict[str, str] | None:
    try:
        response = await client.invoke(
            address, RequestCode.GET_BROKER_RUNTIME_INFO, timeout_s=limits.FENCING_CHECK_TIMEOUT_S
        )
        if response.code != ResponseCode.SUCCESS or not response.body:
            return None
        table = json.loads(bytes(response.body)).get("table")
    except (RemotingError, ValueError, AttributeError) as error:
        log.debug("fencing check: %s: %s", address, error)
        return None
    return {str(key): str(value) for key, value in table.items()} if isinstance(table, dict) else None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class Promoter(Protocol):
    """What PROMOTE_TO_MASTER asks of the replication service."""

    async def promote(self, epoch: int, role: BrokerRole, *, force: bool = False) -> EpochEntry: ...


class PromoteProcessor:
    """PROMOTE_TO_MASTER (9001): validate the request, let the service promote, answer the outcome."""

    def __init__(self, service: Promoter) -> None:
        self.service = service

    async def __call__(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields or {}
        epoch = _int(fields.get("epoch"))
        if epoch is None or epoch <= 0:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "the new epoch (a positive long) is required")
        try:
            role = BrokerRole(fields.get("brokerRole") or BrokerRole.ASYNC_MASTER.value)
        except ValueError:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"brokerRole {fields.get('brokerRole')!r}?")
        if role not in PROMOTABLE_ROLES:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "promote to ASYNC_MASTER or SYNC_MASTER")
        force = (fields.get("force") or "").lower() == "true"
        log.warning("PROMOTE_TO_MASTER from %s: epoch %d, role %s, force %s", connection.address, epoch, role, force)
        try:
            entry = await self.service.promote(epoch, role, force=force)
        except ReplicationError as error:
            log.warning("promotion refused: %s", error)
            return make_response(
                request, RESPONSE_CODE_OF_ERROR.get(type(error), ResponseCode.SYSTEM_ERROR), str(error)
            )
        return make_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"epoch": str(entry.epoch), "startOffset": str(entry.start_offset), "brokerRole": role.value},
        )
