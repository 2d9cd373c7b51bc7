"""The proxy's limits, named once (RocketMQ 5's proxy defaults where it has one)."""

GRPC_PORT = 8081
"""RocketMQ 5's proxy listens for gRPC on 8081."""
GRPC_MAX_MESSAGE_BYTES = 130 * 1024 * 1024
"""Largest gRPC message accepted or sent (RocketMQ 5: grpcMaxInboundMessageSize, 130 MB)."""
MESSAGE_BODY_MAX_BYTES = 4 * 1024 * 1024
"""Largest body accepted (the broker's maxMessageSize); told to producers in their settings."""
RECEIVE_BATCH_MAX = 32
"""Most messages one ReceiveMessage hands out (a broker pops at most 32)."""
RECEIVE_BATCH_DEFAULT = 32
DEFAULT_INVISIBLE_MS = 60_000
"""A ReceiveMessage without an invisible duration (push consumers, auto_renew) leases for this long."""
LONG_POLLING_DEFAULT_MS = 20_000
"""A ReceiveMessage without a long-polling timeout waits this long for a message."""
LONG_POLLING_MAX_MS = 30_000
RECEIVE_DEADLINE_MARGIN_MS = 2_000
"""A receive returns this long before the client's deadline, so its answer arrives in time."""
REQUEST_TIMEOUT_S = 3.0
"""Timeout of one request to a NameServer or broker."""
ROUTE_REFRESH_S = 30.0
"""A cached topic route is fetched again after this long (clients ask every 30 s too)."""
PUSH_RETRY_DELAYS_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
"""RocketMQ 5's default customized retry policy: a push consumer's nth failure makes the message
invisible for the nth delay (the last one repeats)."""
TELEMETRY_QUEUE_MAX = 1024
"""Commands waiting to go to one client's Telemetry stream; beyond this the oldest is dropped."""
BROKER_HEARTBEAT_INTERVAL_S = 30.0
"""How often the proxy heartbeats every broker master as its producer group (RocketMQ clients: 30 s)."""
