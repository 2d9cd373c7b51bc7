"""The limits of POP consumption, named once."""

JOURNAL_COMPACT_BYTES = 64 * 1024 * 1024
"""The journal is rewritten as a snapshot of the live leases once it passes this size."""
JOURNAL_SYNC_INTERVAL_S = 1.0
"""How often the journal is fsynced: what a machine crash (never a killed process) can lose."""
POP_MAX_MESSAGES = 32
"""Most messages one POP_MESSAGE leases (RocketMQ 5 caps maxMsgNums at 32)."""
POP_MIN_INVISIBLE_MS = 1_000
"""Shortest invisible time accepted; RocketMQ 5's minimum (10 s in the proxy) is looser here for tests."""
POP_MAX_INVISIBLE_MS = 12 * 60 * 60 * 1000
"""Longest invisible time accepted (RocketMQ 5's proxy: 12 hours)."""
POP_MAX_POLL_MS = 60_000
"""Longest a POP_MESSAGE is held waiting for a message."""
POP_SCAN_UNITS = 512
"""Most ConsumeQueue units one pop reads past (filtered out) before answering."""
