"""The options of `spark.read.format("shoal")`, parsed and checked once on the driver.

option            default            meaning
path              (load's argument)  the store directory (holds commitlog/, consumequeue/, ...)
topic / topics    all                one topic, or several separated by commas
since / until     none               store-time window [since, until): epoch ms, or ISO-8601
                                     (a time without zone is UTC)
consume_queue     false              read one topic through its ConsumeQueues (needs one topic)
queue_ids         all                with consume_queue: only these queue ids ("0,3")
partition_bytes   134217728          split segments into byte ranges this big; 0 = per segment
check_crc         false              recompute every body CRC into `body_crc_ok`
columns           all                read only these columns (Python sources get no pruning)
hash_slots        5000000            shoal_index: maxHashSlotNum the index files were made with
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from shoal.formats import limits as formats_limits
from shoal.spark import limits
from shoal.spark.errors import ReadOptionError
from shoal.spark.record_columns import RowFilter

_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no", ""})


@dataclass(frozen=True)
class ReadOptions:
    store_dir: Path
    row_filter: RowFilter
    consume_queue: bool = False
    queue_ids: frozenset[int] | None = None
    partition_bytes: int = limits.PARTITION_BYTES_DEFAULT
    check_crc: bool = False
    columns: tuple[str, ...] | None = None
    hash_slots: int = formats_limits.INDEX_HASH_SLOTS_DEFAULT

    @property
    def commitlog_dir(self) -> Path:
        return self.store_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_dir / "index"


def parse_options(raw: Mapping[str, str]) -> ReadOptions:
    """ReadOptions from Spark's option map (names are case-insensitive)."""
    options = {name.lower(): value for name, value in raw.items()}
    path = options.get("path")
    if not path:
        raise ReadOptionError('the store directory is missing: spark.read.format("shoal").load(STORE_DIR)')
    topics = _topics(options.get("topic"), options.get("topics"))
    since_ms = parse_time_ms(options["since"]) if options.get("since") else None
    until_ms = parse_time_ms(options["until"]) if options.get("until") else None
    if since_ms is not None and until_ms is not None and until_ms <= since_ms:
        raise ReadOptionError(f"until ({until_ms}) must be after since ({since_ms})")
    consume_queue = _boolean(options, "consume_queue")
    if consume_queue and (topics is None or len(topics) != 1):
        raise ReadOptionError("consume_queue=true reads one topic: set the topic option to exactly one topic")
    queue_ids = None
    if options.get("queue_ids"):
        queue_ids = frozenset(_integer("queue_ids", item) for item in options["queue_ids"].split(",") if item.strip())
    partition_bytes = _integer("partition_bytes", options.get("partition_bytes", str(limits.PARTITION_BYTES_DEFAULT)))
    if partition_bytes < 0:
        raise ReadOptionError(f"partition_bytes must be >= 0, not {partition_bytes}")
    columns = None
    if options.get("columns"):
        columns = tuple(name.strip() for name in options["columns"].split(",") if name.strip())
    hash_slots = _integer("hash_slots", options.get("hash_slots", str(formats_limits.INDEX_HASH_SLOTS_DEFAULT)))
    return ReadOptions(
        store_dir=Path(path),
        row_filter=RowFilter(topics, since_ms, until_ms),
        consume_queue=consume_queue,
        queue_ids=queue_ids,
        partition_bytes=partition_bytes,
        check_crc=_boolean(options, "check_crc"),
        columns=columns,
        hash_slots=hash_slots,
    )


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds from digits, or from an ISO-8601 date/time (UTC when no zone is given)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ReadOptionError(f"{text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def _topics(topic: str | None, topics: str | None) -> frozenset[str] | None:
    names = [name.strip() for text in (topic, topics) if text for name in text.split(",") if name.strip()]
    if not names:
        return None
    if len(names) > limits.TOPICS_PER_FILTER_MAX:
        raise ReadOptionError(f"{len(names)} topics in the filter; at most {limits.TOPICS_PER_FILTER_MAX}")
    return frozenset(names)


def _boolean(options: Mapping[str, str], name: str) -> bool:
    value = options.get(name, "false").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ReadOptionError(f"option {name}={value!r} is not true or false")


def _integer(name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ReadOptionError(f"option {name}={text!r} is not an integer") from None
