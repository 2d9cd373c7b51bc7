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

from collections.abc import Mapping
from dataclasses import dataclass, field

from shoal.formats.topic_attributes import ATTRIBUTES, MESSAGE_TYPE_KEY, format_modification
from shoal.operator import limits
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
    attributes: Mapping[str, str] = field(default_factory=dict, compare=False)
    """RocketMQ 5 topic attributes (`message.type`, ...); compared key by key in `plan_topic`."""


MESSAGE_TYPES = {"Normal": "NORMAL", "FIFO": "FIFO", "Delay": "DELAY", "Transaction": "TRANSACTION"}
"""Topic.spec.messageType -> the `message.type` attribute RocketMQ 5's proxy checks sends against."""


def wanted_attributes(spec: TopicSpec) -> dict[str, str]:
    """spec.attributes with spec.messageType as `message.type` (the typed field wins)."""
    return {**spec.attributes, MESSAGE_TYPE_KEY: MESSAGE_TYPES[spec.message_type]}


def attribute_changes(wanted: Mapping[str, str], live: Mapping[str, str]) -> dict[str, str]:
    """The `+key=value` additions that bring `live` to `wanted` (keys not wanted are left alone:
    a broker refuses to remove some, and other tools may own them). A topic without `message.type`
    is NORMAL already, so a Normal topic is created and kept without the attribute (4.9.7's JSON)."""
    effective = {MESSAGE_TYPE_KEY: "NORMAL", **live}
    return {f"+{key}": value for key, value in sorted(wanted.items()) if effective.get(key) != value}


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
    attributes: str = ""
    """The attribute modification to send (`+message.type=FIFO`); empty: none."""

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
    wanted = wanted_attributes(spec)
    if live is None:
        return TopicStep(
            CREATE,
            read,
            write,
            perm,
            spec.order,
            "created",
            attributes=format_modification(attribute_changes(wanted, {})),
        )
    changes = attribute_changes(wanted, live.attributes)
    fixed = sorted(key[1:] for key in changes if key[1:] in ATTRIBUTES and not ATTRIBUTES[key[1:]].changeable)
    if fixed:
        return TopicStep(
            REFUSED,
            reason=f"topic attribute {', '.join(fixed)} is set only when a topic is created (RocketMQ 5's rule)",
        )
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
    step = TopicStep(UPDATE, read, write, perm, spec.order, "updated", shrinking, format_modification(changes))
    if step.as_live() == live and not changes:
        reason = "read queues wait for consumers before they shrink" if shrinking else "in sync"
        return TopicStep(UNCHANGED, read, write, perm, spec.order, reason, shrinking)
    return step


@dataclass
class TopicOutcome:
    """What one reconcile of a Topic did, per broker group (brokerName)."""

    steps: dict[str, TopicStep] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    """Placement groups not registered with the NameServers (not up yet)."""


@dataclass(frozen=True)
class TopicReport:
    """The Topic's Ready condition, where the topic is, and when to look again."""

    ready: bool
    reason: str
    message: str
    brokers: tuple[str, ...]
    retry: str = ""
    """Why the reconcile is retried ("": it is not), after `retry_delay_s`."""
    retry_delay_s: float = 0.0


def report_topic(spec: TopicSpec, cluster_name: str, outcome: TopicOutcome, first_status: bool) -> TopicReport:
    """Ready, or why not, from one reconcile's outcome. `first_status`: the Topic has no
    conditions yet, so a topic found unchanged on every group was adopted."""
    refused = sorted((name, step) for name, step in outcome.steps.items() if step.action == REFUSED)
    holders = tuple(sorted(outcome.steps))
    shrinking = sorted(name for name, step in outcome.steps.items() if step.shrinking)
    if outcome.missing:
        retry, delay_s = f"topic {spec.topic_name}: groups not serving yet", limits.RETRY_DELAY_S
    elif shrinking:
        retry, delay_s = f"topic {spec.topic_name}: shrinking", limits.TOPIC_SHRINK_RECHECK_S
    else:
        retry, delay_s = "", 0.0
    if refused:
        name, step = refused[0]
        return TopicReport(False, "QueueShrinkRefused", f"{name}: {step.reason}", holders, retry, delay_s)
    if outcome.missing:
        message = f"groups not serving yet: {', '.join(outcome.missing)}"
        return TopicReport(False, "GroupNotServing", message, holders, retry, delay_s)
    actions = {step.action for step in outcome.steps.values()}
    reason = "Created" if actions == {CREATE} else "Updated" if actions - {UNCHANGED} else "InSync"
    if first_status and CREATE not in actions:
        reason = "Adopted"
    message = f"topic {spec.topic_name} is on {', '.join(holders)} of cluster {cluster_name}"
    if shrinking:
        reason = "ShrinkingQueues"
        message += f"; read queues shrink on {', '.join(shrinking)} once consumers have emptied them"
    return TopicReport(True, reason, message, holders, retry, delay_s)
