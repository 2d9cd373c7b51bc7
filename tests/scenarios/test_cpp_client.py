"""Interop with the real C++ RocketMQ client (PyPI `rocketmq` 0.4.4 = rocketmq-client-cpp 1.2.3).

Every scenario runs cpp_client_scenarios.py in its own process (the `.so` may crash or hang) with
HOME in the test's tmp_path (the `.so` logs to $HOME/logs/rocketmq-cpp) and a timeout, against
real `shoal namesrv` and `shoal broker` processes from conftest.py. Topics and groups are unique
per test, so the module shares one cluster per flush mode. See docs real-clients.md §0-§1.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rocketmq", reason="the `rocketmq` 0.4.4 wheel is only installed on x86_64 Linux")
if platform.machine() != "x86_64" or not sys.platform.startswith("linux"):
    pytest.skip(reason="librocketmq.so in `rocketmq` 0.4.4 is built for x86_64 Linux only", allow_module_level=True)

pytestmark = pytest.mark.slow

WaitUntil = Callable[..., None]

SCRIPT = Path(__file__).with_name("cpp_client_scenarios.py")
RESULT_PREFIX = "RESULT "
PRODUCE_TIMEOUT_S = 30.0
PULL_TIMEOUT_S = 30.0
PUSH_DELIVERY_TIMEOUT_S = 30.0
"""How long a push scenario waits for the expected deliveries (the process gets 15 s more)."""
PROCESS_EXTRA_S = 15.0
IDLE_BEFORE_LIVE_S = 1.5
"""Consumers idle this long before live sends, so their pulls are held by the broker."""
LIVE_DELIVERY_MAX_S = 5.0
"""A live message must arrive this soon after its send returns: a third of the 15 s a held pull waits,
so an answer at expiry fails while a loaded CI machine (two test processes on two cores) still passes."""
QUIET_S = 1.0
"""After the expected deliveries, a push scenario keeps consuming until none arrived for this long."""
ROUTE_TIMEOUT_S = 5.0
SEND_OK = 0
COMPRESS_OVER_BYTES = 4096
"""The C++ producer deflates bodies above this (compressMsgBodyOverHowmuch) and sets sysFlag bit 0."""
BOTH_FLUSH_TYPES = pytest.mark.parametrize("flush_disk_type", ["ASYNC_FLUSH", "SYNC_FLUSH"])
CPP_LOG_TAIL_BYTES = 4_000
NAME_READABLE_MAX_CHARS = 48
"""Topic and group names start with the test's name, cut to this, plus a hash of its node id."""


