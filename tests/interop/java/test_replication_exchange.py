"""Replication exchanged with RocketMQ 4.9.7's own broker (issue 16): each kind of broker follows the other.

Shoal SYNC_MASTER -> RocketMQ slave, and RocketMQ SYNC_MASTER -> Shoal slave, both registered with one Shoal
NameServer (the slaves learn the master's HA address from it, as in production). In each pairing:

1. a send before any slave is connected is stored but answered SLAVE_NOT_AVAILABLE (the master waits for slaves);
2. with the slave connected, every Java client send is SEND_OK, and at that moment the slave's CommitLog already
   holds every byte of the master's (read from its files right after the producer returns, no waiting);
3. the slave is SIGKILLed, sends go on (not SEND_OK: no slave), the slave restarts on its store and catches up;
4. after the load both CommitLogs are byte-identical (every segment, compared over the master's used bytes, and
   the slave holds nothing more);
5. the master stops; the Java consumer (LitePull, a new group assigned every queue, routed to brokerId 1) reads
   every message from the slave, and shoal.client does too.

Both brokers get the same small store geometry (STORE_SETTINGS: 1 MiB CommitLog segments, so the load rolls
segments and the end-of-segment blank record is replicated too).
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from shoal.client import BlockingPullConsumer
from shoal.formats.record import RecordKind
from shoal.store.inspection import iter_commitlog, segment_paths
from tests.interop.java import rocketmq_broker as launcher

pytestmark = pytest.mark.slow

SEGMENT_BYTES = 1024 * 1024
STORE_SETTINGS = {
    "mappedFileSizeCommitLog": str(SEGMENT_BYTES),
    "maxMessageSize": str(64 * 1024),  # a record must fit a segment (Shoal refuses to start otherwise)
    "mappedFileSizeConsumeQueue": str(300_000 * 20),
    "maxHashSlotNum": "50000",
    "maxIndexNum": "200000",
    "flushDiskType": "ASYNC_FLUSH",
    "brokerClusterName": "DefaultCluster",
    "brokerName": "broker-x",
}
"""The same store geometry on master and slave (mappedFileSizeCommitLog must match for HA)."""
SHOAL_SLAVE = {"brokerRole": "SLAVE", "brokerId": "1", "haShoalExtensionEnable": "false"}
"""A Shoal slave of a RocketMQ master: no Shoal hello (a Java master would read it as an offset)."""
TOPIC = "ReplXchg"
BODY_BYTES = 4000
"""Below the client's 4096-byte compression threshold; about 4.2 KB records, so 300 of them roll a segment."""
LOAD_COUNT = 300
WHILE_DOWN_COUNT = 60
AFTER_COUNT = 20
SLAVE_SEEN_TIMEOUT_S = 30.0
"""RocketMQ's HAClient reports its offset first haSendHeartbeatInterval (5 s) after it connects."""
CATCH_UP_TIMEOUT_S = 60.0
TOPIC_SYNC_TIMEOUT_S = 40.0
"""A slave (RocketMQ's or Shoal's) copies the master's topics every 10 s (SlaveSynchronize, first after 3 s)."""
NOT_REPLICATED = {"SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT"}
"""Stored on the master, no slave confirmed it (FLUSH_SLAVE_TIMEOUT if the master had not yet seen the kill)."""


def _root_conftest() -> ModuleType:
    """tests/conftest.py as pytest loaded it (Cluster, free_port): importlib mode gives it no fixed name."""
    path = (Path(__file__).resolve().parents[2] / "conftest.py").resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve() == path:
            return module
    raise AssertionError(f"{path} is not loaded")


@dataclass
class Pair:
    """One Shoal NameServer, and the brokers of one master/slave pairing (stopped after the test)."""

    lib: Path
    root: Path
    namesrv: Any = None
    started: list[Any] = field(default_factory=list)

    def start_namesrv(self) -> str:
        conftest = _root_conftest()
        self.namesrv = conftest.Cluster(self.root / "namesrv", conftest.free_port(), 0, 0)
        self.namesrv.root.mkdir(parents=True)
        self.namesrv.start_namesrv()
        addr: str = self.namesrv.namesrv_addr
        return addr

    def shoal(self, name: str, conf: dict[str, str]) -> Any:
        """A Shoal broker registered with the shared NameServer."""
        conftest = _root_conftest()
        cluster = conftest.Cluster(
            self.root / name, self.namesrv.namesrv_port, conftest.free_port(), conftest.free_port()
        )
        cluster.root.mkdir(parents=True)
        self.started.append(cluster)
        cluster.start_broker({**STORE_SETTINGS, **conf, "namesrvAddr": self.namesrv.namesrv_addr})
        return cluster

    def rocketmq(self, name: str, settings: dict[str, str]) -> Any:
        """RocketMQ's BrokerStartup registered with the shared NameServer."""
        port = launcher.free_broker_port()
        broker = launcher.RocketMQBroker(
            self.lib,
            self.root / name,
            namesrv_addr=self.namesrv.namesrv_addr,
            store_dir=self.root / name / "store",
            settings={**STORE_SETTINGS, **settings},
            port=port,
        )
        self.started.append(broker)
        broker.start()
        return broker

    def stop_all(self) -> None:
        for server in reversed(self.started):
            if isinstance(server, launcher.JavaServer):
                server.stop()
            else:
                server.stop_all()
        if self.namesrv is not None:
            self.namesrv.stop_all()


