"""Bounds of remoting connections, with units, in one place."""

from __future__ import annotations

CONNECT_TIMEOUT_S = 3.0  # default for opening a connection
REQUEST_TIMEOUT_S = 3.0  # default wait for a response
PENDING_REQUESTS_MAX_COUNT = 65_536  # per connection; beyond this a caller is refused at once
OPAQUE_MAX = 2**31 - 1  # opaque is a Java int; request ids wrap below it
WRITE_COALESCE_MAX_S = 100e-6  # frames sent within this long of the last write wait to share the next one

assert CONNECT_TIMEOUT_S > 0 and REQUEST_TIMEOUT_S > 0 and PENDING_REQUESTS_MAX_COUNT <= OPAQUE_MAX

# --- TLS (shoal.remoting.tls) ---
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # Netty SslHandler's default handshakeTimeoutMillis
TLS_CONFIG_FILE_MAX_BYTES = 64 * 1024  # tls.properties: a few keys; anything larger is the wrong file
TLS_PEM_FILE_MAX_BYTES = 1024 * 1024  # a certificate chain, key or trust bundle (a CA bundle is ~250 KB)

assert TLS_CONFIG_FILE_MAX_BYTES < TLS_PEM_FILE_MAX_BYTES

# --- the remoting servers' connections (Broker and NameServer: shoal.remoting.server) ---
GATHER_WRITE_MIN_BYTES = 16 * 1024  # below this, joining parts into one write is cheaper than sendmsg
CONNECTION_WRITE_BUFFER_HIGH_BYTES = 64 * 1024 * 1024  # a reader slower than this is cut off
PENDING_TASKS_PER_CONNECTION_MAX_COUNT = 10_000  # requests in progress on one connection
LISTEN_BACKLOG_MAX_COUNT = 1024  # connections the kernel queues before the broker accepts them
SERVER_CHANNEL_MAX_IDLE_DEFAULT_S = 120  # serverChannelMaxIdleTimeSeconds: no read or write this long closes
PARTIAL_FRAME_TIMEOUT_DEFAULT_S = 60  # a request frame still incomplete after this closes (slowloris)
SERVER_CONNECTIONS_DEFAULT_MAX_COUNT = 10_000  # maxConnections: beyond this new connections are closed at once
STALE_SCAN_INTERVAL_MIN_S = 0.1  # the scan for idle and stalled connections runs at most this often ...
STALE_SCAN_INTERVAL_MAX_S = 10.0  # ... and at least this often (each timeout is overrun by one interval at most)

assert GATHER_WRITE_MIN_BYTES < CONNECTION_WRITE_BUFFER_HIGH_BYTES
assert STALE_SCAN_INTERVAL_MIN_S < STALE_SCAN_INTERVAL_MAX_S <= PARTIAL_FRAME_TIMEOUT_DEFAULT_S

# --- TLS on the listening ports (shoal.remoting.tls_listener) ---
ACCEPT_RETRY_DELAY_S = 0.1  # after a failed accept (out of file descriptors): retry, do not spin
TLS_LOGGED_PEERS_MAX_COUNT = 10_000  # hosts whose refused plain connection was logged once; cleared beyond
TLS_CERTIFICATE_CHECK_INTERVAL_S = 1.0  # how often a TLS port looks for changed certificate files (a few stat calls)

# --- settings ranges shared by broker.conf and namesrv.conf (shoal.remoting.settings) ---
PORT_MAX = 65535
CONFIG_INTERVAL_MAX_MS = 24 * 3600 * 1000  # a period or timeout above a day is a unit mistake (s for ms)
CONNECTIONS_MAX_COUNT = 1_000_000  # maxConnections: beyond this the process runs out of descriptors first

assert PORT_MAX == 2**16 - 1
