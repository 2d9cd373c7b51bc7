"""Cut a running store back to a CommitLog offset: what a fenced master does before following the
new one (the bytes it wrote after the group moved on were never acknowledged by the group).

The steps are recovery's (`MessageStore._load_and_recover`): truncate the CommitLog segments,
drop ConsumeQueue units and index files pointing at or past the offset, move the Dispatcher
back, rebuild the topic-queue table. Recovery runs before any service thread; here the flush
threads are running, so everything is flushed first: the segments truncation deletes then hold
nothing to flush, and a concurrent flush finds no work in them. Runs on the broker's loop, where
appends and dispatching also run, so neither interleaves with it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from shoal.store import MessageStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TruncationReport:
    offset: int
    previous_end_offset: int
    commitlog_bytes_dropped: int
    consume_queue_units_dropped: int
    index_files_deleted: int

    def summary(self) -> str:
        return (
            f"CommitLog cut from {self.previous_end_offset} to {self.offset} "
            f"({self.commitlog_bytes_dropped} bytes, {self.consume_queue_units_dropped} ConsumeQueue units, "
            f"{self.index_files_deleted} index files dropped)"
        )


def truncate_store(store: MessageStore, offset: int) -> TruncationReport:
    """Drop every CommitLog byte at or after `offset` (a record boundary) and what points at it."""
    commitlog = store.commitlog
    queue = commitlog.queue
    previous_end = queue.max_wrote_offset
    assert 0 <= offset <= previous_end, (offset, previous_end)
    assert offset >= commitlog.min_offset or offset == 0, (offset, commitlog.min_offset)
    store.dispatcher.dispatch_available()
    store.flusher.flush_to_end(0)
    store.cq_flusher.flush_all(0)
    with commitlog.put_lock:
        dropped = queue.truncate_dirty_files(offset)
        queue.flushed_where = min(queue.flushed_where, offset)
        queue.committed_where = min(queue.committed_where, offset)
        commitlog.forget_current_segment()
    units = 0
    for consume_queue in store.consume_queues:
        units += consume_queue.truncate_dirty(offset)
    dispatcher = store.dispatcher
    reput_from = min(dispatcher.reput_from_offset, offset)
    index_deleted = 0
    if store.index is not None:
        index_deleted = store.index.truncate_from(offset)
        if index_deleted:
            reput_from = min(reput_from, max(store.index.end_physical_offset, commitlog.min_offset))
    dispatcher.reput_from_offset = max(reput_from, commitlog.min_offset)
    dispatcher.dispatch_available()
    rebuild_topic_queue_table(store)
    report = TruncationReport(offset, previous_end, dropped, units, index_deleted)
    log.warning("truncated the store: %s", report.summary())
    return report


def rebuild_topic_queue_table(store: MessageStore) -> None:
    """After a slave's life the next queue offsets come from the ConsumeQueues it built (appends
    of replicated bytes never touched the table)."""
    store.commitlog.topic_queue_table = {(cq.topic, cq.queue_id): cq.max_offset for cq in store.consume_queues}
