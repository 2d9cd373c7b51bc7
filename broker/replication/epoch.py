"""`config/epoch.json`: this broker's epoch, the epoch history, and a role that outlives broker.conf.

RocketMQ 4.x cannot switch roles without DLedger; Shoal can (PROMOTE_TO_MASTER), so it needs what
DLedger-less systems use to stay safe: an epoch that grows with every promotion, and a history of
where each epoch started writing.

    {"epoch": 2,
     "history": [{"epoch": 0, "startOffset": 0}, {"epoch": 2, "startOffset": 81920}],
     "brokerRole": "ASYNC_MASTER", "brokerId": 0, "confirmedOffset": 0}

* A follower of epoch E rejoining a leader of a newer epoch keeps its CommitLog only up to the
  start of the first epoch after E (`divergence_offset`): anything beyond was written by a leader
  the group has since abandoned, and the new leader wrote other bytes at those offsets.
* `brokerRole`/`brokerId` are set once a promotion or a fencing demotion happened and override
  broker.conf at the next start, so a restart does not undo them. Delete the file to return to
  broker.conf (only when the group agrees).

The file is written with the metadata files' safe procedure (tmp, fsync, rename, dir fsync).
"""

from __future__ import annotations

import itertools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.broker.replication import limits
from shoal.broker.replication.codec import EpochEntry
from shoal.store.json_files import read_json_file_tolerantly, write_json_file_safely

log = logging.getLogger(__name__)

FILE_NAME = "epoch.json"


@dataclass
class EpochState:
    epoch: int = 0
    history: list[EpochEntry] = field(default_factory=lambda: [EpochEntry(0, 0)])
    broker_role: str | None = None
    """The role to start with, overriding broker.conf (None: broker.conf decides)."""
    broker_id: int | None = None
    confirmed_offset: int = 0
    """As a slave: the highest offset our master said a slave acknowledged (a promotion below it
    would lose acknowledged messages), kept across restarts."""

    def begin(self, epoch: int, start_offset: int) -> None:
        """A new epoch led by us, whose first byte goes to `start_offset`."""
        assert epoch > self.epoch, (epoch, self.epoch)
        assert start_offset >= self.history[-1].start_offset, (start_offset, self.history)
        self.epoch = epoch
        self.history = [*self.history, EpochEntry(epoch, start_offset)][-limits.EPOCH_HISTORY_MAX_COUNT :]

    def adopt(self, epoch: int, history: tuple[EpochEntry, ...]) -> None:
        """Follow a leader of `epoch` (≥ ours) whose history is `history`."""
        assert epoch >= self.epoch, (epoch, self.epoch)
        self.epoch = epoch
        if history:
            self.history = list(history[-limits.EPOCH_HISTORY_MAX_COUNT :])

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "epoch": self.epoch,
            "history": [{"epoch": entry.epoch, "startOffset": entry.start_offset} for entry in self.history],
        }
        if self.broker_role is not None:
            document["brokerRole"] = self.broker_role
        if self.broker_id is not None:
            document["brokerId"] = self.broker_id
        if self.confirmed_offset:
            document["confirmedOffset"] = self.confirmed_offset
        return document

    @classmethod
    def from_json(cls, document: Any) -> EpochState:
        if not isinstance(document, dict):
            raise ValueError("epoch.json is not an object")
        epoch = _natural(document.get("epoch", 0), "epoch")
        history = [
            EpochEntry(_natural(item.get("epoch"), "history.epoch"), _natural(item.get("startOffset"), "startOffset"))
            for item in document.get("history") or []
            if isinstance(item, dict)
        ] or [EpochEntry(0, 0)]
        if any(b.epoch <= a.epoch or b.start_offset < a.start_offset for a, b in itertools.pairwise(history)):
            raise ValueError("epoch.json history is not increasing")
        if history[-1].epoch > epoch:
            raise ValueError(f"epoch.json history reaches epoch {history[-1].epoch} beyond epoch {epoch}")
        role = document.get("brokerRole")
        broker_id = document.get("brokerId")
        return cls(
            epoch=epoch,
            history=history,
            broker_role=str(role) if role is not None else None,
            broker_id=_natural(broker_id, "brokerId") if broker_id is not None else None,
            confirmed_offset=_natural(document.get("confirmedOffset", 0), "confirmedOffset"),
        )


def _natural(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"epoch.json: {name}={value!r} is not a non-negative integer")
    return value


def divergence_offset(history: tuple[EpochEntry, ...] | list[EpochEntry], follower_epoch: int) -> int | None:
    """Where a follower last in `follower_epoch` must cut its CommitLog to follow a leader with
    `history`: the start of the first later epoch. None when no later epoch exists (nothing to cut).

    Raises ValueError when the history no longer reaches back to the follower's epoch: its
    divergence point is unknown and truncating anywhere could keep stale bytes."""
    later = [entry for entry in history if entry.epoch > follower_epoch]
    if not later:
        return None
    if history and history[0].epoch > follower_epoch and history[0].start_offset > 0:
        raise ValueError(
            f"the leader's epoch history starts at epoch {history[0].epoch}, after our epoch {follower_epoch}: "
            "the point where we diverged is unknown; wipe this broker's store and let it copy again"
        )
    return later[0].start_offset


class EpochFile:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / FILE_NAME

    def load(self) -> EpochState:
        """The stored state, or a fresh epoch 0 when there is no file; a damaged file is fatal
        (guessing an epoch could let a fenced master lead again)."""
        document = read_json_file_tolerantly(self.path)
        if document is None:
            if self.path.exists():
                raise ValueError(f"{self.path} is unreadable and has no usable .bak; fix or remove it")
            return EpochState()
        return EpochState.from_json(document)

    def save(self, state: EpochState) -> None:
        write_json_file_safely(self.path, json.dumps(state.to_json(), indent=1, sort_keys=True))
        log.info("epoch %d saved to %s (role %s, id %s)", state.epoch, self.path, state.broker_role, state.broker_id)
