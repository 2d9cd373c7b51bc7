"""The one seam between replication and the store: what the HA master reads and the HA slave
writes. `MessageStore` satisfies it; a test can hand replication anything else that does."""

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
