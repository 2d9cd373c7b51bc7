"""Routes -> publish/subscribe queues, the TBW102 fallback, and the route cache (spec §8.9, §8.10)."""

from __future__ import annotations

import asyncio

import pytest

from shoal.client.errors import NoRouteError, NoWritableQueueError, RemotingError
from shoal.client.route import (
    RouteTable,
    default_topic_route,
    parse_namesrv_addresses,
    publish_queues,
    subscribe_queues,
)
from shoal.protocol import BrokerData, MessageQueue, QueueData, TopicRouteData

SPEC_ROUTE = TopicRouteData.from_json(
    b"""{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},
                 "brokerName":"broker-a","cluster":"DefaultCluster"}],
 "filterServerTable":{},
 "queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,
                "topicSysFlag":0,"writeQueueNums":4}]}"""
)


def route(*queue_datas: QueueData, brokers: dict[str, dict[int, str]] | None = None) -> TopicRouteData:
    brokers = brokers if brokers is not None else {qd.broker_name: {0: f"{qd.broker_name}:10911"} for qd in queue_datas}
    return TopicRouteData(
        queue_datas=queue_datas,
        broker_datas=tuple(BrokerData("DefaultCluster", name, addrs) for name, addrs in brokers.items()),
    )


def test_spec_route_gives_four_publish_and_subscribe_queues() -> None:
    """Goal: the spec's TopicRouteData sample. Method: both queue lists."""
    expected = [MessageQueue("TopicTest", "broker-a", queue_id) for queue_id in range(4)]
    assert list(publish_queues("TopicTest", SPEC_ROUTE)) == expected
    assert list(subscribe_queues("TopicTest", SPEC_ROUTE)) == expected


def test_publish_uses_write_counts_subscribe_uses_read_counts() -> None:
    """Goal: write vs read queue numbers. Method: a broker with 2 write, 5 read queues."""
    data = route(QueueData("b", read_queue_nums=5, write_queue_nums=2, perm=6))
    assert [mq.queue_id for mq in publish_queues("T", data)] == [0, 1]
    assert [mq.queue_id for mq in subscribe_queues("T", data)] == [0, 1, 2, 3, 4]


def test_permissions_select_brokers() -> None:
    """Goal: publish only writable (perm & 2), subscribe only readable (perm & 4). Method: perms 2, 4."""
    data = route(
        QueueData("write-only", read_queue_nums=1, write_queue_nums=1, perm=2),
        QueueData("read-only", read_queue_nums=1, write_queue_nums=1, perm=4),
    )
    assert [mq.broker_name for mq in publish_queues("T", data)] == ["write-only"]
    assert [mq.broker_name for mq in subscribe_queues("T", data)] == ["read-only"]


def test_brokers_without_a_master_are_not_published_to() -> None:
    """Goal: Java skips QueueData whose broker has no id-0 address. Method: a slave-only broker."""
    data = route(
        QueueData("a", read_queue_nums=2, write_queue_nums=2, perm=6),
        QueueData("b", read_queue_nums=2, write_queue_nums=2, perm=6),
        brokers={"a": {1: "a-slave:10911"}, "b": {0: "b:10911"}},
    )
    assert {mq.broker_name for mq in publish_queues("T", data)} == {"b"}
    assert {mq.broker_name for mq in subscribe_queues("T", data)} == {"a", "b"}


def test_publish_queues_are_ordered_by_broker_name() -> None:
    """Goal: Java sorts QueueData by broker name. Method: route listing b before a."""
    data = route(
        QueueData("b", read_queue_nums=1, write_queue_nums=1, perm=6),
        QueueData("a", read_queue_nums=1, write_queue_nums=1, perm=6),
    )
    assert [mq.broker_name for mq in publish_queues("T", data)] == ["a", "b"]


def test_order_topic_conf_replaces_queue_datas_for_publishing() -> None:
    """Goal: `orderTopicConf` "brokerA:2;brokerB:1". Method: route with a conf."""
    data = TopicRouteData(
        queue_datas=(QueueData("a", read_queue_nums=8, write_queue_nums=8, perm=6),),
        broker_datas=(BrokerData("c", "a", {0: "a:1"}),),
        order_topic_conf="a:2;b:1",
    )
    expected = (MessageQueue("T", "a", 0), MessageQueue("T", "a", 1), MessageQueue("T", "b", 0))
    assert publish_queues("T", data) == expected


