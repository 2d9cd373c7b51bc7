"""ReplicationService: master/slave replication for one BrokerController (spec §9, issue 5).

It wires the parts and owns the role:

    master  HAServer (ha_master.py) serves CommitLog bytes to slaves and collects acks;
            ReplicaWaiter (replica_waiter.py) holds SYNC_MASTER sends until a slave has them.
    slave   HAClient (ha_slave.py) follows the master's CommitLog; MetadataSync (slave_sync.py)
            copies topics, offsets, delay offsets and groups every 10 s.
    both    the epoch (epoch.py), promotion and fencing (promotion.py); a fenced master cuts its
            CommitLog with `MessageStore.truncate_to`.

The HA port listens in every role (a slave refuses connections while it is one), so a promotion
needs no new socket. Role changes are serialized by one lock and persisted in config/epoch.json
before they take effect. Everything runs on the broker's event loop.

The role itself is a `BrokerRoleState` (role.py) this service owns and alone changes; the broker
passes `RoleHooks` at start for what must follow a role change.

It is built from broker.conf and the config directory; what it uses of the running broker (the
store, the metadata tables, the broker's address and registration) arrives at `start()` as one
`ReplicatedBroker`, with the remoting server its requests are registered on.

Hooks the broker calls: `start(hooks, broker, server)` before serving, `stop()`, `before_register()` /
`on_registered(response)` around NameServer registration, `wait_replicated(result)` for sends,
`runtime_fields()` and `stats()` for admin and metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from shoal.broker.config import BrokerConfig, BrokerRole
from shoal.broker.replication.codec import EpochEntry, MasterState
from shoal.broker.replication.epoch import EpochFile, EpochState, divergence_offset
from shoal.broker.replication.errors import PromotionRefusedError, StaleEpochError
from shoal.broker.replication.ha_master import HAServer, MasterHooks
from shoal.broker.replication.ha_slave import HAClient, SlaveHooks
from shoal.broker.replication.promotion import NewerLeader, PromoteProcessor, find_newer_leader
from shoal.broker.replication.replica_waiter import ReplicaWaiter
from shoal.broker.replication.role import BrokerRoleState, RoleHooks
from shoal.broker.replication.settings import HASettings
from shoal.broker.replication.slave_sync import MetadataSync
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, ShoalRequestCode, make_response
from shoal.protocol.headers import RegisterBrokerResponseHeader
from shoal.remoting import RemotingClient
from shoal.remoting.tls import TlsConfigError, TlsSettings
from shoal.remoting.tls_listener import PLAIN_TLS, ServerTls
from shoal.store import Arrivals, MessageStore, PutResult, PutStatus, TruncationReport
from shoal.store import limits as store_limits

if TYPE_CHECKING:
    from shoal.broker.group_manager import SubscriptionGroupManager
    from shoal.broker.topic_manager import TopicManager
    from shoal.remoting.server import RemotingServer, ServerConnection
    from shoal.store.metadata import ConsumerOffsetTable

log = logging.getLogger(__name__)

CONFIRMED_PERSIST_INTERVAL_S = 5.0  # a slave records the master's confirmed offset this often
NEWER_EPOCH_CHECK_MIN_INTERVAL_S = 5.0  # hints from the HA port trigger a fencing check at most this often
DISPATCH_ROUNDS_MAX_COUNT = 1_000_000  # a promotion dispatches the backlog in rounds, this many at most


@dataclass(frozen=True, slots=True)
class ReplicatedBroker:
    """What replication uses of its running broker, given at `start()`."""

    store: MessageStore
    topics: TopicManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetTable
    address: str
    """The broker's advertised remoting address (host:port), as the NameServers know it."""
    port: int
    """The bound remoting port; the HA port defaults to the next one."""
    on_append: Callable[[], None]
    """Bytes were replicated into the CommitLog: dispatch them."""
    register_soon: Callable[[], None]
    register_all: Callable[[], Awaitable[None]]


