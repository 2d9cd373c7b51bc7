"""The VIP channel: RocketMQ's second client listener on `listenPort - 2` (fastRemotingServer).

Clients with `com.rocketmq.sendMessageWithVIPChannel=true` (the default of older clients and of the
RocketMQ dashboard) take the broker address the NameServer gives them and send most requests to
its port - 2 (MixAll.brokerVIPChannel): sends, consumer offsets and lists, queue locks, send-backs,
queries and admin reads; heartbeats and pulls always go to the main port. RocketMQ 4.9.7's fast
server has every processor of the main one except PULL_MESSAGE (BrokerController.registerProcessor),
so it answers a pull there as an unknown request code. Nothing about it is registered with the
NameServer.

    sock = bind_vip_socket(host, config.fast_port_for(port))   # PreflightError when taken
    vip = server.sibling("broker-vip", withheld_codes=VIP_WITHHELD_CODES)
    await vip.start(host, port, sock=sock)
"""

from __future__ import annotations

import errno
import socket

from shoal.broker.preflight import PreflightError
from shoal.protocol import RequestCode
from shoal.remoting import limits as remoting_limits

VIP_WITHHELD_CODES = frozenset({int(RequestCode.PULL_MESSAGE)})
"""What the VIP listener does not serve although the main listener does."""


def bind_vip_socket(host: str, port: int) -> socket.socket:
    """The VIP listener's socket, bound before the store opens; a taken port is one clear line."""
    try:
        sock = socket.create_server((host, port), backlog=remoting_limits.LISTEN_BACKLOG_MAX_COUNT)
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        raise PreflightError(
            f"port {port} is already in use: the VIP channel (fastListenPort, RocketMQ's listenPort - 2) "
            f"needs it (another broker? `ss -ltnp 'sport = :{port}'`); free it, or set fastListenPort=0 to run "
            "without a VIP channel"
        ) from None
    sock.setblocking(False)
    return sock
