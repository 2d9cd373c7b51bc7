"""Bounds of the broker and NameServer processes, with units, in one place."""

from __future__ import annotations

GATHER_WRITE_MIN_BYTES = 16 * 1024  # below this, joining parts into one write is cheaper than sendmsg
CONNECTION_WRITE_BUFFER_HIGH_BYTES = 64 * 1024 * 1024  # a reader slower than this is cut off
PENDING_TASKS_PER_CONNECTION_MAX_COUNT = 10_000  # requests in progress on one connection
PARKED_PULLS_MAX_COUNT = 100_000  # long-polling requests held at once, all connections together
LONG_POLL_CHECK_INTERVAL_S = 5.0  # RocketMQ's PullRequestHoldService period
PULL_SUSPEND_MAX_MS = 60_000  # a client may ask to be held this long at most
CONSUMER_GROUPS_MAX_COUNT = 100_000
CLIENTS_PER_GROUP_MAX_COUNT = 10_000
LOCK_MAX_LIVE_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime
QUERY_MESSAGES_MAX_COUNT = 64  # maxMsgsNumBatch
BROKER_REGISTER_TIMEOUT_S = 6.0  # registerBrokerTimeoutMills
SEND_RESPONSE_TIMEOUT_S = 10.0  # max(syncFlushTimeout, slaveTimeout) + 5 s

assert GATHER_WRITE_MIN_BYTES < CONNECTION_WRITE_BUFFER_HIGH_BYTES
