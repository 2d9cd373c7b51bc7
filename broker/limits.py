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
REPLY_PUSH_TIMEOUT_S = 10.0  # Broker2Client.callClient: how long a reply's push to its requester may take
SEND_RESPONSE_TIMEOUT_S = 10.0  # max(syncFlushTimeout, slaveTimeout) + 5 s
BORN_HOSTS_CACHED_MAX_COUNT = 100_000  # encoded client addresses the send processor keeps (cleared beyond)
LISTEN_BACKLOG_MAX_COUNT = 1024  # connections the kernel queues before the broker accepts them
REGISTER_PERIOD_MIN_MS = 10_000  # registerNameServerPeriod is clamped to 10 s ..
REGISTER_PERIOD_MAX_MS = 60_000  # .. 60 s, as RocketMQ does
STATS_ITEMS_MAX_COUNT = 100_000  # (statsName, statsKey) windows kept for VIEW_BROKER_STATS_DATA (~2 KB each)

assert GATHER_WRITE_MIN_BYTES < CONNECTION_WRITE_BUFFER_HIGH_BYTES
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

# --- connections of the remoting servers (Broker and NameServer) ---
SERVER_CHANNEL_MAX_IDLE_DEFAULT_S = 120  # serverChannelMaxIdleTimeSeconds: no read or write this long closes
PARTIAL_FRAME_TIMEOUT_DEFAULT_S = 60  # a request frame still incomplete after this closes (slowloris)
SERVER_CONNECTIONS_DEFAULT_MAX_COUNT = 10_000  # maxConnections: beyond this new connections are closed at once
STALE_SCAN_INTERVAL_MIN_S = 0.1  # the scan for idle and stalled connections runs at most this often ...
STALE_SCAN_INTERVAL_MAX_S = 10.0  # ... and at least this often (each timeout is overrun by one interval at most)
BROKER_EXPIRED_TIMEOUT_MS = 120_000  # NameServer brokerChannelExpiredTime: no registration this long drops a broker

assert STALE_SCAN_INTERVAL_MIN_S < STALE_SCAN_INTERVAL_MAX_S <= PARTIAL_FRAME_TIMEOUT_DEFAULT_S

# --- plain ACL (shoal.broker.acl) ---
ACL_KEY_LENGTH_MIN_EXCLUSIVE = 6  # AclConstants: accessKey and secretKey must be longer than 6 characters
ACL_KEY_LENGTH_MAX = 1024  # an accessKey/secretKey in plain_acl.yml; real ones are 8..64
ACL_REQUEST_FIELD_LENGTH_MAX = 4096  # AccessKey/Signature/SecurityToken in a request: longer is refused unhashed
ACL_FILE_SIZE_MAX_BYTES = 4 * 1024 * 1024  # plain_acl.yml; ~40k accounts of 100 bytes
ACL_ACCOUNTS_MAX_COUNT = 10_000
ACL_RELOAD_INTERVAL_S = 0.5  # RocketMQ's AclFileWatchService polls every 500 ms
ACL_REFUSALS_LOGGED_PER_WINDOW_COUNT = 20  # refusals logged per window; the rest are counted in one line
ACL_REFUSAL_LOG_WINDOW_S = 10.0
ACL_HOST_CACHE_MAX_COUNT = 10_000  # peer hosts whose global-white decision is cached (cleared beyond / on reload)
ACL_DECISIONS_CACHED_MAX_COUNT = 10_000  # send/pull verdicts per (key, code, topic, group) (cleared beyond / on reload)
ACL_REPLAY_WINDOW_S = 300.0  # an admin account's signature stays bound to its request code this long after last use
ACL_REPLAY_SIGNATURES_MAX_COUNT = 16_384  # (accessKey, signature) -> code entries (~250 bytes each); oldest go first

assert ACL_KEY_LENGTH_MIN_EXCLUSIVE < ACL_KEY_LENGTH_MAX <= ACL_REQUEST_FIELD_LENGTH_MAX
assert ACL_REPLAY_WINDOW_S > 0 and ACL_REPLAY_SIGNATURES_MAX_COUNT > 0

# --- broker.conf / namesrv.conf ranges (shoal.broker.config checks every key against these) ---
PORT_MAX = 65535
CONFIG_INTERVAL_MAX_MS = 24 * 3600 * 1000  # a period or timeout above a day is a unit mistake (s for ms)
CONNECTIONS_MAX_COUNT = 1_000_000  # maxConnections: beyond this the process runs out of descriptors first
TOPIC_QUEUES_MAX_COUNT = 1024  # defaultTopicQueueNums; BenchmarkTest, the largest built-in topic, has 1024
TRANSACTION_CHECK_MAX_COUNT = 1_000  # transactionCheckMax: RocketMQ's default is 15
TIMER_DELAY_MAX_S = 10 * 365 * 24 * 3600  # timerMaxDelaySec: ten years
FILE_RESERVED_TIME_MAX_HOURS = 10 * 365 * 24  # fileReservedTime: ten years
COMMITLOG_SEGMENT_SIZE_MAX_BYTES = 2**31 - 1  # mappedFileSizeCommitLog is a Java int
MAPPED_FILE_SIZE_MAX_BYTES = 2**31 - 1  # ConsumeQueue and IndexFile sizes are Java ints too
TRANSIENT_STORE_POOL_MAX_COUNT = 64  # transientStorePoolSize: each buffer is one CommitLog segment of memory
NAME_LENGTH_MAX = 127  # brokerName / brokerClusterName become topic names (brokerTopicEnable, clusterTopicEnable)

assert TOPIC_QUEUES_MAX_COUNT >= 1 and PORT_MAX == 2**16 - 1
JAVA_LONG_MAX = 2**63 - 1  # keys RocketMQ holds in a Java long with no tighter bound of ours
HA_INTERVAL_MIN_MS = 10  # = replication.settings.MIN_INTERVAL_MS (that module imports config: no cycle)
HA_TRANSFER_BATCH_MAX_BYTES = 4 * 1024 * 1024  # = replication.limits.TRANSFER_BATCH_MAX_BYTES

# --- TLS on the listening ports (shoal.broker.tls_listener) ---
ACCEPT_RETRY_DELAY_S = 0.1  # after a failed accept (out of file descriptors): retry, do not spin
TLS_LOGGED_PEERS_MAX_COUNT = 10_000  # hosts whose refused plain connection was logged once; cleared beyond
TLS_CERTIFICATE_CHECK_INTERVAL_S = 1.0  # how often a TLS port looks for changed certificate files (a few stat calls)