@pytest.fixture
def pair(rocketmq_lib: Path, tmp_path: Path) -> Iterator[Pair]:
    started = Pair(rocketmq_lib, tmp_path)
    yield started
    started.stop_all()


def produce(java: Any, namesrv: str, count: int, prefix: str) -> list[str]:
    """`count` sync sends of BODY_BYTES bodies (keys prefix-i); their send statuses."""
    args = {"namesrv": namesrv, "topic": TOPIC, "mode": "sync", "count": count, "bodySize": BODY_BYTES}
    result = java.run("Produce", {**args, "keys": prefix, "retries": 0})
    assert not result.of("error"), result.events
    sent = result.of("sent")
    assert len(sent) == count, result.events
    return [line["status"] for line in sent]


def wait_for_topic_copied(slave_store: Path) -> None:
    """Until the slave's metadata sync wrote TOPIC into its topics.json: a slave serves no topic it was not told
    of (TOPIC_NOT_EXIST, RocketMQ's too), and a quick load can end before the slave's first sync."""
    topics = slave_store / "config" / "topics.json"
    wait_for(
        lambda: topics.is_file() and TOPIC in topics.read_text(errors="replace"),
        TOPIC_SYNC_TIMEOUT_S,
        "the topic copied to the slave (SlaveSynchronize)",
    )


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not seen within {timeout_s} s"
        time.sleep(0.1)


def used_end(commitlog_dir: Path) -> int:
    """Where the last record of the CommitLog ends (every record read and checked)."""
    end = 0
    for item in iter_commitlog(commitlog_dir, check_crc=True):
        assert item.check.kind is not RecordKind.INVALID, f"{commitlog_dir}: {item}"
        end = item.offset + item.check.size
    return end


def commitlog_bytes(commitlog_dir: Path) -> dict[int, bytes]:
    return {int(path.name): path.read_bytes() for path in segment_paths(commitlog_dir)}


def holds_prefix(master_dir: Path, slave_dir: Path, end: int) -> bool:
    """The slave's segments hold the master's bytes [first shared segment, end)."""
    master, slave = commitlog_bytes(master_dir), commitlog_bytes(slave_dir)
    for base, data in master.items():
        if base >= end:
            break
        if base not in slave:
            return False
        used = min(end - base, SEGMENT_BYTES)
        if slave[base][:used] != data[:used]:
            return False
    return True


def assert_identical(master_dir: Path, slave_dir: Path) -> int:
    """Both CommitLogs hold the same bytes in every segment, used or preallocated (zeros); returns the used bytes."""
    end = used_end(master_dir)
    master, slave = commitlog_bytes(master_dir), commitlog_bytes(slave_dir)
    used_segments = [base for base in sorted(master) if base < end]
    assert [base for base in sorted(slave) if base < end] == used_segments
    for base in sorted(master.keys() | slave.keys()):
        used = max(0, min(end - base, SEGMENT_BYTES))
        ours, theirs = master.get(base, b""), slave.get(base, b"")
        assert theirs[:used] == ours[:used], f"segment {base} differs within its {used} used bytes"
        assert not ours[used:].strip(b"\0") and not theirs[used:].strip(b"\0"), f"bytes after the end in {base}"
    assert used_end(slave_dir) == end
    return end


def read_all_java(java: Any, namesrv: str, count: int) -> dict[tuple[int, int], Any]:
    """Every message of TOPIC, by a new group assigned every queue (CONSUME_FROM_FIRST_OFFSET).

    Not `seek(0)`: the Java client's seek asks the master for the queue's min and max offsets
    (findBrokerAddressInPublish) and throws "The broker[...] not exist" without one; a new group's
    start offset comes from the slave (QUERY_CONSUMER_OFFSET: none, so the first offset)."""
    args = {"namesrv": namesrv, "group": f"repl_read_{time.monotonic_ns()}", "topic": TOPIC, "mode": "assign"}
    result = java.run("LitePull", {**args, "from": "FIRST", "count": count, "timeoutMs": 30_000})
    assert not result.of("error"), result.events
    return {(line["queueId"], line["queueOffset"]): line for line in result.of("received")}


def read_all_shoal_client(namesrv: str) -> dict[tuple[int, int], Any]:
    found: dict[tuple[int, int], Any] = {}
    consumer = BlockingPullConsumer("repl_shoal_client", namesrv)
    consumer.start()
    try:
        for queue in consumer.fetch_message_queues(TOPIC):
            offset = 0
            while True:
                result = consumer.pull(queue, "*", offset)
                if not result.messages:
                    break
                for message in result.messages:
                    found[(message.queue_id, message.queue_offset)] = message
                offset = result.next_begin_offset
    finally:
        consumer.shutdown()
    return found


