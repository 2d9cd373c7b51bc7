"""Replication errors.

    ReplicationError                  base of everything raised by shoal.broker.replication
     +-- HAProtocolError              bytes on the HA port that break the protocol (-> close the link)
     |    +-- OffsetMismatchError     a frame that does not continue our CommitLog
     +-- PeerSilentError              the peer is overdue with what it owes (a dead link, liveness.py)
     +-- StaleEpochError              the peer (or we) belong to an older epoch: fenced
     +-- PromotionRefusedError        PROMOTE_TO_MASTER cannot be done safely (-> SYSTEM_ERROR + reason)

A protocol error or a silent peer never harms the side that detects it: it closes that one
connection and logs why. Expected refusals map to a RocketMQ ResponseCode in `RESPONSE_CODE_OF_ERROR`.
"""

from __future__ import annotations

from shoal.protocol import ResponseCode


class ReplicationError(Exception):
    """Base of every error raised by shoal.broker.replication."""


class HAProtocolError(ReplicationError):
    """The peer sent bytes the HA protocol does not allow; the connection is closed."""


class OffsetMismatchError(HAProtocolError):
    """Replicated bytes that do not start where our CommitLog ends."""


class PeerSilentError(ReplicationError):
    """The HA peer owes us bytes and is too late with them: the link is dead (closed, redialled)."""


class StaleEpochError(ReplicationError):
    """A broker of an older epoch: it must not lead (or be followed)."""


class PromotionRefusedError(ReplicationError):
    """Promoting this broker now could lose acknowledged messages or split the group."""


RESPONSE_CODE_OF_ERROR: dict[type[ReplicationError], int] = {
    PromotionRefusedError: ResponseCode.SYSTEM_ERROR,
    StaleEpochError: ResponseCode.SYSTEM_ERROR,
}