class PushResult:
    """What a push scenario saw: deliveries per consumer (in callback order) and live sends."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.consumers: list[dict[str, Any]] = raw["consumers"]
        self.live: list[dict[str, Any]] = raw["live"]

    def deliveries(self, group: str) -> list[dict[str, Any]]:
        """Every delivery to the consumers of `group`."""
        chosen = [consumer["deliveries"] for consumer in self.consumers if consumer["group"] == group]
        return [record for deliveries in chosen for record in deliveries]


class CppClient:
    """Runs scenarios of cpp_client_scenarios.py against one cluster."""

    def __init__(self, cluster: Any, home: Path, name: str) -> None:
        self.cluster = cluster
        self.home = home
        self.name = name
        """Unique per test: prefix of every topic and group it uses."""

    def topic(self, suffix: str) -> str:
        return f"{self.name}_{suffix}"

    def run(self, scenario: str, args: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.home.mkdir(exist_ok=True)
        command = [sys.executable, str(SCRIPT), scenario, self.cluster.namesrv_addr, json.dumps(args)]
        environment = {**os.environ, "HOME": str(self.home)}
        try:
            completed = subprocess.run(command, capture_output=True, timeout=timeout_s, env=environment, check=False)
        except subprocess.TimeoutExpired as expired:
            raise AssertionError(
                f"{scenario} {args} hung for {timeout_s} s\n{self._diagnostics(expired.stdout, expired.stderr)}"
            ) from None
        lines = [line for line in completed.stdout.decode().splitlines() if line.startswith(RESULT_PREFIX)]
        assert completed.returncode == 0 and lines, (
            f"{scenario} exited with {completed.returncode}\n{self._diagnostics(completed.stdout, completed.stderr)}"
        )
        result: dict[str, Any] = json.loads(lines[-1][len(RESULT_PREFIX) :])
        return result

    def produce(self, topic: str, messages: list[dict[str, Any]], mode: str = "sync") -> list[dict[str, Any]]:
        args = {"topic": topic, "group": f"PID_{self.name}", "mode": mode, "messages": messages}
        results: list[dict[str, Any]] = self.run("produce", args, PRODUCE_TIMEOUT_S)["results"]
        return results

    def push(self, topic: str, groups: list[str], expect: int, **options: Any) -> PushResult:
        args = {
            "topic": topic,
            "groups": groups,
            "expect": expect,
            "timeout_s": PUSH_DELIVERY_TIMEOUT_S,
            "quiet_s": QUIET_S,
            **options,
        }
        timeout_s = PUSH_DELIVERY_TIMEOUT_S + QUIET_S + PROCESS_EXTRA_S
        return PushResult(self.run("push", args, timeout_s))

    def pull(self, topic: str, group: str, expression: str = "*") -> list[dict[str, Any]]:
        args = {"topic": topic, "group": group, "expression": expression}
        messages: list[dict[str, Any]] = self.run("pull", args, PULL_TIMEOUT_S)["messages"]
        return messages

    def _diagnostics(self, stdout: bytes | str | None, stderr: bytes | str | None) -> str:
        def text(value: bytes | str | None) -> str:
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else value or ""

        logs = sorted((self.home / "logs" / "rocketmq-cpp").glob("*"), key=lambda path: path.stat().st_mtime)
        cpp_log = logs[-1].read_bytes()[-CPP_LOG_TAIL_BYTES:].decode("utf-8", "replace") if logs else "<none>"
        return (
            f"--- stdout ---\n{text(stdout)[-CPP_LOG_TAIL_BYTES:]}\n"
            f"--- stderr ---\n{text(stderr)[-CPP_LOG_TAIL_BYTES:]}\n"
            f"--- rocketmq-cpp log (tail) ---\n{cpp_log}\n{self.cluster.logs()}"
        )


@pytest.fixture
def cpp(cluster: Any, tmp_path: Path, request: pytest.FixtureRequest) -> CppClient:
    readable = "".join(ch if ch.isalnum() else "_" for ch in request.node.name)[:NAME_READABLE_MAX_CHARS]
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    return CppClient(cluster, tmp_path / "home", f"{readable}_{digest}")


def message(
    index: int, *, tags: str = "TagA", prefix: str = "m", body: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A MessageSpec for cpp_client_scenarios.py: key `<prefix><index>`, property seq=<index>."""
    return {
        "body": body if body is not None else f"{prefix}-body-{index}",
        "tags": tags,
        "keys": f"{prefix}{index}",
        "properties": {"seq": str(index)},
        **extra,
    }