def assert_slave_serves_everything(java: Any, namesrv: str, total: int) -> None:
    """With the master stopped, the Java client and shoal.client read every message from the slave."""
    by_java = read_all_java(java, namesrv, total)
    assert len(by_java) == total, f"{len(by_java)} of {total} read from the slave"
    keys = sorted(line["keys"] for line in by_java.values())
    assert len(set(keys)) == total
    assert {line["bodyLength"] for line in by_java.values()} == {BODY_BYTES}
    by_shoal = read_all_shoal_client(namesrv)
    assert {position: message.msg_id for position, message in by_shoal.items()} == {
        position: line["msgId"] for position, line in by_java.items()
    }


def run_pairing(
    java: Any,
    namesrv: str,
    master_dir: Path,
    slave_dir: Path,
    slave_seen: Callable[[], bool],
    start_slave: Callable[[], None],
    kill_slave: Callable[[], None],
    stop_master: Callable[[], None],
) -> None:
    """Steps 1 to 5 of the module docstring; the master is running, the slave not yet started."""
    assert produce(java, namesrv, 1, "alone") == ["SLAVE_NOT_AVAILABLE"]
    start_slave()
    wait_for(slave_seen, SLAVE_SEEN_TIMEOUT_S, "the slave's first offset report on the master")
    assert set(produce(java, namesrv, LOAD_COUNT, "load")) == {"SEND_OK"}
    end = used_end(master_dir)
    assert end > SEGMENT_BYTES, "the load must roll a segment"
    assert holds_prefix(master_dir, slave_dir, end), "SEND_OK answered before the slave held the bytes"
    kill_slave()
    assert set(produce(java, namesrv, WHILE_DOWN_COUNT, "down")) <= NOT_REPLICATED
    start_slave()
    wait_for(
        lambda: holds_prefix(master_dir, slave_dir, used_end(master_dir)), CATCH_UP_TIMEOUT_S, "the slave catching up"
    )
    assert set(produce(java, namesrv, AFTER_COUNT, "after")) == {"SEND_OK"}
    assert holds_prefix(master_dir, slave_dir, used_end(master_dir))
    assert_identical(master_dir, slave_dir)
    stop_master()
    assert_slave_serves_everything(java, namesrv, 1 + LOAD_COUNT + WHILE_DOWN_COUNT + AFTER_COUNT)


def test_a_rocketmq_slave_follows_a_shoal_sync_master(java: Any, pair: Pair) -> None:
    """RocketMQ 4.9.7 (brokerId 1, SLAVE) follows a Shoal SYNC_MASTER: acks wait for it, killed it catches up."""
    namesrv = pair.start_namesrv()
    master = pair.shoal("shoal-master", {"brokerRole": "SYNC_MASTER", "brokerId": "0"})
    slave: Any = None

    def start_slave() -> None:
        nonlocal slave
        if slave is None:
            slave = pair.rocketmq("rocketmq-slave", {"brokerRole": "SLAVE", "brokerId": "1"})
        else:
            slave.start()

    def kill_slave() -> None:
        slave.stop(signal.SIGKILL)
        assert (slave.store_dir / "abort").is_file()

    def stop_master() -> None:
        wait_for_topic_copied(slave.store_dir)
        master.stop("broker")

    def slave_seen() -> bool:
        return cast("bool", master.log("broker").count("asks for data from offset") >= slave.starts)

    run_pairing(
        java,
        namesrv,
        master.store_dir / "commitlog",
        pair.root / "rocketmq-slave" / "store" / "commitlog",
        slave_seen,
        start_slave,
        kill_slave,
        stop_master,
    )


def test_a_shoal_slave_follows_a_rocketmq_sync_master(java: Any, pair: Pair) -> None:
    """Shoal (brokerId 1, SLAVE) follows a RocketMQ 4.9.7 SYNC_MASTER: acks wait for it, killed it catches up."""
    namesrv = pair.start_namesrv()
    master = pair.rocketmq("rocketmq-master", {"brokerRole": "SYNC_MASTER", "brokerId": "0"})
    slave: Any = None
    starts = 0

    def start_slave() -> None:
        nonlocal slave, starts
        starts += 1
        if slave is None:
            slave = pair.shoal("shoal-slave", SHOAL_SLAVE)
        else:
            slave.start_broker({**STORE_SETTINGS, **SHOAL_SLAVE, "namesrvAddr": namesrv})

    def kill_slave() -> None:
        slave.stop("broker", signal.SIGKILL)
        assert (slave.store_dir / "abort").is_file()

    def stop_master() -> None:
        wait_for_topic_copied(slave.store_dir)
        master.stop()

    def slave_seen() -> bool:
        return cast("bool", master.rocketmq_log.read_text(errors="replace").count("request offset") >= starts)

    run_pairing(
        java,
        namesrv,
        master.store_dir / "commitlog",
        pair.root / "shoal-slave" / "store" / "commitlog",
        slave_seen,
        start_slave,
        kill_slave,
        stop_master,
    )
