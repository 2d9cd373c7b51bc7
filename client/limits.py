"""Every bound the client enforces, with its unit, in one place.

RocketMQ's own limits (spec §1.2, §1.6, §1.9, §15) keep their values; the others are ours and say
why they are safe. Settings (`settings.py`) are checked against these at construction; the
asserts at the bottom state how the limits relate.
"""

from __future__ import annotations

from shoal.formats import limits as formats_limits

# --- messages (spec §1.2, §1.6, §1.9) ---
PROPERTIES_LENGTH_MAX_BYTES = formats_limits.PROPERTIES_LENGTH_MAX_BYTES  # PROPERTIESLENGTH is a signed short
MESSAGE_BODY_SIZE_MAX_BYTES = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize (body, or a batch body)
COMPRESS_BODY_OVER_BYTES = 4096  # compressMsgBodyOverHowmuch: bodies this large or larger are zlib'd
ZLIB_COMPRESSION_LEVEL = 5  # DefaultMQProducer.compressLevel
# A 4 MiB body compresses at best ~1000:1 with zlib; a pulled body that inflates beyond this is
# hostile or corrupt, and inflating it without bound would exhaust memory.
INFLATED_BODY_SIZE_MAX_BYTES = 64 * 1024 * 1024
# A DELAY property longer than this reads as level 0 (no delay): ours; the levels go to 18, and
# the compiled decoder keeps the number in a C long (_decode_speedups.c's DELAY_DIGITS_MAX).
DELAY_DIGITS_MAX = 9
BATCH_MESSAGES_MAX_COUNT = 1024  # ours: a batch must also fit MESSAGE_BODY_SIZE_MAX_BYTES
SENDABLE_TOPICS_REMEMBERED_MAX_COUNT = 4096  # ours: topic names a send has checked, kept to skip the check
TAGGED_PROPERTY_PREFIXES_REMEMBERED_MAX_COUNT = 1024  # ours: property strings (up to UNIQ_KEY) of plain messages by tag

# --- sending (spec §15) ---
SEND_RETRIES_MAX_COUNT = 16  # retryTimesWhenSendFailed (default 2); more only multiplies duplicates
DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums: queues of an auto-created topic
# While a topic sends by TBW102's route, its own route is looked up at most this often (Java waits
# for the 30 s refresh; an ordered send meanwhile may pick a queue the new topic does not have).
BORROWED_ROUTE_RECHECK_S = 1.0
# After a failed send (connection error, a slave's or a write-protected broker's answer) or while a
# route has no writable queue, the topic's route is fetched again at once, but at most this often
# per topic: a failover is seen within this much of the new master's registration (Java waits for
# the 30 s poll), and a dead cluster gets at most a few route requests a second per topic.
ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S = 0.5
# MQFaultStrategy (sendLatencyFaultEnable): a send latency at or above latencyMax[i] keeps the
# broker out of the queue choice for notAvailableDuration[i]; a failed send counts as 30 s.
SEND_LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
SEND_NOT_AVAILABLE_DURATION_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
SEND_FAILURE_LATENCY_MS = 30000
FAULT_BROKERS_MAX_COUNT = 1024  # ours: brokers tracked by the fault strategy (a cluster has a handful)

# --- pulling and consuming (spec §8.8, §12, §15) ---
PULL_BATCH_MAX_COUNT = 1024  # DefaultMQPushConsumer checks pullBatchSize in [1, 1024]
CONSUME_BATCH_MAX_COUNT = 1024  # consumeMessageBatchMaxSize in [1, 1024]
CONSUME_CONCURRENCY_MAX_COUNT = 1000  # consumeThreadMax in [1, 1000]
PROCESS_QUEUE_CACHED_COUNT_MAX = 1000  # pullThresholdForQueue: messages cached per queue before pulls pause
PROCESS_QUEUE_CACHED_SIZE_MAX_BYTES = 100 * 1024 * 1024  # pullThresholdSizeForQueue (100 MiB)
CONSUME_CONCURRENTLY_MAX_SPAN = 2000  # consumeConcurrentlyMaxSpan: offsets between oldest and newest cached
BROKER_SUSPEND_MAX_MS = 15_000  # BROKER_SUSPEND_MAX_TIME_MILLIS: how long a broker may hold a pull
# The Java broker answers a parked pull up to ~5 s after its suspend timeout (spec §12, gotcha 20).
LONG_POLL_RESPONSE_MARGIN_S = 6.0
MAX_RECONSUME_TIMES_DEFAULT = 16  # maxReconsumeTimes -1 means 16 for concurrent consumers
DLQ_LIST_MAX_COUNT = 10_000  # ours: Admin.dlq_messages holds what it lists in memory

# --- transport (ours; see also shoal.protocol.limits) ---
NAMESRV_ADDRESSES_MAX_COUNT = 64  # a nameserver list is a handful of hosts; bounds failover loops
PROMOTE_TIMEOUT_S = 10.0  # a promotion flushes, dispatches and re-registers before it answers
REQUEST_TIMEOUT_MAX_S = 600.0  # no single request waits longer, whatever a caller asks

assert COMPRESS_BODY_OVER_BYTES < MESSAGE_BODY_SIZE_MAX_BYTES
assert INFLATED_BODY_SIZE_MAX_BYTES >= MESSAGE_BODY_SIZE_MAX_BYTES
assert BROKER_SUSPEND_MAX_MS / 1000 + LONG_POLL_RESPONSE_MARGIN_S < REQUEST_TIMEOUT_MAX_S
assert PROCESS_QUEUE_CACHED_SIZE_MAX_BYTES >= MESSAGE_BODY_SIZE_MAX_BYTES  # one largest message always fits
assert CONSUME_BATCH_MAX_COUNT <= PROCESS_QUEUE_CACHED_COUNT_MAX * 2  # a full batch can be cached
assert 0 < DEFAULT_TOPIC_QUEUE_NUMS <= 1024
assert len(SEND_LATENCY_MAX_MS) == len(SEND_NOT_AVAILABLE_DURATION_MS)
assert ROUTE_REFRESH_AFTER_FAILURE_MIN_INTERVAL_S < BORROWED_ROUTE_RECHECK_S * 5

# --- rebalancing before a route exists ---
QUICK_REBALANCE_RETRY_S = 1.0  # a topic created a moment ago is routed within ~2 s (broker registration)
QUICK_REBALANCE_RETRY_MAX_COUNT = 30  # then back to the normal 20 s rebalance interval

# --- transactions ---
TRANSACTION_CHECKS_IN_FLIGHT_MAX_COUNT = 2000  # checkRequestHoldMax: broker checks handled at once; more are dropped
