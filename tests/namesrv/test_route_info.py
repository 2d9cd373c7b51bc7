"""RouteInfoManager: the NameServer's tables, driven directly (no sockets)."""

from __future__ import annotations

from shoal.namesrv.route_info import RouteInfoManager
from shoal.protocol.route_bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper


def _topics(counter: int, *names: str) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={
            name: TopicConfig(topic_name=name, read_queue_nums=4, write_queue_nums=4) for name in names
        },
        data_version=DataVersion(timestamp_ms=1, counter=counter),
    )


def test_master_registration_creates_routes_with_the_master_address() -> None:
    """Goal: a master's topics become routes. Method: register, then ask for the route."""
    routes = RouteInfoManager()
    routes.register_broker("C", "10.0.0.1:10911", "b", 0, "10.0.0.1:10912", _topics(1, "T"), now_ms=1000)
    route = routes.route("T")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    assert route.queue_datas[0].write_queue_nums == 4
    assert routes.route("Unknown") is None
    assert routes.cluster_info().cluster_addr_table == {"C": ("b",)}


def test_slave_learns_its_master_and_ha_address() -> None:
    """Goal: REGISTER_BROKER answers a slave with its master's addresses. Method: master then slave."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=1000)
    result = routes.register_broker("C", "s:1", "b", 1, "s:2", _topics(1, "T"), now_ms=1000)
    assert (result.master_addr, result.ha_server_addr) == ("m:1", "m:2")
    route = routes.route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "m:1", 1: "s:1"}


def test_expired_broker_and_its_queues_are_removed() -> None:
    """Goal: a broker silent for longer than the timeout disappears. Method: scan after 121 s."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=0)
    assert routes.scan_not_active(now_ms=60_000, timeout_ms=120_000) == []
    assert routes.scan_not_active(now_ms=121_000, timeout_ms=120_000) == ["m:1"]
    assert routes.route("T") is None
    assert routes.cluster_info().broker_addr_table == {}


def test_closed_connection_removes_the_broker_at_once() -> None:
    """Goal: a dropped broker connection removes its routes. Method: connection_closed with its key."""
    routes = RouteInfoManager()
    key = object()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=0, connection_key=key)
    routes.connection_closed(key)
    assert routes.route("T") is None


def test_new_data_version_replaces_the_topic_set() -> None:
    """Goal: a topic the broker no longer has leaves the routes. Method: re-register with a new version."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T", "U"), now_ms=0)
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(2, "T"), now_ms=1)
    assert routes.route("U") is None
    assert routes.route("T") is not None
    assert routes.topic_list().topic_list == ("T",)


def test_wipe_and_add_write_permission() -> None:
    """Goal: WIPE/ADD_WRITE_PERM change the perm of every queue of the broker. Method: toggle twice."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T", "U"), now_ms=0)
    assert routes.set_write_permission("b", writable=False) == 2
    route = routes.route("T")
    assert route is not None and route.queue_datas[0].perm == 4
    assert routes.set_write_permission("b", writable=True) == 2


def test_a_live_brokers_name_and_id_are_not_taken_over_from_another_address() -> None:
    """Goal: the probe's hijack fails: a REGISTER_BROKER claiming a live (name, id) at another
    address is refused and routes keep the live broker. Method: register, claim it from elsewhere
    before and after the expiry."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=0, peer_host="10.0.0.1")
    result = routes.register_broker(
        "C", "evil:1", "b", 0, "evil:2", _topics(9, "T"), now_ms=1000, peer_host="10.6.6.6", expired_after_ms=120_000
    )
    assert result.refused is not None and "b[0] is live at m:1" in result.refused
    route = routes.route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "m:1"}
    later = routes.register_broker(
        "C", "new:1", "b", 0, "new:2", _topics(2, "T"), now_ms=121_001, peer_host="10.0.0.9", expired_after_ms=120_000
    )
    assert later.refused is None
    route = routes.route("T")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "new:1"}


def test_a_live_address_is_not_taken_over_from_another_host() -> None:
    """Goal: claiming a live broker's own address from another host is refused too, under any id.
    Method: register from 10.0.0.1; claim the address as id 0 and id 1 from 10.6.6.6; the real
    broker re-registering from its host is still accepted."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=0, peer_host="10.0.0.1")
    for broker_id in (0, 1):
        result = routes.register_broker(
            "C", "m:1", "b", broker_id, "m:2", _topics(1, "T"), now_ms=10, peer_host="10.6.6.6"
        )
        assert result.refused is not None and "registered from 10.0.0.1" in result.refused
    assert (
        routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(2, "T"), now_ms=20, peer_host="10.0.0.1").refused
        is None
    )
    assert routes.broker_addr_table["b"].broker_addrs == {0: "m:1"}


