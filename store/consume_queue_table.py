"""All ConsumeQueues of a store, by (topic, queueId), created on first use (spec §2.1)."""

from __future__ import annotations

import concurrent.futures
import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from shoal.store.consume_queue import ConsumeQueue
from shoal.store.thread_name import name_this_thread

log = logging.getLogger(__name__)


class ConsumeQueueTable:
    def __init__(self, directory: Path, units_per_file: int) -> None:
        self.directory = directory
        self.units_per_file = units_per_file
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()
        self.allocator = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="shoal-allocate-cq", initializer=name_this_thread, initargs=("shoal-allocate-cq",)
        )
        """Creates files for puts that must not wait for the disk (dispatch on the event loop);
        its thread starts with the first such file."""

    def load(self) -> list[str]:
        """Open every `consumequeue/<topic>/<int>/`; other directory names are ignored as in RocketMQ."""
        notes: list[str] = []
        if not self.directory.exists():
            return notes
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                queue_id = _queue_id(queue_dir.name)
                if not queue_dir.is_dir() or queue_id is None:
                    continue
                queue = ConsumeQueue(topic_dir.name, queue_id, queue_dir, self.units_per_file, allocator=self.allocator)
                notes.extend(f"{topic_dir.name}/{queue_dir.name}: {note}" for note in queue.load())
                self._queues[(topic_dir.name, queue_id)] = queue
        return notes

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is not None:
            return queue
        with self._lock:
            queue = self._queues.get((topic, queue_id))
            if queue is None:
                directory = self.directory / topic / str(queue_id)
                queue = ConsumeQueue(topic, queue_id, directory, self.units_per_file, allocator=self.allocator)
                self._queues = {**self._queues, (topic, queue_id): queue}
        return queue

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(list(self._queues.values()))

    def __len__(self) -> int:
        return len(self._queues)

    def topics(self) -> set[str]:
        return {topic for topic, _ in self._queues}

    def queues_of(self, topic: str) -> list[ConsumeQueue]:
        return sorted((q for (t, _), q in self._queues.items() if t == topic), key=lambda q: q.queue_id)

    @property
    def max_physical_offset(self) -> int:
        return max((q.max_physical_offset for q in self._queues.values()), default=-1)

    def remove_topic(self, topic: str) -> int:
        """Destroy every queue of `topic`; returns how many were removed."""
        with self._lock:
            doomed = [q for (t, _), q in self._queues.items() if t == topic]
            self._queues = {k: q for k, q in self._queues.items() if k[0] != topic}
        for queue in doomed:
            queue.destroy()
        topic_dir = self.directory / topic
        if topic_dir.exists():
            shutil.rmtree(topic_dir, ignore_errors=True)
        return len(doomed)

    def remove_if(self, doomed: Callable[[ConsumeQueue], bool]) -> list[ConsumeQueue]:
        """Take the queues `doomed` picks out of the table; the caller destroys them."""
        with self._lock:
            removed = {key: queue for key, queue in self._queues.items() if doomed(queue)}
            if removed:
                self._queues = {key: queue for key, queue in self._queues.items() if key not in removed}
        return list(removed.values())

    def destroy_all(self) -> None:
        for queue in self:
            queue.destroy()
        with self._lock:
            self._queues = {}

    def close(self) -> None:
        for queue in self:
            queue.close()
        self.allocator.shutdown(wait=True)


def _queue_id(name: str) -> int | None:
    """The queue id a directory name stands for; None (skipped, as RocketMQ does) otherwise."""
    if not name.isascii() or not name.isdigit():
        return None
    return int(name)
