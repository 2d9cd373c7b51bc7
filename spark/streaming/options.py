"""The options of `format("rocketmq")` (a topic over the remoting protocol), parsed once on the driver.

Reading (`spark.readStream` / `spark.read`):

option                  default                  meaning
namesrv                 (required)               NameServer addresses, `host:port;host:port`
topics / topic          -                        topics to read, comma separated
topicPattern            -                        or a regular expression over the NameServer's topic
                                                 list (full match), checked again at every trigger
tag                     *                        a tag filter (`TagA || TagB`), applied by the broker
sql                     -                        or an SQL92 filter on properties (the broker needs
                                                 enablePropertyFilter=true)
startingOffsets         latest (stream)          earliest, latest, or JSON {topic: {broker: {queue:
                        earliest (batch)         offset}}} with -2 = earliest, -1 = latest; queues
                                                 left out start at earliest. Only for a new query:
                                                 a restarted one resumes from its checkpoint
startingTimestamp       -                        or the first message stored at or after this time
                                                 (epoch ms or ISO-8601), per queue
endingOffsets           latest                   batch reads: latest or JSON (as above, no -2)
maxMessagesPerTrigger   -                        at most about this many messages per micro-batch,
                                                 shared among queues by their backlog
group                   shoal-spark-stream       consumer group of the pulls (and of the offsets the
                                                 stream commits at the brokers)
commitOffsets           true                     after each micro-batch, store its end offsets as the
                                                 group's at the brokers, so `shoal admin`/mqadmin show
                                                 the query's lag (the checkpoint stays the truth)
failOnDataLoss          true                     fail when messages the query still had to read are
                                                 gone (retention deleted them); false: skip, log
pullBatchSize           32                       messages per pull request
pullsInFlight           4                        pull requests outstanding per queue
requestTimeoutMs        10000                    one request to a broker or NameServer
accessKey / secretKey   -                        an ACL account (plain_acl.yml) signing every request
tls                     false                    connect with TLS (no certificate check unless
                                                 tlsTrustCertPath is set)
tlsTrustCertPath        -                        CA certificates to check the brokers' certificates
columns                 all                      read only these columns
check_crc               false                    recompute every body CRC into `body_crc_ok`

Writing (`df.writeStream.format("rocketmq")`): namesrv, topic (rows without a `topic` column go
there), producerGroup (default shoal-spark-sink), sendTimeoutMs (3000), sendsInFlight (64),
accessKey/secretKey, tls, tlsTrustCertPath.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from shoal.spark.errors import ReadOptionError
from shoal.spark.options import parse_time_ms
from shoal.spark.streaming.offsets import Offsets, parse_offsets_option

__all__ = ["Connection", "Filter", "ReadOptions", "Starting", "WriteOptions", "parse_read", "parse_write"]

PULL_BATCH_MAX = 1024
"""Messages per pull request (RocketMQ brokers return at most 32 unless reconfigured)."""
PULLS_IN_FLIGHT_MAX = 64
SENDS_IN_FLIGHT_MAX = 1024
TOPICS_MAX = 10_000
GROUP_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]{1,255}$")
"""RocketMQ's allowed group and topic characters (Validators.PATTERN), and its length cap."""
DEFAULT_GROUP = "shoal-spark-stream"
DEFAULT_PRODUCER_GROUP = "shoal-spark-sink"
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


@dataclass(frozen=True)
class Connection:
    """How to reach the cluster: shared by reading and writing."""

    namesrv: str
    request_timeout_s: float = 10.0
    access_key: str | None = None
    secret_key: str | None = None
    tls: bool = False
    tls_trust_cert_path: str | None = None


@dataclass(frozen=True)
class Filter:
    """What the broker keeps: TAG (`*` = all) or SQL92."""

    expression: str = "*"
    sql: bool = False

    @property
    def expression_type(self) -> str:
        return "SQL92" if self.sql else "TAG"


@dataclass(frozen=True)
class Starting:
    """Where a new query begins: "earliest", "latest", a timestamp or explicit offsets."""

    how: str
    timestamp_ms: int | None = None
    offsets: Offsets | None = None


@dataclass(frozen=True)
class ReadOptions:
    connection: Connection
    topics: tuple[str, ...] | None
    topic_pattern: str | None
    filter: Filter
    starting: Starting
    ending: Offsets | None
    """Batch reads: where to stop (None = the latest offsets when the read is planned)."""
    max_messages_per_trigger: int | None
    group: str
    commit_offsets: bool
    fail_on_data_loss: bool
    pull_batch_size: int
    pulls_in_flight: int
    columns: tuple[str, ...] | None
    check_crc: bool

    def wanted(self, topic: str) -> bool:
        """Whether a topic of the NameServer's list is read."""
        if self.topics is not None:
            return topic in self.topics
        assert self.topic_pattern is not None
        return re.fullmatch(self.topic_pattern, topic) is not None


@dataclass(frozen=True)
class WriteOptions:
    connection: Connection
    topic: str | None
    producer_group: str
    send_timeout_s: float
    sends_in_flight: int


