"""Every bound the store enforces, with its unit, in one place.

RocketMQ's defaults are kept where they exist (`rocketmq-spec.md` §1, §2, §3, §5, §15); the
asserts at the bottom state how the limits relate so a change that breaks one fails at import.
"""

from __future__ import annotations

from shoal.formats import limits as formats_limits

# --- CommitLog records (spec §1.2, §1.6, §1.9): bounds of the format itself, from shoal.formats ---
TOPIC_LENGTH_MAX_BYTES = formats_limits.TOPIC_LENGTH_MAX_BYTES
PROPERTIES_LENGTH_MAX_BYTES = formats_limits.PROPERTIES_LENGTH_MAX_BYTES
MESSAGE_BODY_SIZE_MAX_BYTES = formats_limits.MESSAGE_BODY_SIZE_MAX_BYTES  # maxMessageSize: bounds the whole record
RECORD_SIZE_MAX_BYTES = formats_limits.RECORD_SIZE_MAX_BYTES
END_FILE_MIN_BLANK_LENGTH_BYTES = formats_limits.END_FILE_MIN_BLANK_LENGTH_BYTES
BATCH_MESSAGES_MAX_COUNT = 4096  # records per SEND_BATCH_MESSAGE, bounds one atomic append

# --- segment files ---
COMMITLOG_SEGMENT_SIZE_DEFAULT_BYTES = 1024 * 1024 * 1024
CONSUME_QUEUE_UNIT_SIZE_BYTES = formats_limits.CONSUME_QUEUE_UNIT_SIZE_BYTES
CONSUME_QUEUE_UNITS_PER_FILE_DEFAULT = 300_000
COMMITLOG_SEGMENT_SIZE_MIN_BYTES = 64 * 1024  # tests use small segments; below this records barely fit
OS_PAGE_SIZE_BYTES = 4096

# --- index (spec §3) ---
INDEX_HEADER_SIZE_BYTES = formats_limits.INDEX_HEADER_SIZE_BYTES
INDEX_HASH_SLOT_SIZE_BYTES = formats_limits.INDEX_HASH_SLOT_SIZE_BYTES
INDEX_ENTRY_SIZE_BYTES = formats_limits.INDEX_ENTRY_SIZE_BYTES
INDEX_HASH_SLOTS_DEFAULT = formats_limits.INDEX_HASH_SLOTS_DEFAULT
INDEX_ENTRIES_DEFAULT = 20_000_000
QUERY_MESSAGES_MAX_COUNT = 64  # maxMsgsNumBatch
QUERY_UNIQUE_KEY_MAX_COUNT = 32  # defaultQueryMaxNum

# --- reads (spec §15) ---
PULL_MESSAGES_MAX_COUNT = 32 * 1024  # a single get_messages call never walks more units than this
PULL_TRANSFER_IN_MEMORY_MAX_BYTES = 256 * 1024
PULL_TRANSFER_IN_MEMORY_MAX_COUNT = 32
PULL_TRANSFER_ON_DISK_MAX_BYTES = 64 * 1024
PULL_TRANSFER_ON_DISK_MAX_COUNT = 8

# --- flushing (spec §5.1, performance.md §5) ---
FLUSH_RETRIES_ON_SHUTDOWN = 10
FLUSH_WAITERS_MAX_COUNT = 1_000_000  # bounded queue of callers waiting for a group commit

# --- recovery ---
RECOVERY_FILES_FROM_END = 3  # normal recovery starts at the 3rd-last file, as RocketMQ does
RECOVERY_ZERO_CHUNK_BYTES = 1024 * 1024

# --- damage in the middle of the CommitLog (store/damage.py) ---
DAMAGED_RECORD_OFFSETS_MAX_COUNT = 1000  # lost record offsets listed per damaged range
DAMAGED_RANGES_TRACKED_MAX_COUNT = 10_000  # ranges the Dispatcher remembers (and reports) at once
DAMAGED_COPY_CHUNK_BYTES = 1024 * 1024  # damaged bytes are copied aside in writes this big

