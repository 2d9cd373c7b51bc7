"""mqadmin's broker-level commands (RocketMQ 4.9.7 MQAdminStartup) against shoal: clusterList,
brokerStatus, getBrokerConfig, updateBrokerConfig, statsAll, brokerConsumeStats and cleanExpiredCQ,
checked on what they print. mqadmin does not depend on the flush type: ASYNC_FLUSH only."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shoal.client import BlockingProducer, Message

WAIT_S = 60.0
TPS_WINDOW_S = 10.0  # clusterList's #InTPS: messages put in the last 10 s / 10
TPS_TRIES = 4


@pytest.fixture(scope="module")
def shoal(shoal_async_only: Any) -> Any:
    """Overrides conftest's per-flush-type `shoal`: one ASYNC_FLUSH cluster."""
    return shoal_async_only


def _root_conftest() -> ModuleType:
    """tests/conftest.py as pytest loaded it (Cluster, free_port)."""
    path = (Path(__file__).resolve().parents[2] / "conftest.py").resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return module
    raise AssertionError(f"{path} is not loaded")


@pytest.fixture(scope="module")
def retention_shoal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A cluster whose retention deletes every CommitLog segment but the newest, at any hour:
    64 KiB segments, fileReservedTime=0, deleteWhen every hour, a cleaning round every 200 ms."""
    conftest = _root_conftest()
    free_port = conftest.free_port
    running = conftest.Cluster(tmp_path_factory.mktemp("shoal-retention"), free_port(), free_port(), free_port())
    running.start_namesrv()
    try:
        running.start_broker(conf=dict(conftest.RETENTION_EVERY_SEGMENT_CONF))
    except BaseException:
        running.stop_all()
        raise
    yield running
    running.stop_all()


def assert_no_exception(output: str) -> None:
    assert "Exception" not in output, output


def broker_line(output: str, broker_name: str = "broker-a") -> list[str]:
    """The fields of the broker's line in clusterList's table."""
    for line in output.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] == broker_name:
            return fields
    raise AssertionError(f"no line for {broker_name}:\n{output}")


def in_tps(output: str) -> float:
    """#InTPS of clusterList's broker line: "<tps>(<send queue>,<head wait>ms)"."""
    match = re.fullmatch(r"(\d+\.\d\d)\((\d+),(\d+)ms\)", broker_line(output)[5])
    assert match is not None, output
    return float(match.group(1))


def in_total_today(java: Any, namesrv: str) -> int:
    """#InTotalToday of `clusterList -m`."""
    output = java.mqadmin("clusterList", "-n", namesrv, "-m")
    assert_no_exception(output)
    return int(broker_line(output)[4])


def status_of(java: Any, shoal: Any) -> dict[str, str]:
    output = java.mqadmin("brokerStatus", "-n", shoal.namesrv_addr, "-b", shoal.broker_addr)
    assert_no_exception(output)
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)\s+: (.*)$", output, re.MULTILINE)}


def config_of(java: Any, shoal: Any) -> dict[str, str]:
    """getBrokerConfig's `key<padding>=  value` lines."""
    output = java.mqadmin("getBrokerConfig", "-n", shoal.namesrv_addr, "-b", shoal.broker_addr)
    assert_no_exception(output)
    assert f"============{shoal.broker_addr}============" in output, output
    return {m.group(1): m.group(2) for m in re.finditer(r"^(\S+)\s*=  (.*)$", output, re.MULTILINE)}