def parse_read(raw: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """ReadOptions from Spark's option map (names are case-insensitive)."""
    options = {name.lower(): value for name, value in raw.items()}
    connection = _connection(options)
    topics_text = ",".join(options[name] for name in ("topic", "topics") if options.get(name))
    pattern = options.get("topicpattern") or None
    if bool(topics_text) == bool(pattern):
        raise ReadOptionError("set exactly one of topics (a comma-separated list) and topicPattern (a regex)")
    topics = None
    if topics_text:
        topics = tuple(sorted({name.strip() for name in topics_text.split(",") if name.strip()}))
        if len(topics) > TOPICS_MAX:
            raise ReadOptionError(f"{len(topics)} topics; at most {TOPICS_MAX}")
        for topic in topics:
            _check_name("topic", topic)
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ReadOptionError(f"topicPattern {pattern!r} is not a regular expression: {error}") from None
    tag, sql = options.get("tag"), options.get("sql")
    if tag and sql:
        raise ReadOptionError("set tag or sql, not both: the broker filters by one expression")
    row_filter = Filter(sql.strip(), sql=True) if sql else Filter((tag or "*").strip() or "*")
    starting = _starting(options, streaming)
    ending = None
    if not streaming and options.get("endingoffsets", "latest").strip().lower() != "latest":
        ending = parse_offsets_option(options["endingoffsets"])
        if any(offset < 0 for offset in ending.values()):
            raise ReadOptionError("endingOffsets takes real offsets (or latest), not -2 or -1")
    max_messages = None
    if options.get("maxmessagespertrigger"):
        max_messages = _integer(options, "maxMessagesPerTrigger", 0, low=1)
    group = options.get("group", DEFAULT_GROUP).strip()
    _check_name("group", group)
    columns = None
    if options.get("columns"):
        columns = tuple(name.strip() for name in options["columns"].split(",") if name.strip())
    return ReadOptions(
        connection=connection,
        topics=topics,
        topic_pattern=pattern,
        filter=row_filter,
        starting=starting,
        ending=ending,
        max_messages_per_trigger=max_messages,
        group=group,
        commit_offsets=_boolean(options, "commitOffsets", default=True),
        fail_on_data_loss=_boolean(options, "failOnDataLoss", default=True),
        pull_batch_size=_integer(options, "pullBatchSize", 32, low=1, high=PULL_BATCH_MAX),
        pulls_in_flight=_integer(options, "pullsInFlight", 4, low=1, high=PULLS_IN_FLIGHT_MAX),
        columns=columns,
        check_crc=_boolean(options, "check_crc", default=False),
    )


def parse_write(raw: Mapping[str, str]) -> WriteOptions:
    options = {name.lower(): value for name, value in raw.items()}
    topic = options.get("topic", "").strip() or None
    if topic is not None:
        _check_name("topic", topic)
    group = options.get("producergroup", DEFAULT_PRODUCER_GROUP).strip()
    _check_name("producerGroup", group)
    return WriteOptions(
        connection=_connection(options),
        topic=topic,
        producer_group=group,
        send_timeout_s=_integer(options, "sendTimeoutMs", 3000, low=1) / 1000,
        sends_in_flight=_integer(options, "sendsInFlight", 64, low=1, high=SENDS_IN_FLIGHT_MAX),
    )


def _connection(options: Mapping[str, str]) -> Connection:
    namesrv = options.get("namesrv", "").strip()
    if not namesrv:
        raise ReadOptionError('the NameServer is missing: .option("namesrv", "host:9876")')
    access_key, secret_key = options.get("accesskey") or None, options.get("secretkey") or None
    if (access_key is None) != (secret_key is None):
        raise ReadOptionError("set accessKey and secretKey together")
    return Connection(
        namesrv=namesrv,
        request_timeout_s=_integer(options, "requestTimeoutMs", 10_000, low=1) / 1000,
        access_key=access_key,
        secret_key=secret_key,
        tls=_boolean(options, "tls", default=False),
        tls_trust_cert_path=options.get("tlstrustcertpath") or None,
    )


def _starting(options: Mapping[str, str], streaming: bool) -> Starting:
    offsets_text = options.get("startingoffsets", "").strip()
    timestamp_text = options.get("startingtimestamp", "").strip()
    if offsets_text and timestamp_text:
        raise ReadOptionError("set startingOffsets or startingTimestamp, not both")
    if timestamp_text:
        return Starting("timestamp", timestamp_ms=parse_time_ms(timestamp_text))
    how = offsets_text.lower() or ("latest" if streaming else "earliest")
    if how in ("earliest", "latest"):
        return Starting(how)
    return Starting("offsets", offsets=parse_offsets_option(offsets_text))


def _check_name(what: str, name: str) -> None:
    if not GROUP_PATTERN.match(name):
        raise ReadOptionError(f"{what} {name!r} has characters RocketMQ does not allow (letters, digits, %|_-)")


def _boolean(options: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = options.get(name.lower(), "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ReadOptionError(f"option {name}={value!r} is not true or false")


def _integer(options: Mapping[str, str], name: str, default: int, *, low: int, high: int | None = None) -> int:
    text = options.get(name.lower(), "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ReadOptionError(f"option {name}={text!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ReadOptionError(f"option {name}={value} must be {bound}")
    return value
