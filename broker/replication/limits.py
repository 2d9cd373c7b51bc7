"""Bounds of master/slave replication, with units, in one place (spec §9).

RocketMQ's bounds are kept where it has them. The defaults of the broker.conf keys that change
them (`haSendHeartbeatInterval`, `haTransferBatchSize`, ...; `shoal.broker.config.BrokerConfig`)
are `shoal.broker.limits.HA_*_DEFAULT_*`, as BrokerConfig cannot import this package. The asserts
at the bottom state how the limits and those defaults relate.
"""

from __future__ import annotations

from shoal.broker import limits as broker_limits
from shoal.store import limits as store_limits

# --- wire ---
TRANSFER_BATCH_MAX_BYTES = 4 * 1024 * 1024  # a configured batch above this is refused
MASTER_READ_CHUNK_BYTES = 64 * 1024  # one read of slave acks (RocketMQ's buffer is 1 MiB; acks are 8 bytes)
SLAVE_READ_CHUNK_BYTES = 256 * 1024  # one read of transfer frames
FRAME_BODY_MAX_BYTES = TRANSFER_BATCH_MAX_BYTES
"""A frame body above this is a protocol error (a master never sends more than its batch size)."""
PENDING_RECORD_MAX_BYTES = store_limits.RECORD_SIZE_MAX_BYTES + TRANSFER_BATCH_MAX_BYTES
"""The slave keeps an incomplete record between frames; it can never be longer than one record."""
MASTER_WRITE_BUFFER_HIGH_BYTES = 1024 * 1024  # frames queued to one slave before the writer waits
WRITE_ROUND_MAX_BYTES = 256 * 1024  # frames the master writes to one slave in one system call, at most
SLAVE_WRITE_BUFFER_MAX_BYTES = 64 * 1024  # unsent acks; more means the master stopped reading: close

# --- timing ---
CONNECT_TIMEOUT_S = 3.0
METADATA_SYNC_FIRST_DELAY_S = 3.0  # SlaveSynchronize starts 3 s after the broker
METADATA_REQUEST_TIMEOUT_S = 3.0
NEW_DATA_POLL_S = 0.1  # a master writer re-checks the CommitLog this often even without a wakeup
FENCING_CHECK_TIMEOUT_S = 3.0  # asking a NameServer or another master whether we are stale

# --- dead links (liveness.py; issue 25) ---
KEEPALIVE_INTERVAL_MAX_S = 1.0
"""A Shoal master heartbeats, and a Shoal slave reports, after this much write silence at most
(haSendHeartbeatInterval when shorter): its peer learns so that silence beyond a few seconds is death."""
ANSWER_TIMEOUT_S = 3.0
"""A peer this late with what it owes (an ack of data sent, its next heartbeat or report, the state
after a hello) is dead: the link is closed."""
CADENCE_SAMPLE_MIN_S = 0.1
"""A gap shorter than this says nothing about how often a peer speaks (bytes queued behind a stall)."""
LIVENESS_CHECK_INTERVAL_S = 0.25  # a slave checks its link, and whether a report is due, this often
LIVENESS_STALL_S = 1.0
"""A liveness check this late after the one before means our own loop stalled: no verdict for this long."""

# --- counts ---
SLAVE_CONNECTIONS_MAX_COUNT = 16  # slaves (or anyone) connected to one master's HA port at once
REPLICA_WAITERS_MAX_COUNT = 100_000  # SYNC_MASTER sends waiting for a slave at once
EPOCH_HISTORY_MAX_COUNT = 64  # (epoch, start offset) pairs kept in config/epoch.json
BROKER_ID_MAX = 1_000_000  # the highest brokerId a demoted master picks for itself

assert broker_limits.HA_TRANSFER_BATCH_DEFAULT_BYTES <= TRANSFER_BATCH_MAX_BYTES <= FRAME_BODY_MAX_BYTES
assert MASTER_WRITE_BUFFER_HIGH_BYTES >= WRITE_ROUND_MAX_BYTES >= broker_limits.HA_TRANSFER_BATCH_DEFAULT_BYTES
# Heartbeats keep a link alive.
assert broker_limits.HA_HEARTBEAT_INTERVAL_DEFAULT_MS < broker_limits.HA_HOUSEKEEPING_INTERVAL_DEFAULT_MS
assert NEW_DATA_POLL_S < KEEPALIVE_INTERVAL_MAX_S and LIVENESS_CHECK_INTERVAL_S < KEEPALIVE_INTERVAL_MAX_S
assert (
    CADENCE_SAMPLE_MIN_S < KEEPALIVE_INTERVAL_MAX_S
    and KEEPALIVE_INTERVAL_MAX_S * 1000 <= broker_limits.HA_HEARTBEAT_INTERVAL_DEFAULT_MS
)
assert NEW_DATA_POLL_S < LIVENESS_STALL_S and LIVENESS_CHECK_INTERVAL_S < LIVENESS_STALL_S < ANSWER_TIMEOUT_S
assert 2 * KEEPALIVE_INTERVAL_MAX_S <= ANSWER_TIMEOUT_S  # a Shoal peer misses 2 keepalives before it is dead
# A slave slower than slaveTimeout fails SYNC sends anyway; declaring it dead sooner would close links that work.
assert ANSWER_TIMEOUT_S * 1000 >= broker_limits.HA_SLAVE_TIMEOUT_DEFAULT_MS
# Even a RocketMQ peer (heartbeat every 5 s) is found dead well before haHousekeepingInterval.
assert (
    broker_limits.HA_HEARTBEAT_INTERVAL_DEFAULT_MS + ANSWER_TIMEOUT_S * 1000
    < broker_limits.HA_HOUSEKEEPING_INTERVAL_DEFAULT_MS / 2
)
