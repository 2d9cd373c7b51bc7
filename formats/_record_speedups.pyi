# The compiled record helpers (_record_speedups.c); used through shoal.formats.record and java_hash.
from collections.abc import Callable, Mapping
from typing import Any

from shoal.formats.dispatch_run import OpenRun, RunEnd, RunsEnd
from shoal.formats.index_entry import UniqueKeyEntry
from shoal.formats.record import DispatchFields

def java_string_hash(text: str, /) -> int: ...
def encode_record_into(
    buffer: bytearray | memoryview,
    position: int,
    body: bytes | memoryview,
    topic: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sysflag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int,
    /,
) -> int: ...
def dispatch_fields(
    buffer: bytes | bytearray | memoryview, position: int, limit: int, expected_offset: int, /
) -> DispatchFields | None: ...
def index_put(
    buffer: bytearray | memoryview, hash_slots: int, index_count: int, key: str, physical_offset: int, time_diff: int, /
) -> int: ...
def find_properties(data: bytes, names: tuple[bytes, ...], /) -> list[str | None]: ...
def dispatch_run(
    view: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    expected_offset: int,
    count_max: int,
    raw_topic: bytes,
    queue_id: int,
    next_queue_offset: int,
    max_physical_offset: int,
    units: bytearray | memoryview,
    units_position: int,
    units_end: int,
    topic: str,
    request_type: Callable[..., Any],
    keys_out: list[UniqueKeyEntry] | None,
    arrivals_out: list[Any] | None,
    /,
) -> RunEnd: ...
def dispatch_runs(
    view: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    expected_offset: int,
    count_max: int,
    runs: Mapping[tuple[bytes, int], OpenRun],
    request_type: Callable[..., Any],
    keys_out: list[UniqueKeyEntry] | None,
    listening: bool,
    /,
) -> RunsEnd: ...
def walk_records(
    buffer: bytes | bytearray | memoryview, position: int, limit: int, stop_at: int, count_max: int, size_max: int, /
) -> tuple[list[int], int, int]: ...
def frame_messages(
    buffer: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    base_offset: int,
    crc32: Callable[[memoryview], int] | None,
    topics_valid: set[bytes],
    /,
) -> tuple[int, int]: ...
def covered_run(
    buffer: bytes | bytearray | memoryview,
    position: int,
    limit: int,
    expected_offset: int,
    stop_at: int,
    indexed_end: int,
    queues: dict[tuple[bytes, int], Any],
    topic_names: dict[bytes, str],
    count_max: int,
    keys_out: list[UniqueKeyEntry] | None,
    /,
) -> tuple[int, int, tuple[bytes, int] | None]: ...
def index_relink(
    buffer: bytearray | memoryview, hash_slots: int, index_count: int, begin_offset: int, /
) -> tuple[int, int, int, int]: ...
def index_put_unique_keys(
    buffer: bytearray | memoryview,
    hash_slots: int,
    entries_max: int,
    index_count: int,
    begin_physical_offset: int,
    begin_timestamp: int,
    entries: list[UniqueKeyEntry],
    start: int,
    /,
) -> tuple[int, int, int, int, int]: ...