class ReplicationService:
    def __init__(self, config: BrokerConfig, config_dir: Path, *, tls: TlsSettings | None = None) -> None:
        self.config = config
        self.tls = tls or TlsSettings()
        """Slave sync (remoting) uses TLS with useTLS; the HA link only with Shoal's tls.ha.enable."""
        self.config_dir = config_dir
        self._broker: ReplicatedBroker | None = None
        self.epoch_file = EpochFile(config_dir)
        self.epochs: EpochState = self.epoch_file.load()
        self.settings = HASettings.from_broker_config(config)
        self.role = BrokerRoleState(config.broker_role, config.broker_id)
        """The role and brokerId now: broker.conf's, then epoch.json's, then promotion's or fencing's."""
        self._hooks: RoleHooks | None = None
        self.remoting = RemotingClient(ssl_context=self.tls.client.context())
        self.ha_tls = PLAIN_TLS
        if self.tls.ha_enable:
            if not self.tls.server.serves_tls:
                raise TlsConfigError(
                    "tls.ha.enable=true needs tls.server.mode permissive or enforcing and tls.server.certPath/keyPath: "
                    "every broker may become a master and serve the HA port"
                )
            self.ha_tls = ServerTls.from_settings(self.tls.server)
        self.server: HAServer | None = None
        self.client: HAClient | None = None
        self.metadata: MetadataSync | None = None
        self.waiter: ReplicaWaiter | None = None
        self.ha_port = 0
        self.learned_ha_address: str | None = None
        self.master_address: str | None = None
        """The master's remoting address (metadata sync), from the NameServer or fencing."""
        self.last_truncation: TruncationReport | None = None
        self._unsubscribe_dispatch: Callable[[], None] = lambda: None
        self.promotions_total = 0
        self.demotions_total = 0
        self._slave_dead_links_total = 0
        """Master links found dead by earlier HAClients (one per term as a slave)."""
        self._transition = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._checks: set[asyncio.Task[None]] = set()
        self._last_newer_epoch_check_s = 0.0
        self._followed_before_promotion: frozenset[str] = frozenset()
        """The master we followed until our promotion (its epoch is older than ours): the first
        fencing check after it does not wait on that master, which may be hung."""
        self._stopping = False
        if self.epochs.broker_role is not None:
            role = BrokerRole(self.epochs.broker_role)
            broker_id = self.epochs.broker_id if self.epochs.broker_id is not None else config.broker_id
            log.warning(
                "%s sets role %s, brokerId %d (epoch %d) over broker.conf's %s, %d",
                self.epoch_file.path,
                role.value,
                broker_id,
                self.epochs.epoch,
                config.broker_role.value,
                config.broker_id,
            )
            self._switch_role(role, broker_id)
        self._check_role_and_id()

    def _check_role_and_id(self) -> None:
        """RocketMQ's BrokerStartup rules: a master is brokerId 0, a slave's brokerId is above 0."""
        role = self.role
        if not role.is_master and role.broker_id <= 0:
            raise ValueError(f"brokerRole=SLAVE needs brokerId > 0 (it is {role.broker_id})")
        if role.is_master and role.broker_id != 0:
            log.warning("brokerRole=%s: brokerId %d becomes 0", role.role.value, role.broker_id)
            self._switch_role(role.role, 0)

    # --- lifecycle ---
    @property
    def broker(self) -> ReplicatedBroker:
        """The running broker's parts replication uses; they exist from `start()` on."""
        assert self._broker is not None, "replication is not started"
        return self._broker

    async def start(self, hooks: RoleHooks, broker: ReplicatedBroker, server: RemotingServer) -> None:
        """Listen on the HA port, register the admin requests on `server`, then lead or follow."""
        self._broker = broker
        self._hooks = hooks
        loop = asyncio.get_running_loop()
        self.waiter = ReplicaWaiter(loop, self.settings.slave_timeout_s, self._slave_ok)
        master_hooks = MasterHooks(
            lambda: self.role.is_master,
            self.master_state,
            self.waiter.on_ack,
            self._on_newer_epoch,
            self._on_slave_lost,
        )
        self.server = HAServer(broker.store, self.settings, master_hooks)
        self.ha_port = await self._bind(self.server)
        self._unsubscribe_dispatch = broker.store.subscribe(self._on_dispatch)
        server.register(ShoalRequestCode.PROMOTE_TO_MASTER, PromoteProcessor(self))
        if RequestCode.GET_ALL_DELAY_OFFSET not in server.processors:
            server.register(RequestCode.GET_ALL_DELAY_OFFSET, self._all_delay_offsets)
        self._tasks.append(loop.create_task(self._persist_confirmed_loop(), name="ha-confirmed-persist"))
        if self.role.is_master:
            await self.before_register()  # fenced: demote() already follows the new master
        elif self.client is None:
            self._start_following()

    async def stop(self) -> None:
        self._stopping = True
        self._unsubscribe_dispatch()
        tasks = [*self._tasks, *self._checks]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._stop_following()
        if self.waiter is not None:
            self.waiter.fail_all(PutStatus.FLUSH_SLAVE_TIMEOUT)
        if self.server is not None:
            await self.server.stop()
        self._save_confirmed()
        await self.remoting.close()

    async def _bind(self, server: HAServer) -> int:
        """haListenPort, else RocketMQ's listenPort + 1; when that default is taken (by our metrics
        port or another process) any free port: slaves learn it from the NameServer (haServerAddr)."""
        config = self.config
        host = config.listen_host
        if self.settings.listen_port >= 0:
            return await server.start(host, self.settings.listen_port, tls=self.ha_tls)
        port = self.broker.port + 1 if config.listen_port != 0 else 0
        if port and not (config.metrics_port >= 0 and port == config.metrics_port_effective):
            try:
                return await server.start(host, port, tls=self.ha_tls)
            except OSError as error:
                log.warning("HA port %d (listenPort + 1) is not available (%s); using any free port", port, error)
        return await server.start(host, 0, tls=self.ha_tls)

    @property
    def ha_address(self) -> str:
        """`haServerAddr` for the NameServer: our advertised host and the bound HA port."""
        host = self.config.advertised_address.rpartition(":")[0]
        return f"{host}:{self.ha_port}"

    # --- master side ---
    def master_state(self) -> MasterState:
        confirmed = self.waiter.acked_offset if self.waiter is not None else 0
        return MasterState(self.epochs.epoch, confirmed, self.broker.store.max_offset, tuple(self.epochs.history))

    def _slave_ok(self, offset: int) -> bool:
        acked = self.waiter.acked_offset if self.waiter is not None else 0
        return self.server is not None and self.server.slave_ok(offset, acked)

    def _on_slave_lost(self) -> None:
        """A slave connection closed: when no slave is left that could acknowledge our end, the
        waiting SYNC_MASTER sends are answered now instead of at their slaveTimeout (new sends
        get SLAVE_NOT_AVAILABLE at once from `_slave_ok`)."""
        waiter = self.waiter
        if waiter is not None and waiter.waiting_count and not self._slave_ok(self.broker.store.max_offset):
            waiter.give_up()

    def _on_dispatch(self, _arrivals: Arrivals) -> None:
        server = self.server
        if server is not None and server.new_data.waiting:
            server.notify_new_data()

    def wait_replicated(self, result: PutResult) -> asyncio.Future[PutStatus] | None:
        """SYNC_MASTER: a future answering once a slave has the put's bytes (started now, so the
        slave timeout runs alongside the flush); None when this broker does not wait for slaves."""
        append = result.append
        if not self.role.sync_master or append is None or self.waiter is None or self.server is None:
            return None
        self.server.notify_new_data()
        return self.waiter.wait(append.next_offset)

    def _all_delay_offsets(self, _connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET (45) for our slaves, when nobody else answers it."""
        if self._hooks is None:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "no delay offsets on this broker")
        return make_response(request, ResponseCode.SUCCESS, body=self._hooks.delay_offsets())

    # --- slave side ---
    def _master_ha_address(self) -> str | None:
        return self.settings.master_address or self.learned_ha_address

    def _start_following(self) -> None:
        """Follow the master with one HAClient. Two would append the same stream to one CommitLog:
        each finds the log grown by the other (OffsetMismatchError) and redials forever (issue 12)."""
        assert self.client is None and self.metadata is None, "already following a master"
        broker = self.broker
        hooks = SlaveHooks(
            self._master_ha_address,
            lambda: self.epochs.epoch,
            self._reconcile,
            broker.on_append,
            broker.register_soon,
        )
        self.client = HAClient(broker.store, self.settings, hooks)
        if self.tls.ha_enable:  # the tls.client.* settings, whether or not useTLS is on for remoting
            self.client.ssl_context = dataclasses.replace(self.tls.client, enable=True).context()
        self.client.start()
        self.metadata = MetadataSync(
            topics=broker.topics,
            groups=broker.groups,
            offsets=broker.offsets,
            config_dir=self.config_dir,
            client=self.remoting,
            interval_s=self.settings.metadata_sync_interval_s,
            master_address=lambda: self.master_address,
        )
        self.metadata.start()

    async def _stop_following(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.stop()
            self._slave_dead_links_total += client.dead_links_total
            self.epochs.confirmed_offset = max(self.epochs.confirmed_offset, client.confirmed_offset)
        metadata, self.metadata = self.metadata, None
        if metadata is not None:
            await metadata.stop()

    async def _reconcile(self, state: MasterState) -> None:
        """Before following a master: refuse an older epoch; from a newer one, cut what we hold
        beyond the point where our epoch and its history diverge, then take its epoch."""
        ours = self.epochs
        if state.epoch < ours.epoch:
            raise StaleEpochError(
                f"the master is at epoch {state.epoch}, behind ours ({ours.epoch}): it was fenced; not following it"
            )
        if state.epoch == ours.epoch:
            return
        try:
            cut = divergence_offset(state.history, ours.epoch)
        except ValueError as error:
            raise StaleEpochError(str(error)) from None
        end = self.broker.store.wrote_offset
        if cut is not None and end > cut:
            log.warning(
                "epoch %d -> %d: our CommitLog holds %d bytes the new master never had; cutting at %d",
                ours.epoch,
                state.epoch,
                end - cut,
                cut,
            )
            self.last_truncation = self.broker.store.truncate_to(cut)
        ours.adopt(state.epoch, state.history)
        ours.confirmed_offset = state.confirmed_offset
        self.epoch_file.save(ours)

    def on_registered(self, response: RemotingCommand) -> None:
        """REGISTER_BROKER answered: a slave learns its master's HA and remoting addresses (spec §8.10)."""
        if self.role.is_master:
            return
        header = RegisterBrokerResponseHeader.from_ext_fields(response.ext_fields or {})
        if header.ha_server_addr and header.ha_server_addr != self.learned_ha_address:
            log.info("master HA address from the NameServer: %s", header.ha_server_addr)
            self.learned_ha_address = header.ha_server_addr
            if self.client is not None:
                self.client.wakeup()
        if header.master_addr:
            self.master_address = header.master_addr

    async def _persist_confirmed_loop(self) -> None:
        while True:
            await asyncio.sleep(CONFIRMED_PERSIST_INTERVAL_S)
            try:
                self._save_confirmed()
            except OSError:
                log.exception("saving %s failed", self.epoch_file.path)

    def _save_confirmed(self) -> None:
        """A restarted slave still knows how far the master acknowledged: it must not be promoted below it."""
        client = self.client
        if client is not None and client.confirmed_offset > self.epochs.confirmed_offset:
            self.epochs.confirmed_offset = client.confirmed_offset
            self.epoch_file.save(self.epochs)

    # --- role changes ---
    async def promote(self, epoch: int, role: BrokerRole, *, force: bool = False) -> EpochEntry:
        """PROMOTE_TO_MASTER: this slave leads `epoch` from its CommitLog end. Refused when a master
        still feeds us (unless `force`), when we hold less than the master confirmed, or when
        `epoch` is not above ours. Idempotent for a master already leading `epoch`."""
        async with self._transition:
            entry = await self._promote_locked(epoch, role, force)
        await self.broker.register_all()
        return entry

    async def _promote_locked(self, epoch: int, role: BrokerRole, force: bool) -> EpochEntry:
        broker = self.broker
        if self.role.is_master:
            if epoch == self.epochs.epoch:
                return self.epochs.history[-1]
            raise PromotionRefusedError(f"already a master, at epoch {self.epochs.epoch}")
        if epoch <= self.epochs.epoch:
            raise PromotionRefusedError(f"epoch {epoch} is not above this broker's epoch {self.epochs.epoch}")
        store = broker.store
        end = store.wrote_offset
        client = self.client
        confirmed = max(self.epochs.confirmed_offset, client.confirmed_offset if client is not None else 0)
        if client is not None and client.connected and not force:
            raise PromotionRefusedError(
                f"still replicating from a live master ({client.connected_address}); stop it first, or force"
            )
        if end < confirmed:
            raise PromotionRefusedError(
                f"behind: our CommitLog ends at {end} but the master confirmed {confirmed} to producers; "
                "promoting this slave would lose acknowledged messages"
            )
        await self._stop_following()
        for _ in range(DISPATCH_ROUNDS_MAX_COUNT):
            if store.dispatch_now(store_limits.DISPATCH_BATCH_MAX_COUNT) == 0:
                break
        store.rebuild_queue_offsets()
        self.epochs.begin(epoch, end)
        self.epochs.broker_role, self.epochs.broker_id = role.value, 0
        self.epoch_file.save(self.epochs)
        self._switch_role(role, 0)
        assert self.waiter is not None
        self.waiter.reset()
        if self.master_address:
            self._followed_before_promotion = frozenset({self.master_address})
        self.learned_ha_address = self.master_address = None
        self.promotions_total += 1
        if self._hooks is not None:
            self._hooks.became_master()
        log.warning("promoted to %s (brokerId 0) at epoch %d; the epoch starts at offset %d", role.value, epoch, end)
        return EpochEntry(epoch, end)

    async def before_register(self) -> None:
        """A master checks it has not been replaced by a newer epoch before telling the NameServers
        it is the master (fencing); if it has, it turns into a slave of the new master."""
        broker = self.broker
        if not self.role.is_master or self._stopping:
            return
        known_older, self._followed_before_promotion = self._followed_before_promotion, frozenset()
        leader = await find_newer_leader(
            self.remoting,
            self.config.namesrv_addresses,
            self.config.broker_name,
            broker.address,
            self.epochs.epoch,
            known_older,
        )
        if leader is not None:
            await self.demote(leader)

    async def demote(self, leader: NewerLeader) -> None:
        """Fenced: become a slave of `leader`. What we wrote after the group moved on is cut when
        the HA client first hears the new master's epoch history (`_reconcile`)."""
        async with self._transition:
            if not self.role.is_master:
                return
            log.warning(
                "fenced: %s leads epoch %d (ours is %d); this broker becomes its slave with brokerId %d",
                leader.address,
                leader.epoch,
                self.epochs.epoch,
                leader.broker_id_for_us,
            )
            self._switch_role(BrokerRole.SLAVE, leader.broker_id_for_us)
            if self.waiter is not None:
                self.waiter.fail_all(PutStatus.SLAVE_NOT_AVAILABLE)
            if self.server is not None:
                self.server.close_all()
            if self._hooks is not None:
                await self._hooks.became_slave()
            self.epochs.broker_role, self.epochs.broker_id = BrokerRole.SLAVE.value, leader.broker_id_for_us
            self.epoch_file.save(self.epochs)
            self.learned_ha_address = leader.ha_address or None
            self.master_address = leader.address
            self.demotions_total += 1
            self._start_following()

    def _on_newer_epoch(self, epoch: int, address: str) -> None:
        """A slave of a newer epoch knocked on our HA port: check (rate-limited) whether we are fenced."""
        now = time.monotonic()
        if self._stopping or now - self._last_newer_epoch_check_s < NEWER_EPOCH_CHECK_MIN_INTERVAL_S:
            return
        self._last_newer_epoch_check_s = now
        log.warning(
            "HA peer %s follows epoch %d, newer than ours (%d): checking for a newer master",
            address,
            epoch,
            self.epochs.epoch,
        )
        task = asyncio.get_running_loop().create_task(self._check_fenced())
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check_fenced(self) -> None:
        try:
            await self.before_register()
        except Exception:  # a failed check must not kill the loop's task silently
            log.exception("fencing check failed")

    def _switch_role(self, role: BrokerRole, broker_id: int) -> None:
        self.role.switch(role, broker_id)

    # --- status ---
    def runtime_fields(self) -> dict[str, str]:
        """HA fields added to GET_BROKER_RUNTIME_INFO (`shoal admin ha-status`, fencing checks)."""
        fields = {
            "brokerId": str(self.role.broker_id),
            "haEpoch": str(self.epochs.epoch),
            "haListenAddr": self.ha_address,
            "haEpochStartOffset": str(self.epochs.history[-1].start_offset),
        }
        if self.role.is_master:
            slaves = self.slave_status()
            fields["haSlaveConnections"] = str(len(slaves))
            fields["haConfirmedOffset"] = str(self.waiter.acked_offset if self.waiter is not None else 0)
            fields["haSlaves"] = json.dumps(slaves)
            best = min(slaves, key=lambda slave: slave["lagBytes"], default=None)
            fields["haLagBytes"] = str(best["lagBytes"]) if best else "-1"
            fields["haLagMs"] = str(best["lagMs"]) if best else "-1"
        else:
            client = self.client
            fields["haMasterAddress"] = self._master_ha_address() or ""
            fields["haMasterConnected"] = str(bool(client is not None and client.connected)).lower()
            fields["haConfirmedOffset"] = str(
                max(self.epochs.confirmed_offset, client.confirmed_offset if client is not None else 0)
            )
            # Unknown (-1) while the link is down: a slave that has not heard its master since it
            # started would otherwise read as 0 bytes behind, and a roll could take its master away.
            fields["haLagBytes"] = str(client.lag_bytes if client is not None and client.connected else -1)
            fields["haLagMs"] = str(self._slave_lag_ms())
            fields["haLastError"] = client.last_error if client is not None else ""
        return fields

    def slave_status(self) -> list[dict[str, int | str | bool]]:
        server = self.server
        if server is None:
            return []
        end = self.broker.store.max_offset
        return [
            {
                "address": link.address,
                "ackOffset": link.ack_offset,
                "lagBytes": max(0, end - link.ack_offset),
                "lagMs": self._lag_ms_at(link.ack_offset, end),
                "shoal": link.extended,
            }
            for link in server.links.values()
            if link.reported
        ]

    def _lag_ms_at(self, ack_offset: int, end: int) -> int:
        """How old the oldest message a slave lacks is (0 when it has everything)."""
        if ack_offset >= end:
            return 0
        store = self.broker.store
        stamp = store.store_time_at(ack_offset)
        if stamp is None:
            stamp = store.store_time_at(store.rolled_offset(ack_offset))
        if stamp is None:
            return -1
        return max(0, time.time_ns() // 1_000_000 - stamp)

    def _slave_lag_ms(self) -> int:
        client = self.client
        if client is None or not client.connected:
            return -1
        if client.lag_bytes == 0:
            return 0
        return int((time.monotonic() - client.caught_up_s) * 1000)

    def stats(self) -> dict[str, float]:
        """Figures for Prometheus (shoal_ha_*)."""
        is_master = self.role.is_master
        fields = self.runtime_fields()
        waiter = self.waiter
        return {
            "epoch": float(self.epochs.epoch),
            "is_master": float(is_master),
            "slaves_connected": float(len(self.slave_status())) if is_master else 0.0,
            "master_connected": float(fields.get("haMasterConnected") == "true"),
            "lag_bytes": float(fields["haLagBytes"]),
            "lag_seconds": float(fields["haLagMs"]) / 1000 if float(fields["haLagMs"]) >= 0 else -1.0,
            "confirmed_offset": float(fields["haConfirmedOffset"]),
            "sync_waiters": float(waiter.waiting_count) if waiter is not None else 0.0,
            "slave_timeouts": float(waiter.timeouts_total) if waiter is not None else 0.0,
            "slave_not_available": float(waiter.unavailable_total) if waiter is not None else 0.0,
            "promotions": float(self.promotions_total),
            "demotions": float(self.demotions_total),
            "dead_links": float(self.dead_links_total),
        }

    @property
    def dead_links_total(self) -> int:
        """HA connections closed because the peer was gone (a master's slaves, a slave's master)."""
        client, server = self.client, self.server
        return (
            self._slave_dead_links_total
            + (client.dead_links_total if client is not None else 0)
            + (server.dead_links_total if server is not None else 0)
        )
