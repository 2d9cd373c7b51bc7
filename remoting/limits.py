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
