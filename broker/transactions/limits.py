"""Bounds of the transactional-message machinery, with units, in one place."""

from __future__ import annotations

TRANSACTIONS_TRACKED_MAX_COUNT = 1_000_000
"""Unresolved transactions plus resolutions not yet passed by the check progress; beyond this new
half messages are refused with SYSTEM_BUSY (about 100 bytes each: ~100 MiB at the limit)."""
CHECK_BATCH_MAX_COUNT = 32
"""Half messages read per store call in a check round (RocketMQ's PULL_MSG_RETRY_NUMBER batch);
the round yields to the event loop between batches."""
OP_BATCH_MAX_COUNT = 32
"""Op messages read per store call while rebuilding the state at start-up."""
CHECK_ROUND_TIME_MAX_S = 60.0
"""A check round stops after this long and continues in the next (MAX_PROCESS_TIME_LIMIT)."""
CHECK_ROUND_MESSAGES_MAX_COUNT = 100_000
"""Half messages one round examines at most, so a backlog never starves the event loop."""
CHECK_INTERVAL_MIN_MS = 10
"""transactionCheckInterval below this is refused: a busy loop, not a schedule."""
OP_BODY_MAX_BYTES = 4096
"""An op message body longer than this is not a list of queue offsets and is ignored."""

assert CHECK_BATCH_MAX_COUNT <= CHECK_ROUND_MESSAGES_MAX_COUNT
assert OP_BATCH_MAX_COUNT > 0