# --- dispatch write failures (disk full while building ConsumeQueues / the index) ---
DISPATCH_RETRY_BACKOFF_MIN_MS = 10  # first retry after a failed ConsumeQueue/index write
DISPATCH_RETRY_BACKOFF_MAX_MS = 1000  # retries back off, doubling, up to this
SEGMENT_CREATE_RETRY_INTERVAL_MS = 1000  # a CommitLog segment that could not be created is retried this often

# --- retention (spec §6) ---
DELETE_FILES_PER_RUN_MAX_COUNT = 10
DISK_USAGE_RATIO_MIN_PERCENT = 10
DISK_USAGE_RATIO_MAX_PERCENT = 95

# --- metadata files ---
METADATA_FILE_SIZE_MAX_BYTES = 256 * 1024 * 1024

assert RECORD_SIZE_MAX_BYTES + END_FILE_MIN_BLANK_LENGTH_BYTES < COMMITLOG_SEGMENT_SIZE_DEFAULT_BYTES
assert COMMITLOG_SEGMENT_SIZE_MIN_BYTES % OS_PAGE_SIZE_BYTES == 0
assert PULL_TRANSFER_ON_DISK_MAX_COUNT <= PULL_TRANSFER_IN_MEMORY_MAX_COUNT <= PULL_MESSAGES_MAX_COUNT
assert QUERY_UNIQUE_KEY_MAX_COUNT <= QUERY_MESSAGES_MAX_COUNT
assert 0 < DISPATCH_RETRY_BACKOFF_MIN_MS <= DISPATCH_RETRY_BACKOFF_MAX_MS

SEGMENT_ALLOCATION_WAIT_MS = 250
"""How long dispatch on the event loop waits for a new ConsumeQueue file (fallocate, fdatasync,
rename, directory fsync: a few ms on a healthy disk, up to a hundred on a busy one) before leaving
it to the allocation thread and serving other requests. It waits once per file, so a slow disk
costs the loop this once per new queue, and a message to a new queue is readable as soon as its
send is answered unless the disk is slower than this (clients must not count on that: RocketMQ's
dispatch is asynchronous too)."""

# --- dispatch (shoal.store.dispatching) ---
DISPATCH_IDLE_POLL_S = 0.001  # RocketMQ's reput polls every 1 ms (the thread driver, when idle)
DISPATCH_BATCH_MAX_COUNT = 4096  # records per call, so a large backlog never holds the loop (or a lock) for long
DISPATCH_TICK_S = 0.005  # the loop driver looks for appends nobody announced (replication, recovery) this often
DISPATCH_IDLE_TICK_MAX_S = 0.1  # ... and, finding none, twice as seldom each time, down to this (an idle loop sleeps)
COUNT_UNBOUNDED = 1 << 62  # "as many as there are": a count bound that never binds
TOPIC_NAMES_CACHED_MAX_COUNT = 100_000  # topic name <-> bytes entries kept by the CommitLog and the Dispatcher

# --- reads and the page cache (shoal.store.message_store) ---
OS_PAGE_CACHE_BUSY_TIMEOUT_S = 1.0  # osPageCacheBusyTimeOutMills: a put holding the lock longer means a busy cache
PHYSICAL_MEMORY_FALLBACK_BYTES = 8 * 1024**3  # assumed when the system does not say (the in-memory budget)
GET_MESSAGES_SCAN_MIN_COUNT = 16_000  # units a pull scans at least, so a filter matching nothing cannot stall it
TIMESTAMP_UNBOUNDED_MS = 2**62  # the end of a time range that has none

# --- warming new segments (shoal.store.mapped_file) ---
WARM_SYNC_STEP_BYTES = 16 * 1024 * 1024  # paced warming syncs in steps this big (a short disk burst each)
WARM_AHEAD_BYTES = 64 * 1024 * 1024  # pages faulted in ahead of the CommitLog's write position (0.4 s at 150 MB/s)
WARM_STEP_BYTES = 16 * 1024 * 1024  # ... in windows this big: one call on the allocation thread per 16 MiB appended

assert DISPATCH_BATCH_MAX_COUNT < COUNT_UNBOUNDED
assert 0 < DISPATCH_TICK_S <= DISPATCH_IDLE_TICK_MAX_S
assert 0 < WARM_STEP_BYTES < WARM_AHEAD_BYTES, "a window must leave pages warm ahead while the next one is faulted in"
