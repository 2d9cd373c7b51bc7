"""A Spark Structured Streaming query from a topic into Parquet, on Shoal and on Apache RocketMQ
4.9.7 in the same run (issue 30's figure).

    python bench/spark_stream.py [--messages 200000] [--rate 20000] [--warm-seconds 120] [--seconds 60]
                                 [--systems shoal,rocketmq] [--transfer-count 32] [--json FILE]
                                 [--broker-conf KEY=VALUE ...] [--spark-conf KEY=VALUE ...]

For each system (a NameServer and one broker, started here; RocketMQ from tools/get_rocketmq.py's
jars), with Spark in local[2] in this process and 1 KiB bodies on a topic of 8 queues:
  0. warm-up:   --warm-messages sent to another topic and drained, unmeasured (so that the first
                system does not pay alone for warming Spark's JVM).
  1. drain:     --messages sent beforehand (batches of 64); the query (readStream.format("rocketmq")
                -> Parquet with a checkpoint, micro-batches as fast as they go, at most --max-batch
                messages each) reads them all: messages/s from its first micro-batch to the last,
                and the micro-batch durations (p50, max).
  2. sustained: a producer process offers --rate messages/s (batches of 64, 4 in flight) while the
                query runs (trigger every second): --warm-seconds unmeasured, then --seconds
                measured: what the producer got acknowledged, what the query processed, its
                micro-batch durations, how far it was behind at the end, and the CPU per message of
                each part (the producer, the broker, the Spark JVM, its Python workers, the driver).
The query writes Parquet with shoal.spark.message_table's options (--parquet-layout default: Spark's).
The brokers run ASYNC_FLUSH with the same pull limits (--transfer-count messages and
--transfer-bytes per pull: broker.conf maxTransfer*OnMessageInMemory, keys both read; RocketMQ's
defaults are 32 and 256 KiB) and the query pulls --transfer-count messages at a time. Results: a
table on stdout and --json FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from shoal.spark.message_table import PARQUET_WRITE_OPTIONS

REPO_ROOT = Path(__file__).resolve().parents[1]
BODY_BYTES = 1024
QUEUES = 8
BATCH = 64
BATCHES_IN_FLIGHT = 4
TOPIC = "SparkBench"
WARM_TOPIC = "SparkBenchWarm"


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


vs = _load_by_path("shoal_bench_vs_rocketmq", REPO_ROOT / "bench" / "vs_rocketmq.py")


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def fill(namesrv: str, count: int, topic: str = TOPIC) -> int:
    """Send `count` 1 KiB messages in batches of BATCH, one at a time; the number acknowledged."""
    from shoal.client import BlockingProducer, ClientSettings, Message

    body = os.urandom(BODY_BYTES)
    sent = 0
    with BlockingProducer(
        "spark-bench-producer", namesrv, client_settings=ClientSettings(client_ip="127.0.0.1")
    ) as producer:
        while sent < count:
            producer.send_batch([Message(topic, body, tags="T") for _ in range(BATCH)])
            sent += BATCH
    return sent


async def produce_at(namesrv: str, rate: float, warm_s: float, seconds: float) -> dict[str, float]:
    """Offer `rate` messages/s for `warm_s` + `seconds` in batches of BATCH, BATCHES_IN_FLIGHT
    outstanding (so a slow answer does not lower the offer); what was acknowledged in the last
    `seconds`, over how long, and the CPU this process spent on it."""
    from shoal.client import ClientSettings, Message, Producer

    body = os.urandom(BODY_BYTES)
    producer = Producer("spark-bench-producer", namesrv, client_settings=ClientSettings(client_ip="127.0.0.1"))
    await producer.start()
    acked = 0
    started = time.monotonic()
    total_s = warm_s + seconds

    async def worker(index: int) -> None:
        nonlocal acked
        batches = 0
        while True:
            due = ((batches * BATCHES_IN_FLIGHT + index) * BATCH) / rate
            if due >= total_s:
                return
            ahead = due - (time.monotonic() - started)
            if ahead > 0:
                await asyncio.sleep(ahead)
            await producer.send_batch([Message(TOPIC, body, tags="T") for _ in range(BATCH)])
            acked += BATCH
            batches += 1

    async def mark() -> tuple[int, float, float]:
        await asyncio.sleep(warm_s)
        return acked, time.monotonic(), _cpu_self_s()

    marking = asyncio.ensure_future(mark())
    await asyncio.gather(*(worker(index) for index in range(BATCHES_IN_FLIGHT)))
    ended, cpu_end = time.monotonic(), _cpu_self_s()
    acked_at_mark, marked, cpu_at_mark = await marking
    await producer.shutdown()
    return {"acked": acked - acked_at_mark, "seconds": ended - marked, "cpu_s": cpu_end - cpu_at_mark,
            "acked_total": acked}  # fmt: skip


def _cpu_self_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ProgressLog:
    """Every micro-batch's progress of a query, by batch id (`recentProgress` keeps only the last
    100, spark.sql.streaming.numRecentProgressUpdates), gathered by a thread."""

    def __init__(self, query: Any) -> None:
        self.query = query
        self.batches: dict[int, dict[str, Any]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._gather, daemon=True)
        self.thread.start()

    def _gather(self) -> None:
        while not self.stop.wait(2.0):
            self.take()

    def take(self) -> None:
        for progress in self.query.recentProgress:
            self.batches[progress["batchId"]] = progress

    def rows(self) -> int:
        self.take()
        return sum(p.get("numInputRows", 0) for p in self.batches.values())

    def between(self, start: float, end: float) -> list[dict[str, Any]]:
        """Batches with rows that ended in [start, end] (epoch seconds)."""
        self.take()
        return [p for p in self.batches.values() if p.get("numInputRows", 0) > 0 and start <= _ended(p) <= end]

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _ended(progress: dict[str, Any]) -> float:
    began = calendar.timegm(time.strptime(progress["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
    fraction = float("0" + progress["timestamp"][19:].rstrip("Z")) if progress["timestamp"][19:20] == "." else 0.0
    return began + fraction + float(progress["durationMs"]["triggerExecution"]) / 1000


def start_producer(namesrv: str, rate: float, warm_s: float, seconds: float, report: Path) -> subprocess.Popen[bytes]:
    """The sustained phase's producer, in its own process (its own interpreter, as a real producer
    would be: in this process it would share the GIL with the Spark driver)."""
    command = [sys.executable, __file__, "--produce", namesrv, "--rate", str(rate), "--warm-seconds", str(warm_s),
               "--seconds", str(seconds), "--json", str(report)]  # fmt: skip
    return subprocess.Popen(command)


CLK_TCK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, str, float]]:
    """pid -> (ppid, command name, CPU seconds of it and of its waited-for children)."""
    table: dict[int, tuple[int, str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        table[int(entry.name)] = (int(fields[1]), name, ticks / CLK_TCK)
    return table


def _own_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _is_spark_jvm(pid: int) -> bool:
    """This process's Spark JVM, not a RocketMQ NameServer or broker it started."""
    try:
        return b"SparkSubmit" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def spark_cpu_s(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of the broker, this process (the Spark driver's Python side), its JVM, and
    the JVM's Python workers (the source's reads), each with its waited-for children."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _name, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)

    def tree(pid: int) -> float:
        return table[pid][2] + sum(tree(child) for child in children.get(pid, ()))

    me = os.getpid()  # its own CPU only: the producer process is its child
    jvms = [pid for pid in children.get(me, ()) if table[pid][1] == "java" and _is_spark_jvm(pid)]
    workers = sum(tree(child) for jvm in jvms for child in children.get(jvm, ()))
    return {
        "broker": table[broker_pid][2] if broker_pid in table else 0.0,
        "spark_driver_python": _own_cpu_s(me),
        "spark_jvm": sum(table[jvm][2] for jvm in jvms),
        "spark_python_workers": workers,
    }


def durations_ms(progress: list[dict[str, Any]]) -> list[float]:
    return [float(p["durationMs"]["triggerExecution"]) for p in progress if p.get("numInputRows", 0) > 0]


def run_query(
    spark: Any, namesrv: str, work: Path, name: str, args: argparse.Namespace, trigger: str | None, starting: str,
    topic: str = TOPIC,
) -> Any:  # fmt: skip
    reader = spark.readStream.format("rocketmq").options(
        namesrv=namesrv, topics=topic, startingOffsets=starting, maxMessagesPerTrigger=str(args.max_batch),
        pullBatchSize=str(args.transfer_count), pullsInFlight="4",
    )  # fmt: skip
    writer = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(work / f"{name}.parquet"))
        .option("checkpointLocation", str(work / f"{name}.checkpoint"))
    )
    if args.parquet_layout == "messages":
        writer = writer.options(**PARQUET_WRITE_OPTIONS)
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    return writer.start()


