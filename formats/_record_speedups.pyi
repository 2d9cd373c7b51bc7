# The compiled record helpers (_record_speedups.c); used through shoal.formats.record and java_hash.
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
