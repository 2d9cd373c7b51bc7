"""shoal.proxy: RocketMQ 5's gRPC `apache.rocketmq.v2.MessagingService` in front of remoting brokers
(RocketMQ 5's proxy, cluster mode), so the official v5 clients work against Shoal."""

from shoal.proxy.errors import ProxyError
from shoal.proxy.server import ProxyServer, ProxySettings

__all__ = ["ProxyError", "ProxyServer", "ProxySettings"]
