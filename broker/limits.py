"""Bounds of the broker process, with units, in one place (its connections': `shoal.remoting.limits`)."""

from __future__ import annotations

PARKED_PULLS_MAX_COUNT = 100_000  # long-polling requests held at once, all connections together
PULL_SUSPEND_MAX_MS = 60_000  # a client may ask to be held this long at most
SUBSCRIPTION_CATCH_UP_WAIT_S = 0.3
"""A pull whose subscription version is newer than the broker's waits this long for the heartbeat
that brings it before it is answered SUBSCRIPTION_NOT_LATEST (the Java client then backs off 1 s)."""
SUBSCRIPTION_CATCH_UP_POLL_S = 0.01  # how often such a pull looks again
SUBSCRIPTION_CATCH_UP_HELD_MAX_COUNT = 256
"""Pulls held so at once: a rebalance's pulls are a few per queue; beyond this (a client making up
versions) each is answered at once, as RocketMQ answers, so a hold never multiplies a flood's work."""
CONSUMER_GROUPS_MAX_COUNT = 100_000
CLIENTS_PER_GROUP_MAX_COUNT = 10_000
LOCK_MAX_LIVE_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime
QUERY_MESSAGES_MAX_COUNT = 64  # maxMsgsNumBatch
BROKER_REGISTER_TIMEOUT_S = 6.0  # registerBrokerTimeoutMills
REPLY_PUSH_TIMEOUT_S = 10.0  # Broker2Client.callClient: how long a reply's push to its requester may take
BORN_HOSTS_CACHED_MAX_COUNT = 100_000  # encoded client addresses the send processor keeps (cleared beyond)
VALID_TOPIC_NAMES_CACHED_MAX_COUNT = 100_000  # topic names the send processor has validated (cleared beyond)
REGISTER_PERIOD_MIN_MS = 10_000  # registerNameServerPeriod is clamped to 10 s ..
REGISTER_PERIOD_MAX_MS = 60_000  # .. 60 s, as RocketMQ does
STATS_ITEMS_MAX_COUNT = 100_000  # (statsName, statsKey) windows kept for VIEW_BROKER_STATS_DATA (~2 KB each)

assert 0 < REGISTER_PERIOD_MIN_MS < REGISTER_PERIOD_MAX_MS

# --- delivery of delayed and timed messages (shoal.broker.schedule) ---
SCHEDULE_ROUND_DELIVERIES_MAX_COUNT = 1024  # messages delivered per round (~25 ms of work); requests run between rounds
SCHEDULE_ROUND_INDEXED_MAX_COUNT = 16_384  # timer units indexed per round (about 1 us each)
SCHEDULE_READ_UNITS_MAX_COUNT = 1024  # ConsumeQueue units read at once from one delay level or the timer topic
SCHEDULE_IDLE_WAIT_MAX_S = 1.0  # even with nothing due, look again this often (a wall-clock jump, a missed wake-up)
SCHEDULE_PUT_RETRY_DELAY_S = 0.1  # RocketMQ retries a failed put (disk full, busy page cache) after 100 ms
SCHEDULE_ERROR_RETRY_DELAY_S = 1.0  # a round that raised is retried after this
SCHEDULE_SNAPSHOTS_MAX_COUNT = 4096  # recent rounds' progress kept until the CommitLog is flushed past them
TIMER_PENDING_MAX_COUNT = 2_000_000  # timer messages indexed in memory at once (~90 MB); beyond, indexing pauses

assert 0 < SCHEDULE_READ_UNITS_MAX_COUNT <= SCHEDULE_ROUND_DELIVERIES_MAX_COUNT <= SCHEDULE_ROUND_INDEXED_MAX_COUNT
assert SCHEDULE_ROUND_INDEXED_MAX_COUNT <= TIMER_PENDING_MAX_COUNT
assert 0 < SCHEDULE_PUT_RETRY_DELAY_S <= SCHEDULE_ERROR_RETRY_DELAY_S <= SCHEDULE_IDLE_WAIT_MAX_S

# --- broker.conf / namesrv.conf ranges (shoal.broker.config checks every key against these) ---
TOPIC_QUEUES_MAX_COUNT = 1024  # defaultTopicQueueNums; BenchmarkTest, the largest built-in topic, has 1024
TRANSACTION_CHECK_MAX_COUNT = 1_000  # transactionCheckMax: RocketMQ's default is 15
TIMER_DELAY_MAX_S = 10 * 365 * 24 * 3600  # timerMaxDelaySec: ten years
FILE_RESERVED_TIME_MAX_HOURS = 10 * 365 * 24  # fileReservedTime: ten years
COMMITLOG_SEGMENT_SIZE_MAX_BYTES = 2**31 - 1  # mappedFileSizeCommitLog is a Java int
MAPPED_FILE_SIZE_MAX_BYTES = 2**31 - 1  # ConsumeQueue and IndexFile sizes are Java ints too
TRANSIENT_STORE_POOL_MAX_COUNT = 64  # transientStorePoolSize: each buffer is one CommitLog segment of memory
NAME_LENGTH_MAX = 127  # brokerName / brokerClusterName become topic names (brokerTopicEnable, clusterTopicEnable)

assert TOPIC_QUEUES_MAX_COUNT >= 1
JAVA_LONG_MAX = 2**63 - 1  # keys RocketMQ holds in a Java long with no tighter bound of ours
JAVA_INT_MAX = 2**31 - 1  # ... and in a Java int
HA_INTERVAL_MIN_MS = 10  # = replication.settings.MIN_INTERVAL_MS (that module imports config: no cycle)
HA_TRANSFER_BATCH_MAX_BYTES = 4 * 1024 * 1024  # = replication.limits.TRANSFER_BATCH_MAX_BYTES
# RocketMQ's replication defaults: here, not in replication.limits, because BrokerConfig uses them
# (and cannot import the replication package); replication.limits asserts how they relate to its bounds.
HA_TRANSFER_BATCH_DEFAULT_BYTES = 32 * 1024  # haTransferBatchSize: body bytes per master -> slave frame
HA_HEARTBEAT_INTERVAL_DEFAULT_MS = 5_000  # haSendHeartbeatInterval
HA_HOUSEKEEPING_INTERVAL_DEFAULT_MS = 20_000  # haHousekeepingInterval
HA_RECONNECT_INTERVAL_DEFAULT_MS = 5_000  # haReconnectInterval: a lost master link is retried after this
HA_SLAVE_TIMEOUT_DEFAULT_MS = 3_000  # slaveTimeout (4.9.3+): a SYNC_MASTER send waits this long for a slave
HA_SLAVE_SYNC_INTERVAL_DEFAULT_MS = 10_000  # slaveSyncInterval: the SlaveSynchronize period
HA_SLAVE_FALLBEHIND_DEFAULT_BYTES = 256 * 1024 * 1024  # haSlaveFallbehindMax: beyond it the slave is not OK