def test_default_topic_route_is_capped_at_min_of_four_and_read_queues() -> None:
    """Goal: the TBW102 fallback (min(defaultTopicQueueNums, readQueueNums)). Method: 8 and 2 queues."""
    tbw102 = route(
        QueueData("a", read_queue_nums=8, write_queue_nums=8, perm=7),
        QueueData("b", read_queue_nums=2, write_queue_nums=8, perm=7),
    )
    capped = default_topic_route(tbw102, 4)
    assert [(qd.read_queue_nums, qd.write_queue_nums) for qd in capped.queue_datas] == [(4, 4), (2, 2)]
    assert len(publish_queues("NewTopic", capped)) == 6


def test_namesrv_addresses_accept_java_and_list_forms() -> None:
    """Goal: "a;b", "a,b" and lists, de-duplicated. Method: parse each form."""
    assert parse_namesrv_addresses("a:1;b:2") == ("a:1", "b:2")
    assert parse_namesrv_addresses(["a:1", "b:2,a:1"]) == ("a:1", "b:2")
    with pytest.raises(ValueError, match="at least one"):
        parse_namesrv_addresses(" ; ")


class FakeNameServer:
    """Stands in for NameServerClient.get_route: routes by topic, None = TOPIC_NOT_EXIST."""

    def __init__(self, routes: dict[str, TopicRouteData]) -> None:
        self.routes = routes
        self.asked: list[str] = []
        self.down = False

    async def get_route(self, topic: str) -> TopicRouteData | None:
        self.asked.append(topic)
        if self.down:
            raise RemotingError("nameserver down")
        return self.routes.get(topic)


def table(routes: dict[str, TopicRouteData]) -> tuple[RouteTable, FakeNameServer]:
    fake = FakeNameServer(routes)
    return RouteTable(fake), fake  # type: ignore[arg-type]


def test_unknown_topic_borrows_tbw102_until_its_own_route_appears() -> None:
    """Goal: Java's auto-create path. Method: no route -> TBW102 (capped); later the real route wins."""
    tbw102 = route(QueueData("a", read_queue_nums=8, write_queue_nums=8, perm=7))

    async def run() -> None:
        routes, fake = table({"TBW102": tbw102})
        info = await routes.publish_info("New")
        assert info.from_default_topic
        assert [mq.queue_id for mq in info.queues] == [0, 1, 2, 3]
        assert {mq.topic for mq in info.queues} == {"New"}
        asked = len(fake.asked)
        await routes.publish_info("New")
        assert len(fake.asked) == asked  # cached, no nameserver round trip per send
        fake.routes["New"] = route(QueueData("a", read_queue_nums=2, write_queue_nums=2, perm=6))
        info = await routes.publish_info("New", refresh=True)
        assert not info.from_default_topic
        assert len(info.queues) == 2

    asyncio.run(run())


def test_no_route_and_no_tbw102_raises_no_route_error() -> None:
    """Goal: a clear error when nothing can be sent to. Method: empty nameserver."""

    async def run() -> None:
        routes, _fake = table({})
        with pytest.raises(NoRouteError, match="Nope"):
            await routes.publish_info("Nope")
        with pytest.raises(NoRouteError):
            await routes.subscribe_queues("Nope")

    asyncio.run(run())


def test_last_good_route_is_kept_when_the_nameserver_fails() -> None:
    """Goal: a refresh failure never loses the route. Method: cache, take the nameserver down, refresh."""

    async def run() -> None:
        routes, fake = table({"T": SPEC_ROUTE})
        assert len((await routes.publish_info("T")).queues) == 4
        fake.down = True
        assert len((await routes.publish_info("T", refresh=True)).queues) == 4
        await routes.refresh_all(["T"])
        assert routes.master_address("broker-a") == "10.0.0.1:10911"

    asyncio.run(run())


