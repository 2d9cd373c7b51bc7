# The compiled batch writer (_batch_speedups.c); used through shoal.formats.batch_records.
def batch_record_sizes(
    body: bytes | memoryview, shared_properties: bytes, topic_len: int, hosts_len: int, count_max: int, /
) -> tuple[list[int], int, int]: ...
def encode_batch_into(
    buffer: bytearray | memoryview,
    position: int,
    body: bytes | memoryview,
    shared_properties: bytes,
    topic: bytes,
    queue_id: int,
    first_queue_offset: int,
    first_physical_offset: int,
    sysflag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    /,
) -> int: ...
