"""The NameServer: brokers register their topics here, clients ask it for routes (spec §8.10).

State lives in `RouteInfoManager`; this module is the asyncio shell: request processors, the
liveness scan every `scanNotActiveBrokerInterval`, KV config (ORDER_TOPIC_CONFIG etc.) and the
NameServer's own config (GET/UPDATE_NAMESRV_CONFIG). Request codes it does not implement answer
REQUEST_CODE_NOT_SUPPORTED " request type <code> not supported", as RocketMQ 5's NameServer does
(4.9.7's left them unanswered, so its clients waited for their timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time

from shoal.acl import AclFileWatcher, start_acl
from shoal.namesrv.config import NamesrvConfig, load_namesrv_config
from shoal.namesrv.route_info import RouteInfoManager
from shoal.protocol import RemotingCommand, RequestCode, ResponseCode, make_response
from shoal.protocol.errors import BodyFormatError
from shoal.protocol.headers import (
    DeleteKVConfigRequestHeader,
    DeleteTopicRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from shoal.protocol.route_bodies import DataVersion, KVTable, RegisterBrokerBody, register_body_crc32
from shoal.remoting.server import RemotingServer, ServerConnection
from shoal.remoting.settings import ConfigError, parse_properties
from shoal.remoting.tls import TlsSettings
from shoal.remoting.tls_listener import PLAIN_TLS, ServerTls

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
CONFIG_PATH_KEYS = frozenset({"kvConfigPath", "configStorePath"})
"""UPDATE_NAMESRV_CONFIG may not change these (RocketMQ: NO_PERMISSION "Can not update config path")."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class NameServer:
    def __init__(self, config: NamesrvConfig, tls: TlsSettings | None = None) -> None:
        self.config = config
        self.tls = ServerTls.from_settings(tls.server) if tls is not None else PLAIN_TLS
        """The tls.* keys of namesrv.conf; TlsConfigError here for a bad certificate."""
        self.routes = RouteInfoManager()
        self.kv: dict[str, dict[str, str]] = {}
        self.server = RemotingServer(
            "namesrv",
            max_connections=config.max_connections,
            idle_timeout_s=config.server_channel_max_idle_time_s,
            partial_frame_timeout_s=config.server_channel_partial_frame_timeout_s,
        )
        self.server.on_close.append(self.routes.connection_closed)
        self.port = 0
        self._scan: asyncio.Task[None] | None = None
        codes = {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
            RequestCode.GET_NAMESRV_CONFIG: self.get_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_config,
        }
        for code, processor in codes.items():
            self.server.register(code, processor)
        self.acl_watcher: AclFileWatcher | None = None
        if config.acl_enable:  # route changes need a signed admin account (shoal.acl)
            validator, self.acl_watcher = start_acl(config.plain_acl_file, namesrv=True)
            self.server.gate = validator.refusal

    async def start(self, host: str | None = None, port: int | None = None) -> int:
        self.port = await self.server.start(
            host if host is not None else self.config.listen_host,
            port if port is not None else self.config.listen_port,
            tls=self.tls,
        )
        self._scan = asyncio.get_running_loop().create_task(self._scan_loop())
        if self.acl_watcher is not None:
            self.acl_watcher.start()
        return self.port

    async def stop(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan
        if self.acl_watcher is not None:
            await self.acl_watcher.stop()
        await self.server.stop()

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_interval_ms / 1000)
            self.routes.scan_not_active(_now_ms(), self.config.broker_expired_timeout_ms)

    # --- processors ---
    def register_broker(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        body = request.body or b""
        if header.body_crc32 != 0 and register_body_crc32(body) != header.body_crc32:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        try:
            registered = RegisterBrokerBody.decode(body, header.compressed) if body else RegisterBrokerBody()
        except BodyFormatError as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"bad REGISTER_BROKER body: {error}")
        result = self.routes.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            registered.topic_config_serialize_wrapper,
            _now_ms(),
            connection,
            peer_host=connection.peer_host,
            expired_after_ms=self.config.broker_expired_timeout_ms,
        )
        if result.refused is not None:
            return make_response(request, ResponseCode.NO_PERMISSION, f"registration refused: {result.refused}")
        order = self.kv.get(ORDER_TOPIC_CONFIG)
        response_header = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        )
        return make_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields=response_header.to_ext_fields(),
            body=KVTable(table=dict(order)).to_json() if order else None,
        )

    def unregister_broker(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = UnregisterBrokerRequestHeader.from_ext_fields(request.ext_fields)
        refused = self.routes.takeover_refusal(
            header.broker_name,
            header.broker_id,
            header.broker_addr,
            connection.peer_host,
            _now_ms(),
            self.config.broker_expired_timeout_ms,
        )
        if refused is not None:
            log.warning("UNREGISTER_BROKER refused: %s", refused)
            return make_response(request, ResponseCode.NO_PERMISSION, f"unregistration refused: {refused}")
        self.routes.unregister_broker(header.cluster_name, header.broker_addr, header.broker_name, header.broker_id)
        return make_response(request, ResponseCode.SUCCESS)

    def route_by_topic(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields)
        route = self.routes.route(header.topic)
        if route is None:
            return make_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}",
            )
        order = self.kv.get(ORDER_TOPIC_CONFIG, {}).get(header.topic)
        if order:
            route = type(route)(
                queue_datas=route.queue_datas,
                broker_datas=route.broker_datas,
                filter_server_table=route.filter_server_table,
                order_topic_conf=order,
            )
        return make_response(request, ResponseCode.SUCCESS, body=route.to_json())

    def cluster_info(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.routes.cluster_info().to_json())

    def topic_list(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        return make_response(request, ResponseCode.SUCCESS, body=self.routes.topic_list().to_json())

    def topics_by_cluster(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields)
        return make_response(
            request, ResponseCode.SUCCESS, body=self.routes.topics_of_cluster(header.cluster).to_json()
        )

    def query_data_version(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = QueryDataVersionRequestHeader.from_ext_fields(request.ext_fields)
        asked = DataVersion.from_json(request.body) if request.body else DataVersion()
        live = self.routes.broker_live_table.get(header.broker_addr)
        changed = live is None or live.data_version != asked
        if live is not None:
            live.last_update_ms = _now_ms()
        return make_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields=QueryDataVersionResponseHeader(changed=changed).to_ext_fields(),
            body=live.data_version.to_json() if live is not None else None,
        )

    def delete_topic(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        self.routes.delete_topic(header.topic)
        return make_response(request, ResponseCode.SUCCESS)

    def wipe_write_perm(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.set_write_permission(header.broker_name, writable=False)
        return make_response(
            request,
            ResponseCode.SUCCESS,
            ext_fields=WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext_fields(),
        )

    def add_write_perm(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext_fields(request.ext_fields)
        count = self.routes.set_write_permission(header.broker_name, writable=True)
        return make_response(request, ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)})

    def put_kv(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.setdefault(header.namespace, {})[header.key] = header.value
        return make_response(request, ResponseCode.SUCCESS)

    def get_kv(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = GetKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        value = self.kv.get(header.namespace, {}).get(header.key)
        if value is None:
            return make_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return make_response(
            request, ResponseCode.SUCCESS, ext_fields=GetKVConfigResponseHeader(value=value).to_ext_fields()
        )

    def delete_kv(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteKVConfigRequestHeader.from_ext_fields(request.ext_fields)
        self.kv.get(header.namespace, {}).pop(header.key, None)
        return make_response(request, ResponseCode.SUCCESS)

    def get_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG: every setting as `key=value` lines (RocketMQ's properties text)."""
        lines = [f"{key}={value}\n" for key, value in sorted(_java_values(self.config).items())]
        return make_response(request, ResponseCode.SUCCESS, body="".join(lines).encode("utf-8"))

    def update_config(self, connection: ServerConnection, request: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG: body = properties text. Each key is checked as namesrv.conf's are;
        the connection settings and the liveness scan take effect at once, the listen address at
        the next start. Nothing is written back to namesrv.conf."""
        if not request.body:
            return make_response(request, ResponseCode.SUCCESS)
        try:
            updates = parse_properties(bytes(request.body).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"string2Properties error: {error}")
        if CONFIG_PATH_KEYS & updates.keys():
            return make_response(request, ResponseCode.NO_PERMISSION, "Can not update config path")
        try:
            config, unknown = load_namesrv_config({**_java_values(self.config), **updates})
        except ConfigError as error:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(error))
        if unknown:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"not a NameServer setting: {', '.join(sorted(unknown))}"
            )
        self.config = config
        self.server.max_connections = config.max_connections
        self.server.idle_timeout_s = config.server_channel_max_idle_time_s
        self.server.partial_frame_timeout_s = config.server_channel_partial_frame_timeout_s
        log.info("namesrv config updated by %s: %s", connection.address, updates)
        return make_response(request, ResponseCode.SUCCESS)


def _java_values(config: NamesrvConfig) -> dict[str, str]:
    """The settings under their namesrv.conf names, as text."""
    return {field.metadata["java"]: str(getattr(config, field.name)) for field in dataclasses.fields(config)}
