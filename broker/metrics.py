"""The counters the request path bumps: plain integers in dicts, no locks (the event loop is the
only writer). `shoal.broker.metrics_endpoint` turns them into Prometheus families at scrape time."""

from __future__ import annotations

from collections import defaultdict

from shoal.store import PutResult


class BrokerMetrics:
    """Counters the processors bump (no locks: the event loop is the only writer)."""

    def __init__(self) -> None:
        self.messages_in: dict[str, int] = defaultdict(int)
        self.bytes_in: dict[str, int] = defaultdict(int)
        self.put_failures: dict[str, int] = defaultdict(int)
        self.put_timeouts: dict[str, int] = defaultdict(int)
        """Stored puts answered FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE."""
        self.messages_out: dict[tuple[str, str], int] = defaultdict(int)
        self.bytes_out: dict[tuple[str, str], int] = defaultdict(int)
        self.put_calls: dict[str, int] = defaultdict(int)
        """Stored puts (a batch is one), by topic: the `times` of RocketMQ's TOPIC_PUT_NUMS."""
        self.pulls_found: dict[tuple[str, str], int] = defaultdict(int)
        """Pulls that returned messages, by (topic, group): the `times` of GROUP_GET_NUMS."""
        self.messages_in_total = 0
        self.bytes_in_total = 0
        self.put_failures_total = 0
        self.messages_out_total = 0
        self.pulls_found_total = 0
        self.pulls_missed_total = 0

    def sends(self, topic: str, result: PutResult) -> None:
        append = result.append
        if append is None:
            self.put_failures[result.status.value] += 1
            self.put_failures_total += 1
            return
        self.messages_in[topic] += append.message_count
        self.bytes_in[topic] += append.wrote_bytes
        self.put_calls[topic] += 1
        self.messages_in_total += append.message_count
        self.bytes_in_total += append.wrote_bytes

    def pulls(self, topic: str, group: str, count: int, size: int) -> None:
        if count:
            key = (topic, group)
            self.messages_out[key] += count
            self.bytes_out[key] += size
            self.pulls_found[key] += 1
            self.messages_out_total += count
            self.pulls_found_total += 1
        else:
            self.pulls_missed_total += 1