def ids_of(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(record["id"] for record in records)


@BOTH_FLUSH_TYPES
def test_sync_send_returns_ok_with_increasing_offsets_per_queue(cpp: CppClient) -> None:
    """Goal: send_sync of 20 messages with tags, keys and a user property succeeds and reports each
    message's queue offset. Method: send, then pull everything and match SendResults by UNIQ id."""
    topic = cpp.topic("T")
    sent = [
        message(
            i,
            tags="TagA" if i % 2 else "TagB",
            body=f"body-{i}-ünïcödé-✓",
            properties={"color": f"c{i}-é", "seq": str(i)},
        )
        for i in range(20)
    ]
    results = cpp.produce(topic, sent)

    assert [result["status"] for result in results] == [SEND_OK] * 20
    assert len({result["msg_id"] for result in results}) == 20
    pulled = {record["id"]: record for record in cpp.pull(topic, f"CID_{cpp.name}")}
    assert set(pulled) == {result["msg_id"] for result in results}
    offsets_by_queue: dict[int, list[int]] = defaultdict(list)
    for spec, result in zip(sent, results, strict=True):
        record = pulled[result["msg_id"]]
        assert record["queue_offset"] == result["offset"]
        assert (record["tags"], record["keys"], record["body"]) == (spec["tags"], spec["keys"], spec["body"])
        assert record["properties"]["color"] == spec["properties"]["color"]
        assert record["properties"]["seq"] == spec["properties"]["seq"]
        offsets_by_queue[record["queue_id"]].append(result["offset"])
    assert len(offsets_by_queue) > 1, "the producer spreads sends over the topic's queues"
    for queue_id, offsets in offsets_by_queue.items():
        assert offsets == list(range(len(offsets))), f"queue {queue_id}: offsets {offsets} in send order"


@BOTH_FLUSH_TYPES
def test_oneway_and_compressed_bodies_are_consumed_intact(cpp: CppClient) -> None:
    """Goal: oneway sends and bodies above the 4 KiB compression threshold (sysFlag 1) arrive
    intact. Method: send small and 6-8 KiB bodies oneway plus one large sync, consume by push."""
    topic = cpp.topic("T")
    large = [("".join(f"{i}:{j * 7919 % 10007:05d};" for j in range(1200)))[: 6000 + 500 * i] for i in range(3)]
    oneway = [message(i) for i in range(5)] + [message(10 + i, body=body) for i, body in enumerate(large)]
    cpp.produce(topic, oneway, mode="oneway")
    synced = cpp.produce(topic, [message(20, body=large[0][::-1])])
    assert synced[0]["status"] == SEND_OK
    expected = {spec["keys"]: spec["body"] for spec in [*oneway, message(20, body=large[0][::-1])]}

    deliveries = cpp.push(topic, [f"CID_{cpp.name}"], expect=len(expected)).deliveries(f"CID_{cpp.name}")

    assert {record["keys"]: record["body"] for record in deliveries} == expected
    large_records = [record for record in deliveries if len(record["body"]) > COMPRESS_OVER_BYTES]
    assert len(large_records) == 4
    assert all(record["store_size"] < len(record["body"]) for record in large_records), "stored uncompressed"


def test_batch_send_delivers_every_message(cpp: CppClient) -> None:
    """Goal: send_batch (SEND_MESSAGE with batch="1") stores every message of the batch. Method:
    batch-send 10 messages, consume by push and compare bodies, keys and distinct ids."""
    topic = cpp.topic("T")
    batch = [message(i, prefix="b") for i in range(10)]
    results = cpp.produce(topic, batch, mode="batch")
    assert [result["status"] for result in results] == [SEND_OK]

    deliveries = cpp.push(topic, [f"CID_{cpp.name}"], expect=10).deliveries(f"CID_{cpp.name}")

    assert sorted((record["keys"], record["body"]) for record in deliveries) == sorted(
        (spec["keys"], spec["body"]) for spec in batch
    )
    assert len(ids_of(deliveries)) == 10
    assert {record["properties"]["seq"] for record in deliveries} == {str(i) for i in range(10)}


def test_batch_over_the_compression_threshold_is_stored_inflated_and_delivered_whole(cpp: CppClient) -> None:
    """Goal: a batch whose body is over the C++ client's compressMsgBodyOverHowmuch (4 KiB) — which
    the client zlib-compresses whole, COMPRESSED sysflag on the request — is stored message by
    message, uncompressed, and every body comes back intact. Before, the broker read the compressed
    body as blocks and refused it ("bad BODYLENGTH"). Method: batch-send 8 bodies of 1 KiB."""
    topic = cpp.topic("T")
    batch = [message(i, prefix="z", body=f"z{i}-" + "x" * 1024) for i in range(8)]
    assert sum(len(spec["body"]) for spec in batch) > COMPRESS_OVER_BYTES
    results = cpp.produce(topic, batch, mode="batch")
    assert [result["status"] for result in results] == [SEND_OK]

    deliveries = cpp.push(topic, [f"CID_{cpp.name}"], expect=8).deliveries(f"CID_{cpp.name}")

    assert sorted((record["keys"], record["body"]) for record in deliveries) == sorted(
        (spec["keys"], spec["body"]) for spec in batch
    )
    assert all(record["store_size"] > len(record["body"]) for record in deliveries), "stored compressed"


@BOTH_FLUSH_TYPES
def test_orderly_send_and_orderly_push_preserve_per_key_order(cpp: CppClient) -> None:
    """Goal: send_orderly with an arg keeps a key on one queue and an orderly push consumer
    (LOCK_BATCH_MQ) sees each key's messages in send order. Method: 4 keys x 8 interleaved sends."""
    topic = cpp.topic("T")
    keys_count, per_key = 4, 8
    sent: list[dict[str, Any]] = [
        {"body": f"k{key}-{seq}", "tags": "TagA", "keys": f"k{key}", "properties": {"seq": str(seq)}, "arg": key}
        for seq in range(per_key)
        for key in range(keys_count)
    ]
    results = cpp.produce(topic, sent, mode="orderly")
    assert [result["status"] for result in results] == [SEND_OK] * len(sent)
    offsets_by_key: dict[str, list[int]] = defaultdict(list)
    for spec, result in zip(sent, results, strict=True):
        offsets_by_key[spec["keys"]].append(result["offset"])
    assert all(offsets == list(range(per_key)) for offsets in offsets_by_key.values()), offsets_by_key

    group = f"CID_{cpp.name}"
    deliveries = cpp.push(topic, [group], expect=len(sent), orderly=True).deliveries(group)

    assert len(ids_of(deliveries)) == len(sent)
    sequence_by_key: dict[str, list[int]] = defaultdict(list)
    queues_by_key: dict[str, set[int]] = defaultdict(set)
    for record in deliveries:
        sequence_by_key[record["keys"]].append(int(record["properties"]["seq"]))
        queues_by_key[record["keys"]].add(record["queue_id"])
    assert dict(sequence_by_key) == {f"k{key}": list(range(per_key)) for key in range(keys_count)}
    assert all(len(queues) == 1 for queues in queues_by_key.values()), queues_by_key


@BOTH_FLUSH_TYPES
def test_tag_expression_delivers_matching_messages_once_per_group(cpp: CppClient) -> None:
    """Goal: a concurrent push consumer subscribed with `TagA || TagB` gets exactly the matching
    messages, each once per group, and two groups each get all of them. Method: 30 sends over
    TagA/TagB/TagC, two groups in one consumer process, count deliveries by UNIQ id."""
    topic = cpp.topic("T")
    sent = [message(i, tags=("TagA", "TagB", "TagC")[i % 3]) for i in range(30)]
    results = cpp.produce(topic, sent)
    matching = {
        result["msg_id"] for spec, result in zip(sent, results, strict=True) if spec["tags"] in ("TagA", "TagB")
    }
    groups = [f"CID_{cpp.name}_1", f"CID_{cpp.name}_2"]

    pushed = cpp.push(topic, groups, expect=len(matching), expression="TagA || TagB")

    for group in groups:
        deliveries = pushed.deliveries(group)
        counts = ids_of(deliveries)
        assert set(counts) == matching, f"{group}: wrong set of messages"
        assert set(counts.values()) == {1}, f"{group}: duplicates {[i for i, n in counts.items() if n > 1]}"
        assert {record["tags"] for record in deliveries} == {"TagA", "TagB"}


@BOTH_FLUSH_TYPES
def test_message_sent_to_an_idle_push_consumer_is_delivered_at_once(cpp: CppClient) -> None:
    """Goal: a pull the broker holds (long polling, suspendTimeoutMillis 15 s) is answered as soon
    as a message arrives. Method: the consumer drains a warm-up message and idles so its pulls are
    held, then 5 live sync sends; each must arrive well before the hold would expire."""
    topic = cpp.topic("T")
    group = f"CID_{cpp.name}"
    cpp.produce(topic, [message(0, prefix="warmup")])
    live = {"group": f"PID_{cpp.name}_live", "idle_s": IDLE_BEFORE_LIVE_S, "messages": [message(i) for i in range(5)]}

    pushed = cpp.push(topic, [group], expect=1, live=live)

    received_at = {record["id"]: record["received_at"] for record in pushed.deliveries(group)}
    assert {sent["msg_id"] for sent in pushed.live} <= set(received_at)
    latencies_s = {sent["keys"]: received_at[sent["msg_id"]] - sent["sent_at"] for sent in pushed.live}
    assert max(latencies_s.values()) < LIVE_DELIVERY_MAX_S, latencies_s
    assert ids_of(pushed.deliveries(group)) == Counter(dict.fromkeys(received_at, 1))


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_two_consumers_of_one_group_split_the_queues(cpp: CppClient, orderly: bool) -> None:
    """Goal: two consumers of one group (GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED,
    LOCK_BATCH_MQ when orderly) split the topic's queues and the group consumes each message once.
    Method: both start and drain a warm-up, idle while they rebalance, then 16 live sends."""
    topic = cpp.topic("T")
    group = f"CID_{cpp.name}"
    cpp.produce(topic, [message(0, prefix="warmup")])
    live = {"group": f"PID_{cpp.name}_live", "idle_s": IDLE_BEFORE_LIVE_S, "messages": [message(i) for i in range(16)]}

    pushed = cpp.push(topic, [group, group], expect=1, live=live, orderly=orderly)

    live_ids = {sent["msg_id"] for sent in pushed.live}
    per_consumer = [
        [record for record in consumer["deliveries"] if record["id"] in live_ids] for consumer in pushed.consumers
    ]
    assert ids_of(per_consumer[0] + per_consumer[1]) == Counter(dict.fromkeys(live_ids, 1))
    queues = [{record["queue_id"] for record in records} for records in per_consumer]
    assert all(queues), f"one consumer got nothing: queues {queues}"
    assert not queues[0] & queues[1], f"both consumers pulled queues {queues[0] & queues[1]}"


def test_broadcasting_consumers_each_get_every_new_message(cpp: CppClient) -> None:
    """Goal: BROADCASTING consumers (local offsets; a new queue starts at GET_MAX_OFFSET) each get
    every message sent after they started, and none sent before. Method: two consumers of one
    group, an earlier message, then 8 live sends."""
    topic = cpp.topic("T")
    group = f"CID_{cpp.name}"
    earlier = cpp.produce(topic, [message(i, prefix="earlier") for i in range(4)])
    live = {"group": f"PID_{cpp.name}_live", "idle_s": IDLE_BEFORE_LIVE_S, "messages": [message(i) for i in range(8)]}

    pushed = cpp.push(topic, [group, group], expect=0, broadcasting=True, live=live)

    live_ids = Counter({sent["msg_id"]: 1 for sent in pushed.live})
    for consumer in pushed.consumers:
        assert ids_of(consumer["deliveries"]) == live_ids, {r["keys"] for r in consumer["deliveries"]}
    assert not {result["msg_id"] for result in earlier} & set(ids_of(pushed.deliveries(group)))


def test_consumer_started_after_producer_gets_earlier_messages(cpp: CppClient) -> None:
    """Goal: a fresh push group started after the messages were sent still receives them (the
    broker answers QUERY_CONSUMER_OFFSET with 0 while the queue head is in memory). Method: the
    producer process exits first, then a new group consumes."""
    topic = cpp.topic("T")
    results = cpp.produce(topic, [message(i) for i in range(12)])
    group = f"CID_{cpp.name}"

    deliveries = cpp.push(topic, [group], expect=12).deliveries(group)

    assert ids_of(deliveries) == Counter({result["msg_id"]: 1 for result in results})


def test_restarted_group_resumes_from_its_committed_offset(cpp: CppClient) -> None:
    """Goal: offsets a push consumer commits (UPDATE_CONSUMER_OFFSET, commitOffset in pulls) are
    where the group resumes. Method: consume 8, stop, send 4 more, restart the group: only the 4."""
    topic = cpp.topic("T")
    group = f"CID_{cpp.name}"
    cpp.produce(topic, [message(i, prefix="old") for i in range(8)])
    assert len(ids_of(cpp.push(topic, [group], expect=8).deliveries(group))) == 8
    results = cpp.produce(topic, [message(i, prefix="new") for i in range(4)])

    deliveries = cpp.push(topic, [group], expect=4).deliveries(group)

    assert ids_of(deliveries) == Counter({result["msg_id"]: 1 for result in results})


def test_reconsume_later_redelivers_through_the_retry_topic(cpp: CppClient) -> None:
    """Goal: RECONSUME_LATER sends the message back (CONSUMER_SEND_MSG_BACK) and it is delivered
    again from %RETRY%<group> with reconsume_times >= 1. Method: one listener fails one key once;
    the group is primed first so the NameServer already routes its retry topic."""
    topic = cpp.topic("T")
    group = f"CID_{cpp.name}"
    cpp.produce(topic, [message(0, prefix="warmup")])
    # The broker creates %RETRY%<group> on the group's first heartbeat, after the client has asked
    # for its route; a primed group finds the route at start instead of 10 s later.
    cpp.push(topic, [group], expect=1)
    assert cpp.cluster.route(f"%RETRY%{group}") is not None, "the heartbeat created no retry topic"
    results = cpp.produce(topic, [message(i) for i in range(5)])

    deliveries = cpp.push(topic, [group], expect=5, fail_first_keys=["m2"]).deliveries(group)

    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in deliveries:
        by_key[record["keys"]].append(record)
    assert {key: len(records) for key, records in by_key.items()} == {"m0": 1, "m1": 1, "m2": 2, "m3": 1, "m4": 1}
    first, again = by_key["m2"]
    assert first["reconsume_times"] == 0
    assert again["reconsume_times"] >= 1
    assert again["id"] == first["id"] == results[2]["msg_id"]
    assert again["topic"] == topic, "the client shows a retried message under its original topic"
    assert again["properties"].get("RETRY_TOPIC") == topic
    assert again["body"] == first["body"]


def test_pull_consumer_reads_every_message(cpp: CppClient) -> None:
    """Goal: PullConsumer.pull reads a whole topic (PULL_MESSAGE until PULL_NOT_FOUND on each
    queue). Method: send 25 messages, pull with a fresh group, compare ids, bodies and offsets."""
    topic = cpp.topic("T")
    sent = [message(i) for i in range(25)]
    results = cpp.produce(topic, sent)

    pulled = cpp.pull(topic, f"CID_{cpp.name}")

    assert ids_of(pulled) == Counter({result["msg_id"]: 1 for result in results})
    assert sorted(record["body"] for record in pulled) == sorted(spec["body"] for spec in sent)
    offsets_by_queue: dict[int, list[int]] = defaultdict(list)
    for record in pulled:
        offsets_by_queue[record["queue_id"]].append(record["queue_offset"])
    for queue_id, offsets in offsets_by_queue.items():
        assert offsets == list(range(len(offsets))), f"queue {queue_id}: {offsets}"


def test_pull_consumer_with_tag_expression_reads_only_matching_messages(cpp: CppClient) -> None:
    """Goal: a tag expression in PULL_MESSAGE filters by tag and the pull loop still ends (the
    broker's nextBeginOffset skips unmatched runs). Method: 24 sends over TagA/TagB/TagC, pull TagB."""
    topic = cpp.topic("T")
    sent = [message(i, tags=("TagA", "TagB", "TagC")[i // 4 % 3]) for i in range(24)]
    results = cpp.produce(topic, sent)
    wanted = {result["msg_id"] for spec, result in zip(sent, results, strict=True) if spec["tags"] == "TagB"}

    pulled = cpp.pull(topic, f"CID_{cpp.name}", expression="TagB")

    assert ids_of(pulled) == Counter(dict.fromkeys(wanted, 1))


def test_send_to_unknown_topic_auto_creates_it(cpp: CppClient, wait_until: WaitUntil) -> None:
    """Goal: a send to a topic nobody created succeeds through the TBW102 route and creates the
    topic (defaultTopicQueueNums 4). Method: check the route before and after, then pull it."""
    topic = cpp.topic("New")
    assert cpp.cluster.route(topic) is None

    results = cpp.produce(topic, [message(0)])

    assert results[0]["status"] == SEND_OK
    wait_until(lambda: cpp.cluster.route(topic) is not None, timeout_s=ROUTE_TIMEOUT_S)  # registration is async
    route = cpp.cluster.route(topic)
    assert route is not None
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]] == [(4, 4, 6)]
    pulled = cpp.pull(topic, f"CID_{cpp.name}")
    assert [record["id"] for record in pulled] == [results[0]["msg_id"]]
