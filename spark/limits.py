"""Every bound of the Spark reader, with its unit; the asserts state how they relate."""

from __future__ import annotations

from shoal.formats import limits as formats_limits

READ_CHUNK_BYTES = 16 * 1024 * 1024
"""One pread of a CommitLog segment: bounds a reader's memory and one Arrow batch's body bytes."""
BATCH_ROWS_MAX = 65_536
"""Records per Arrow batch (Spark's own default, spark.sql.execution.arrow.maxRecordsPerBatch, is 10,000)."""
PARTITION_BYTES_DEFAULT = 512 * 1024 * 1024
"""A CommitLog segment (1 GiB by default) is split into byte ranges this big, so two cores share
a segment; 0 means one partition per segment. Not smaller: each Spark task of a Python data
source costs about 50 ms in local mode (bench/spark_scan.py), as much as decoding 40,000 records."""
PARTITIONS_MAX_COUNT = 100_000
"""Partitions of one read: each is a Spark task; a tiny partition_bytes must fail, not stall."""
ALIGN_SCAN_BYTES = formats_limits.RECORD_SIZE_MAX_BYTES + formats_limits.END_FILE_MIN_BLANK_LENGTH_BYTES
"""A record starts within this many bytes of any position, unless the log has ended there."""
ALIGN_READ_BYTES = ALIGN_SCAN_BYTES + formats_limits.RECORD_SIZE_MAX_BYTES + 8
"""What alignment reads: the scan window, plus room to validate a record found at its very end
and peek at the next record's header."""
CONSUME_QUEUE_UNITS_PER_READ_MAX = 65_536
"""ConsumeQueue units fetched per batch in a ConsumeQueue-driven read."""
INDEX_ENTRIES_PER_BATCH_MAX = 65_536
TOPICS_PER_FILTER_MAX = 10_000
"""Topics in one `topic` option: the filter is a set, but an option string must stay bounded."""

assert READ_CHUNK_BYTES > formats_limits.RECORD_SIZE_MAX_BYTES + formats_limits.END_FILE_MIN_BLANK_LENGTH_BYTES, (
    "a chunk must hold the largest record, or a reader could never step over it"
)
assert READ_CHUNK_BYTES < 2**31, "Arrow binary offsets are int32"
assert ALIGN_READ_BYTES < 2**31