def test_cluster_list_prints_version_put_tps_and_todays_total(
    java: Any, shoal: Any, unique: Callable[[str], str]
) -> None:
    """20 messages sent at once: clusterList's #InTPS reads 2.00 (20 in its 10 s window), -m's
    #InTotalToday grows by exactly 20; brokerStatus shows V4_9_7 and Shoal's own version."""
    ns = shoal.namesrv_addr
    topic = unique("cluster_list")
    before = in_total_today(java, ns)
    sent = java.run("Produce", {"namesrv": ns, "topic": topic, "mode": "sync", "count": 20}).of("sent")
    assert len(sent) == 20
    assert in_total_today(java, ns) - before == 20

    # The window is 10 s and mqadmin's JVM can take most of that to start on a loaded machine, so each
    # try lets the window empty, sends its burst from this process and reads clusterList at once.
    seen: list[str] = []
    with BlockingProducer(unique("cluster_list_producer"), ns) as producer:
        for _ in range(TPS_TRIES):
            time.sleep(TPS_WINDOW_S + 1.0)
            for n in range(20):
                producer.send(Message(topic, f"burst-{n}".encode()))
            seen.append(java.mqadmin("clusterList", "-n", ns))
            if abs(in_tps(seen[-1]) - 2.0) <= 0.3:
                break
        else:
            raise AssertionError("clusterList never read #InTPS 2.00 after a burst of 20:\n" + "\n".join(seen))
    output = seen[-1]
    assert_no_exception(output)
    assert "null" not in output, output
    fields = broker_line(output)
    assert fields[:5] == ["DefaultCluster", "broker-a", "0", shoal.broker_addr, "V4_9_7"], output
    assert fields[5].endswith("(0,0ms)") and fields[6].endswith("(0,0ms)"), output
    assert fields[7] == "0", output  # #PCWait(ms): no put holds the CommitLog lock while the broker answers
    assert 0.0 <= float(fields[8]) < 1.0, output  # #Hour: the first message is minutes old
    assert 0.0 < float(fields[9]) <= 1.0, output  # #SPACE: the disk's used share

    status = status_of(java, shoal)
    assert status["brokerVersionDesc"] == "V4_9_7" and status["brokerVersion"] == "407", status
    assert status["shoalVersion"].startswith("Shoal "), status
    assert int(status["msgPutTotalTodayNow"]) >= 20, status
    ten_s, _sixty_s, _ten_min = status["putTps"].split(" ")  # a window is "" until the broker has run that long
    assert float(ten_s) >= 0.0, status
    assert status["sendThreadPoolQueueSize"] == "0" and status["commitLogDirCapacity"].startswith("Total : "), status


def test_update_broker_config_applies_a_hot_key_and_refuses_others(
    java: Any, shoal: Any, unique: Callable[[str], str]
) -> None:
    """maxMessageSize (hot) set to 1024 through updateBrokerConfig: getBrokerConfig shows it, a
    2 KB body is refused with MESSAGE_ILLEGAL (13) while 512 bytes pass, and broker.conf holds it;
    listenPort (start-only) and an unknown key are refused with SYSTEM_ERROR (1) naming them."""
    ns, addr = shoal.namesrv_addr, shoal.broker_addr
    config = config_of(java, shoal)
    assert config["maxMessageSize"] == str(4 * 1024 * 1024), config
    assert config["brokerName"] == "broker-a" and config["flushDiskType"] == "ASYNC_FLUSH", config
    assert config["autoCreateTopicEnable"] == "true" and config["listenPort"] == str(shoal.broker_port), config
    topic = unique("update_config")
    produce = {"namesrv": ns, "topic": topic, "mode": "sync", "count": 1, "retries": 0, "compressOver": 1 << 20}
    try:
        updated = java.mqadmin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize", "-v", "1024")
        assert f"update broker config success, {addr}" in updated, updated
        assert config_of(java, shoal)["maxMessageSize"] == "1024"
        assert "maxMessageSize=1024\n" in (shoal.root / "broker.conf").read_text()
        refused = java.run("Produce", {**produce, "bodySize": 2048})
        assert not refused.of("sent"), refused.events
        assert "CODE: 13" in refused.of("error")[0]["message"], refused.events
        small = java.run("Produce", {**produce, "bodySize": 512}).of("sent")
        assert len(small) == 1 and small[0]["status"] == "SEND_OK"

        cold = java.mqadmin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "listenPort", "-v", "1234")
        assert "update broker config success" not in cold, cold
        assert "CODE: 1 " in cold and "listenPort cannot change while the broker runs" in cold, cold
        unknown = java.mqadmin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "noSuchSetting", "-v", "4")
        assert "noSuchSetting is not a setting of this broker" in unknown, unknown
        bad = java.mqadmin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize", "-v", "-5")
        assert "maxMessageSize=-5 is not allowed" in bad, bad
        assert config_of(java, shoal)["listenPort"] == str(shoal.broker_port)
    finally:
        restored = java.mqadmin(
            "updateBrokerConfig", "-n", ns, "-b", addr, "-k", "maxMessageSize", "-v", str(4 * 1024 * 1024)
        )
    assert f"update broker config success, {addr}" in restored, restored
    assert config_of(java, shoal)["maxMessageSize"] == str(4 * 1024 * 1024)


