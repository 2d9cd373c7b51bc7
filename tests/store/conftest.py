"""Store test helpers: a started store, a put that must succeed, dispatch now, a record's body.

The tests of each store module (tests/store/test_<module>.py) drive it through a real MessageStore on
real files; these are the steps they share."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from shoal.formats.properties import encode_properties
from shoal.formats.record import decode_header
from shoal.store import MessageStore, MessageToStore, PutResult, PutStatus, StoreSettings

WaitUntil = Callable[..., None]
SettingsFactory = Callable[..., StoreSettings]


def props(**values: str) -> bytes:
    return encode_properties(values)


def put(store: MessageStore, topic: str, queue_id: int, body: bytes, **properties: str) -> PutResult:
    result = store.put_message(MessageToStore(topic, queue_id, body, props(**properties)))
    assert result.status is PutStatus.PUT_OK, result
    assert result.append is not None
    return result


def process_write_bytes() -> int:
    """Bytes this process has sent to the block layer (/proc/self/io): a sync's write-back counts for its caller."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    raise AssertionError("no write_bytes in /proc/self/io")


def settle(store: MessageStore) -> None:
    """Dispatch whatever is readable now, so ConsumeQueues and the index are current."""
    store.dispatch_now()
    assert store.dispatch_behind_bytes == 0


def body_of(view: memoryview) -> bytes:
    header = decode_header(view, 0)
    return bytes(view[header.body_position : header.body_position + header.body_length])


def open_store(settings: StoreSettings, **kwargs: object) -> MessageStore:
    store = MessageStore(settings, **kwargs)  # type: ignore[arg-type]
    store.open()
    store.start()
    return store


def cq_files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}