def test_broker_addresses_come_from_every_cached_route() -> None:
    """Goal: master/slave lookups and heartbeat targets. Method: the spec route with a slave."""

    async def run() -> None:
        routes, _fake = table({"T": SPEC_ROUTE})
        await routes.refresh("T")
        assert routes.master_address("broker-a") == "10.0.0.1:10911"
        assert routes.broker_address("broker-a", 1) == ("10.0.0.2:10911", 1)
        assert routes.broker_address("broker-a", 5) == ("10.0.0.1:10911", 0)
        assert routes.broker_address("nope") is None
        assert routes.broker_addresses(masters_only=True) == {"10.0.0.1:10911"}
        assert routes.broker_addresses(masters_only=False) == {"10.0.0.1:10911", "10.0.0.2:10911"}
        assert routes.any_broker_address("T") == "10.0.0.1:10911"

    asyncio.run(run())


def test_a_borrowed_route_is_rechecked_for_the_real_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Goal: once the broker auto-creates the topic, sends move to its real queues soon (not 30 s).

    Method: recheck interval 0; the real route appears; the next publish_info uses it.
    """
    from shoal.client import limits

    monkeypatch.setattr(limits, "BORROWED_ROUTE_RECHECK_S", 0.0)
    tbw102 = route(QueueData("a", read_queue_nums=8, write_queue_nums=8, perm=7))

    async def run() -> None:
        routes, fake = table({"TBW102": tbw102})
        assert (await routes.publish_info("New")).from_default_topic
        await routes.publish_info("New")
        assert fake.asked.count("New") == 2  # asked again, TBW102 not fetched again
        assert fake.asked.count("TBW102") == 1
        fake.routes["New"] = route(QueueData("a", read_queue_nums=2, write_queue_nums=2, perm=6))
        info = await routes.publish_info("New")
        assert not info.from_default_topic
        assert len(info.queues) == 2

    asyncio.run(run())


def test_a_route_without_a_master_is_fetched_again_throttled_and_raises_a_retriable_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Goal: while a master is down, sends raise NoWritableQueueError (never AssertionError) and
    the route is asked for again at most every ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S; a
    promoted slave is used at the next ask (issue 12, item 4). Method: a fake nameserver whose
    route loses its master, then lists the slave as brokerId 0; a fake clock."""
    from shoal.client import limits
    from shoal.client import route as route_module

    now = [100.0]
    monkeypatch.setattr(route_module.time, "monotonic", lambda: now[0])  # type: ignore[attr-defined]
    queue_data = QueueData("a", read_queue_nums=2, write_queue_nums=2, perm=6)

    async def run() -> None:
        routes, fake = table({"T": route(queue_data, brokers={"a": {0: "a0:1", 1: "a1:1"}})})
        assert len((await routes.publish_info("T")).queues) == 2
        fake.routes["T"] = route(queue_data, brokers={"a": {1: "a1:1"}})  # the master died
        asked = len(fake.asked)
        routes.routes["T"] = fake.routes["T"]  # the periodic poll saw it
        for _ in range(5):
            with pytest.raises(NoWritableQueueError):
                await routes.publish_info("T")
        assert len(fake.asked) == asked + 1  # one fetch, then throttled
        fake.routes["T"] = route(queue_data, brokers={"a": {0: "a1:1"}})  # the slave is promoted
        with pytest.raises(NoWritableQueueError):
            await routes.publish_info("T")  # still within the interval: not asked
        now[0] += limits.ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S
        info = await routes.publish_info("T")
        assert len(info.queues) == 2 and routes.master_address("a") == "a1:1"

    asyncio.run(run())


def test_concurrent_sends_on_an_unknown_route_share_one_fetch() -> None:
    """Goal: no thundering herd on the NameServer (a 100,000-message burst once got its
    connections closed). Method: 1,000 concurrent publish_info calls while the fetch is slow."""

    class SlowNameServer(FakeNameServer):
        async def get_route(self, topic: str) -> TopicRouteData | None:
            await asyncio.sleep(0.01)
            return await super().get_route(topic)

    async def run() -> None:
        fake = SlowNameServer({"T": SPEC_ROUTE})
        routes = RouteTable(fake)  # type: ignore[arg-type]
        infos = await asyncio.gather(*(routes.publish_info("T") for _ in range(1000)))
        assert {len(info.queues) for info in infos} == {4}
        assert fake.asked == ["T"]

    asyncio.run(run())
