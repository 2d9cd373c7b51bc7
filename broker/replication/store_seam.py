"""The seam between the HA transfer and the store: what the HA master (`HAServer`) reads and the
HA slave (`HAClient`) writes. `MessageStore` satisfies both Protocols; a test can hand the HA
server or client anything else that does. The replication service around them (promotion,
fencing, truncation) uses the store's face, `MessageStore`, directly."""

from __future__ import annotations

from typing import Protocol


class ReplicaSource(Protocol):
    """What a master serves its slaves from."""

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    @property
    def segment_size(self) -> int: ...

    def data_from(self, physical_offset: int) -> tuple[memoryview, int] | None: ...


class ReplicaTarget(Protocol):
    """What a slave writes the master's bytes into."""

    @property
    def sync_flush(self) -> bool:
        """Whether the master's bytes must be on our disk before we acknowledge them."""
        ...

    @property
    def wrote_offset(self) -> int: ...

    @property
    def segment_size(self) -> int: ...

    @property
    def segment_count(self) -> int: ...

    def append_replicated(self, data: bytes | memoryview, physical_offset: int) -> int: ...

    def start_empty_at(self, physical_offset: int) -> None: ...

    def flush_to_end(self) -> None: ...
