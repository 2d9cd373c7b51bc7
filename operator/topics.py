"""Pure decision: what a Topic's spec asks of one broker group, given what that group holds.

Kubernetes -> broker, one way (Strimzi's KafkaTopic semantics): the Topic resource is the truth,
and a broker whose topic config differs (someone ran `mqadmin updateTopic`, a new group came up
without the topic) is brought back to it on every reconcile.

Queue shrinks lose messages when done carelessly: a producer may still write to a queue being
removed, and messages left in a removed read queue are never consumed. So a shrink needs
`allowShrink: true` and runs in two phases: first the write queues shrink (nothing new arrives in
the queues being removed), then the read queues shrink once no consumer group has anything left
in them (`removed_queue_lag` 0). Growing is always safe and immediate.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.operator.spec import PERMISSION_BITS, TopicSpec

CREATE = "create"
UPDATE = "update"
UNCHANGED = "unchanged"
REFUSED = "refused"


@dataclass(frozen=True)
class LiveTopic:
    """A topic's config on one broker (TopicConfig of GET_ALL_TOPIC_CONFIG)."""

    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool


@dataclass(frozen=True)
class TopicStep:
    """What to send to one broker: `action` with these queue numbers, and why."""

    action: str
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    order: bool = False
    reason: str = ""
    shrinking: bool = False
    """A read-queue shrink is waiting for consumers (reconcile again soon)."""

    def as_live(self) -> LiveTopic:
        return LiveTopic(self.read_queue_nums, self.write_queue_nums, self.perm, self.order)


def needs_removed_queue_lag(spec: TopicSpec, live: LiveTopic | None) -> bool:
    """Whether the read-queue shrink's second phase could run now (so the lag is worth asking)."""
    return (
        live is not None
        and spec.allow_shrink
        and spec.read_queue_nums < live.read_queue_nums
        and live.write_queue_nums <= spec.read_queue_nums
    )


def plan_topic(spec: TopicSpec, live: LiveTopic | None, removed_queue_lag: int | None = None) -> TopicStep:
    """The step for one broker. `removed_queue_lag`: messages consumers still have in the read
    queues a shrink removes (None: not known)."""
    perm = PERMISSION_BITS[spec.permission]
    read, write = spec.read_queue_nums, spec.write_queue_nums
    if live is None:
        return TopicStep(CREATE, read, write, perm, spec.order, "created")
    shrinks = read < live.read_queue_nums or write < live.write_queue_nums
    if shrinks and not spec.allow_shrink:
        return TopicStep(
            REFUSED,
            reason=(
                f"the broker has {live.read_queue_nums} read / {live.write_queue_nums} write queues and the spec asks "
                f"{read} / {write}: shrinking queues can strand messages; set allowShrink: true to shrink in two phases"
            ),
        )
    shrinking = False
    # Phase 1 of a read shrink: stop writes to the queues being removed, keep reading them until
    # the writes have shrunk and consumers have emptied them.
    if read < live.read_queue_nums and (
        live.write_queue_nums > read or removed_queue_lag is None or removed_queue_lag > 0
    ):
        read = live.read_queue_nums
        shrinking = True
    step = TopicStep(UPDATE, read, write, perm, spec.order, "updated", shrinking)
    if step.as_live() == live:
        reason = "read queues wait for consumers before they shrink" if shrinking else "in sync"
        return TopicStep(UNCHANGED, read, write, perm, spec.order, reason, shrinking)
    return step