def test_a_broker_stays_while_another_of_its_connections_registered_it() -> None:
    """Goal: closing one connection that registered a broker does not drop it while another open
    connection registered it too. Method: register over two keys, close one, then the other."""
    routes = RouteInfoManager()
    first, second = object(), object()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=0, connection_key=first)
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=5, connection_key=second)
    routes.connection_closed(second)
    assert routes.route("T") is not None
    routes.connection_closed(first)
    assert routes.route("T") is None


def test_a_promoted_slave_takes_over_from_a_hung_master_but_the_old_master_cannot_take_it_back() -> None:
    """Goal: failover past a hung master still works: a live member of the group re-registering as
    brokerId 0 takes over at once; the old master, no longer a member, is then refused. Method:
    master and slave live; the slave registers as 0; the master re-registers as 0."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=0, peer_host="10.0.0.1")
    routes.register_broker("C", "s:1", "b", 1, "s:2", _topics(1, "T"), now_ms=0, peer_host="10.0.0.2")
    promoted = routes.register_broker("C", "s:1", "b", 0, "s:2", _topics(2, "T"), now_ms=10, peer_host="10.0.0.2")
    assert promoted.refused is None
    assert routes.broker_addr_table["b"].broker_addrs == {0: "s:1"}
    back = routes.register_broker("C", "m:1", "b", 0, "m:2", _topics(1, "T"), now_ms=20, peer_host="10.0.0.1")
    assert back.refused is not None and "b[0] is live at s:1" in back.refused
    assert routes.broker_addr_table["b"].broker_addrs == {0: "s:1"}


def _versioned(counter: int, timestamp_ms: int, *names: str) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        topic_config_table={name: TopicConfig(topic_name=name) for name in names},
        data_version=DataVersion(timestamp_ms=timestamp_ms, counter=counter),
    )


def test_a_registration_older_than_the_applied_topic_set_keeps_the_broker_alive_but_not_its_topics() -> None:
    """Goal: a round the broker sent before deleting a topic, reaching the NameServer after a later
    round and DELETE_TOPIC_IN_NAMESRV, cannot route the topic again; it still counts as a heartbeat,
    and the next newer round is applied. Method: versions 2 {T, U}, 3 {U}, delete T, 2 again, 4."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _versioned(2, 200, "T", "U"), now_ms=0)
    routes.register_broker("C", "m:1", "b", 0, "m:2", _versioned(3, 300, "U"), now_ms=1)
    routes.delete_topic("T")
    routes.register_broker("C", "m:1", "b", 0, "m:2", _versioned(2, 200, "T", "U"), now_ms=2)
    assert routes.route("T") is None and routes.topic_list().topic_list == ("U",)
    live = routes.broker_live_table["m:1"]
    assert live.last_update_ms == 2 and live.data_version == DataVersion(timestamp_ms=300, counter=3)
    routes.register_broker("C", "m:1", "b", 0, "m:2", _versioned(4, 400, "U", "W"), now_ms=3)
    assert routes.topic_list().topic_list == ("U", "W")


def test_a_lower_counter_from_a_later_time_or_from_a_promoted_slave_is_applied() -> None:
    """Goal: only an older round is ignored: a broker restarted on an empty store (counter from 0,
    a later time) and a slave promoted at its address (the master's synced version) get their topics
    routed. Method: each registers a lower counter over a higher one."""
    routes = RouteInfoManager()
    routes.register_broker("C", "m:1", "b", 0, "m:2", _versioned(9, 900, "T"), now_ms=0)
    routes.register_broker("C", "m:1", "b", 0, "m:2", _versioned(1, 1000, "Fresh"), now_ms=1)
    assert routes.topic_list().topic_list == ("Fresh",)
    routes.register_broker("C", "s:1", "b", 1, "s:2", _versioned(9, 1100, "Ignored"), now_ms=2)
    promoted = routes.register_broker("C", "s:1", "b", 0, "s:2", _versioned(2, 1000, "Fresh", "Synced"), now_ms=3)
    assert promoted.refused is None
    assert routes.topic_list().topic_list == ("Fresh", "Synced")