def test_stats_all_prints_a_row_for_a_consumed_topic(
    java: Any, shoal: Any, unique: Callable[[str], str], wait_until: Callable[..., None]
) -> None:
    """12 messages sent and consumed by a push consumer: statsAll's row for the topic and group
    shows 12 in and 12 out in its 24-hour columns, accumulation 0 and a positive #InTPS."""
    ns = shoal.namesrv_addr
    topic, group = unique("stats_all"), unique("stats_group")
    assert len(java.run("Produce", {"namesrv": ns, "topic": topic, "mode": "sync", "count": 12}).of("sent")) == 12
    consumer = java.spawn("PushConsume", {"namesrv": ns, "group": group, "topic": topic})
    consumer.wait_for(lambda proc: len(proc.of("received")) >= 12, WAIT_S, "12 messages")
    rows: list[list[str]] = []

    def row_complete() -> bool:
        output = java.mqadmin("statsAll", "-n", ns, "-t", topic)
        assert_no_exception(output)
        rows[:] = [line.split() for line in output.splitlines() if line.startswith(topic)]
        return len(rows) == 1 and rows[0][1] == group and rows[0][5:7] == ["12", "12"] and rows[0][2] == "0"

    wait_until(row_complete, WAIT_S, 1.0, what=f"statsAll row of {topic} with 12 in and 12 out")
    _topic, _group, _accumulation, in_tps_text, out_tps_text, _in, _out = rows[0]
    assert float(in_tps_text) > 0 and float(out_tps_text) > 0, rows


def test_broker_consume_stats_prints_a_row_per_consumed_queue_and_the_diff_total(
    java: Any, shoal: Any, unique: Callable[[str], str], wait_until: Callable[..., None]
) -> None:
    """Goal: brokerConsumeStats (GET_BROKER_CONSUME_STATS) prints, for a group that consumed a
    topic, one row per queue with its broker and consumer offsets, diff 0 and the last consumed
    message's time, then "Diff Total"; `-o true` (ordered topics only) leaves the topic out.
    Method: 8 messages to an auto-created 4-queue topic, a push consumer takes them all; the rows
    are read until its committed offsets (persisted every 5 s) reach 8."""
    ns, addr = shoal.namesrv_addr, shoal.broker_addr
    topic, group = unique("broker_consume_stats"), unique("broker_consume_group")
    sent_after_s = int(time.time())
    assert len(java.run("Produce", {"namesrv": ns, "topic": topic, "mode": "sync", "count": 8}).of("sent")) == 8
    consumer = java.spawn("PushConsume", {"namesrv": ns, "group": group, "topic": topic})
    consumer.wait_for(lambda proc: len(proc.of("received")) >= 8, WAIT_S, "8 messages")
    rows: list[list[str]] = []
    outputs: list[str] = []

    def all_committed() -> bool:
        output = java.mqadmin("brokerConsumeStats", "-n", ns, "-b", addr)
        assert_no_exception(output)
        outputs.append(output)
        # the topic column is cut to 64 characters (UtilAll.frontStringAtLeast); the group is whole
        rows[:] = [fields for fields in map(str.split, output.splitlines()) if fields[1:2] == [group]]
        return sum(int(row[5]) for row in rows) == 8

    wait_until(
        all_committed,
        WAIT_S,
        1.0,
        what=f"brokerConsumeStats rows of {group} summing to 8",
        explain=lambda: outputs[-1] if outputs else "",
    )
    assert sorted(int(row[3]) for row in rows) == [0, 1, 2, 3], outputs[-1]  # every queue got 2
    for row_topic, _group, broker, _qid, broker_offset, consumer_offset, diff, day, clock in rows:
        assert topic.startswith(row_topic) and len(row_topic) == min(len(topic), 64), outputs[-1]
        assert (broker, broker_offset, consumer_offset, diff) == ("broker-a", "2", "2", "0"), outputs[-1]
        stored_s = time.mktime(time.strptime(f"{day} {clock}", "%Y-%m-%d %H:%M:%S"))  # the JVM's local time
        assert sent_after_s <= stored_s <= time.time(), outputs[-1]  # the store time of a message sent here
    assert re.search(r"^Diff Total: \d+$", outputs[-1], re.MULTILINE), outputs[-1]
    ordered = java.mqadmin("brokerConsumeStats", "-n", ns, "-b", addr, "-o", "true")
    assert_no_exception(ordered)
    assert "Diff Total: " in ordered and group not in ordered, ordered
    assert consumer.stop() == 0


