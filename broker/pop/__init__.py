"""shoal.broker.pop: RocketMQ 5's POP consumption on the broker (leases, acks, invisible time,
redelivery, DLQ), its state kept in a journal that survives a killed process (`journal.py`)."""

from shoal.broker.pop.service import PopBatch, PopRefused, PopRequest, PopService, message_filter_of

__all__ = ["PopBatch", "PopRefused", "PopRequest", "PopService", "message_filter_of"]
