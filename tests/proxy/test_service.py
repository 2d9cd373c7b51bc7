"""proxy/service.py as a whole: no RPC of the generated service falls through to its stub."""

from __future__ import annotations

from shoal.protocol.v2.service_pb2_grpc import MessagingServiceServicer
from shoal.proxy.service import MessagingService


def test_every_rpc_of_the_generated_service_is_answered_by_shoal() -> None:
    """Goal: the generated base class's methods (gRPC UNIMPLEMENTED and a traceback per call) are
    never what a client reaches, including for RPCs a future proto adds. Method: compare the two."""
    rpcs = [name for name in vars(MessagingServiceServicer) if not name.startswith("_")]
    assert rpcs, "the generated servicer lists its RPCs"
    stubs = [name for name in rpcs if getattr(MessagingService, name) is getattr(MessagingServiceServicer, name)]
    assert stubs == []