def test_clean_expired_cq_removes_queues_whose_messages_retention_deleted(
    java: Any, retention_shoal: Any, unique: Callable[[str], str], wait_until: Callable[..., None]
) -> None:
    """A topic whose every message sits in CommitLog segments retention deleted keeps its
    ConsumeQueue files until cleanExpiredCQ, which removes its directory; a topic with messages
    in the live segment keeps its own."""
    cluster = retention_shoal
    ns = cluster.namesrv_addr
    expired, live = unique("expired"), unique("live")
    body = {"namesrv": ns, "mode": "sync", "bodySize": 1024}
    assert len(java.run("Produce", {**body, "topic": expired, "count": 8}).of("sent")) == 8
    consumequeue, commitlog = cluster.store_dir / "consumequeue", cluster.store_dir / "commitlog"
    expired_dir, live_dir = consumequeue / expired, consumequeue / live
    wait_until(expired_dir.exists, WAIT_S, 0.2, what="the expired topic's ConsumeQueue")
    first_segments = {path.name for path in commitlog.iterdir()}
    # ~260 KB: the CommitLog rolls past every segment holding the first topic's messages
    assert len(java.run("Produce", {**body, "topic": live, "count": 240}).of("sent")) == 240

    def first_segments_deleted() -> bool:
        return not first_segments & {path.name for path in commitlog.iterdir()}

    wait_until(first_segments_deleted, WAIT_S, 0.2, what="retention deleting the first CommitLog segments")
    time.sleep(0.5)  # a cleaning round deletes the leading ConsumeQueue files it can; the last ones stay
    assert any(expired_dir.glob("*/0*")), "retention alone must leave the expired topic's last ConsumeQueue file"
    output = java.mqadmin("cleanExpiredCQ", "-n", ns, "-b", cluster.broker_addr)
    assert_no_exception(output)
    assert output.strip().endswith("success"), output
    assert not expired_dir.exists(), sorted(str(path) for path in expired_dir.rglob("*"))
    assert live_dir.exists() and any(live_dir.glob("*/0*"))
    status = java.mqadmin("topicStatus", "-n", ns, "-t", live)
    assert_no_exception(status)
    max_offsets = [int(m.group(1)) for m in re.finditer(r"^broker-a\s+\d+\s+\d+\s+(\d+)\s", status, re.MULTILINE)]
    assert sum(max_offsets) == 240, status  # the live topic's queues kept every offset


def test_delete_expired_commitlog_by_addr_is_answered_success(java: Any, retention_shoal: Any) -> None:
    """Goal: DefaultMQAdminExt.deleteExpiredCommitLogByAddr (DELETE_EXPIRED_COMMITLOG) returns true
    from shoal, as SUCCESS from RocketMQ; the deletion it asks for is tested in
    tests/broker/processors/test_broker_admin.py. Method: the Java admin API against a broker."""
    cluster = retention_shoal
    result = java.run(
        "Admin", {"namesrv": cluster.namesrv_addr, "op": "deleteExpiredCommitLog", "broker": cluster.broker_addr}
    )
    assert [event["ok"] for event in result.of("deleteRequested")] == [True], result.events
    assert "deleteExpiredCommitLog by " in cluster.log("broker")


def test_update_broker_permission_reaches_the_name_server_at_once(
    java: Any, shoal: Any, unique: Callable[[str], str]
) -> None:
    """brokerPermission=4 (read only) through updateBrokerConfig: topicRoute shows every topic of
    the broker read-only right away (re-registered with a new data version, as RocketMQ), a send
    fails; 6 restores writing."""
    ns, addr = shoal.namesrv_addr, shoal.broker_addr
    topic = unique("permission")
    produce = {"namesrv": ns, "topic": topic, "mode": "sync", "count": 1, "retries": 0}
    assert len(java.run("Produce", produce).of("sent")) == 1
    try:
        updated = java.mqadmin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerPermission", "-v", "4")
        assert f"update broker config success, {addr}" in updated, updated
        route = java.mqadmin("topicRoute", "-n", ns, "-t", topic)
        assert '"perm":4' in route and '"perm":6' not in route, route
        assert config_of(java, shoal)["brokerPermission"] == "4"
        refused = java.run("Produce", produce)
        assert not refused.of("sent") and refused.of("error"), refused.events
    finally:
        restored = java.mqadmin("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "brokerPermission", "-v", "6")
    assert f"update broker config success, {addr}" in restored, restored
    assert '"perm":6' in java.mqadmin("topicRoute", "-n", ns, "-t", topic)
    assert len(java.run("Produce", produce).of("sent")) == 1