def wait_rows(query: Any, total: int, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = sum(p.get("numInputRows", 0) for p in query.recentProgress)
        if done >= total:
            return list(query.recentProgress)
        time.sleep(0.2)
    raise SystemExit(f"the query read {done} of {total} messages in {timeout_s:.0f} s")


def measure(system: Any, spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from shoal.client import BlockingAdmin, ClientSettings

    system.start_namesrv()
    conf = {
        "flushDiskType": "ASYNC_FLUSH",
        "maxTransferCountOnMessageInMemory": str(args.transfer_count),
        "maxTransferBytesOnMessageInMemory": str(args.transfer_bytes),
        **dict(setting.split("=", 1) for setting in args.broker_conf),
    }
    broker = system.start_broker("broker-a", work / "broker", conf)
    try:
        with BlockingAdmin(system.namesrv_addr, client_settings=ClientSettings(client_ip="127.0.0.1")) as admin:
            for topic in (TOPIC, WARM_TOPIC):
                admin.create_topic(topic, broker_addr=broker.addr, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        if args.warm_messages:
            # Unmeasured: the first system's would otherwise pay for warming Spark's JVM (its JIT)
            # alone, and the second's drain be measured on a warm one.
            log(f"{system.name}: warming up: {args.warm_messages} messages sent and drained, unmeasured")
            fill(system.namesrv_addr, args.warm_messages, WARM_TOPIC)
            query = run_query(spark, system.namesrv_addr, work, "warm", args, None, "earliest", WARM_TOPIC)
            wait_rows(query, args.warm_messages, args.timeout)
            query.stop()
        log(f"{system.name}: sending {args.messages} messages")
        fill(system.namesrv_addr, args.messages)
        log(f"{system.name}: draining them")
        query = run_query(spark, system.namesrv_addr, work, "drain", args, None, "earliest")
        progress = wait_rows(query, args.messages, args.timeout)
        query.stop()
        batches = durations_ms(progress)
        first_start = time.mktime(time.strptime(progress[0]["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
        last = progress[-1]
        last_end = (
            time.mktime(time.strptime(last["timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
            + last["durationMs"]["triggerExecution"] / 1000
        )
        drain_s = max(last_end - first_start, 1e-3)
        result: dict[str, Any] = {
            "drain_messages_per_s": round(args.messages / drain_s),
            "drain_batches": len(batches),
            "drain_batch_ms_p50": round(statistics.median(batches)),
            "drain_batch_ms_max": round(max(batches)),
        }
        log(f"{system.name}: drain {result}")
        log(f"{system.name}: sustained {args.rate}/s, {args.warm_seconds} s to warm up then {args.seconds} s measured")
        query = run_query(spark, system.namesrv_addr, work, "sustained", args, "1 second", "latest")
        batches_seen = ProgressLog(query)
        time.sleep(5)  # the query starts at the drained topic's end: nothing to do yet
        report = work / "producer.json"
        sender = start_producer(system.namesrv_addr, args.rate, args.warm_seconds, args.seconds, report)
        time.sleep(args.warm_seconds)
        window_from, cpu_before = time.time(), spark_cpu_s(broker.pid)
        if sender.wait(args.seconds + 120) != 0:
            raise SystemExit(f"the producer failed: exit {sender.returncode}")
        window_to, cpu_after = time.time(), spark_cpu_s(broker.pid)
        produced = json.loads(report.read_text())
        in_window = batches_seen.between(window_from, window_to)
        rows = sum(p["numInputRows"] for p in in_window)
        behind = produced["acked_total"] - batches_seen.rows()
        query.stop()
        batches_seen.close()
        batches = durations_ms(in_window)
        result |= {
            "sustained_offered_per_s": args.rate,
            "sustained_acked_per_s": round(produced["acked"] / produced["seconds"]),
            "sustained_processed_per_s": round(rows / (window_to - window_from)),
            "sustained_behind_at_end": behind,
            "sustained_batches": len(batches),
            "sustained_batch_ms_p50": round(statistics.median(batches)) if batches else None,
            "sustained_batch_ms_max": round(max(batches)) if batches else None,
            "cpu_us_per_message_producer": round(produced["cpu_s"] / max(produced["acked"], 1) * 1e6, 1),
        }
        result |= {
            f"cpu_us_per_message_{part}": round((cpu_after[part] - cpu_before[part]) / max(rows, 1) * 1e6, 1)
            for part in cpu_after
        }
        log(f"{system.name}: sustained {result}")
        return result
    finally:
        broker.stop()
        system.stop_namesrv()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=20_000, help="sustained phase: messages/s offered")
    parser.add_argument("--seconds", type=float, default=60.0, help="sustained phase: the measured window")
    parser.add_argument("--warm-seconds", type=float, default=120.0,
                        help="sustained phase: the same load first, not measured (the JVM's JIT warms up: "
                             "its compilers still took 25 %% of the JVM's CPU 80 s in, 11-15 %% at 140 s)")  # fmt: skip
    parser.add_argument("--warm-messages", type=int, default=200_000,
                        help="each system first drains this many from another topic, unmeasured (0: none)")  # fmt: skip
    parser.add_argument("--max-batch", type=int, default=100_000, help="maxMessagesPerTrigger")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--transfer-count", type=int, default=32, help="messages per pull (and the brokers' limit)")
    parser.add_argument("--transfer-bytes", type=int, default=256 * 1024, help="the brokers' bytes per pull")
    parser.add_argument("--systems", default="shoal,rocketmq")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--parquet-layout", choices=("messages", "default"), default="messages",
        help="Parquet writer options: shoal.spark.message_table's (the jobs') or Spark's defaults",
    )  # fmt: skip
    parser.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a broker.conf setting for both brokers (repeatable)")  # fmt: skip
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the query's session (repeatable)")  # fmt: skip
    parser.add_argument("--produce", metavar="NAMESRV", help="internal: be the sustained phase's producer process")
    args = parser.parse_args(argv)
    if args.produce:
        produced = asyncio.run(produce_at(args.produce, args.rate, args.warm_seconds, args.seconds))
        args.json.write_text(json.dumps(produced))
        return 0
    from shoal.spark.session import session

    spark_conf = {"spark.ui.showConsoleProgress": "false", **dict(setting.split("=", 1) for setting in args.spark_conf)}
    spark = session("spark-stream-bench", "local[2]", spark_conf)
    spark.sparkContext.setLogLevel("ERROR")
    lib = None
    results: dict[str, Any] = {}
    for name in args.systems.split(","):
        work = Path(tempfile.mkdtemp(prefix=f"spark-stream-{name}-"))
        try:
            if name == "rocketmq" and lib is None:
                lib = vs._load_by_path(
                    "shoal_tools_get_rocketmq", REPO_ROOT / "tools" / "get_rocketmq.py"
                ).ensure_jars()
            system = vs.make_system(name, work, lib or Path())
            results[name] = measure(system, spark, args, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    spark.stop()
    print(f"| figure | {' | '.join(results)} |")
    print(f"|---|{'---|' * len(results)}")
    for key in next(iter(results.values())):
        print(f"| {key} | {' | '.join(str(values.get(key)) for values in results.values())} |")
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
