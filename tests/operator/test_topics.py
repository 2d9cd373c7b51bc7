"""topics.py: what a Topic asks of one broker group, including the two-phase queue shrink."""

from __future__ import annotations

import dataclasses

from shoal.operator import limits, topics
from shoal.operator.spec import TopicSpec

SPEC = TopicSpec(cluster="orders", topic_name="OrdersCreated", read_queue_nums=4, write_queue_nums=4)


def live(read: int = 4, write: int = 4, perm: int = 6, order: bool = False) -> topics.LiveTopic:
    return topics.LiveTopic(read, write, perm, order)


def test_missing_topic_is_created_and_equal_one_is_left_alone() -> None:
    step = topics.plan_topic(SPEC, None)
    assert (step.action, step.read_queue_nums, step.write_queue_nums, step.perm) == (topics.CREATE, 4, 4, 6)
    assert topics.plan_topic(SPEC, live()).action == topics.UNCHANGED


def test_drift_in_permission_order_or_growth_is_corrected() -> None:
    assert topics.plan_topic(SPEC, live(perm=4)).action == topics.UPDATE
    assert topics.plan_topic(SPEC, live(order=True)).action == topics.UPDATE
    grow = topics.plan_topic(dataclasses.replace(SPEC, read_queue_nums=8, write_queue_nums=8), live())
    assert (grow.action, grow.read_queue_nums, grow.write_queue_nums) == (topics.UPDATE, 8, 8)


def test_shrink_without_allow_shrink_is_refused() -> None:
    step = topics.plan_topic(SPEC, live(read=8, write=8))
    assert step.action == topics.REFUSED and "allowShrink" in step.reason


def test_shrink_writes_first_then_reads_once_consumers_emptied_the_removed_queues() -> None:
    spec = dataclasses.replace(SPEC, allow_shrink=True)
    first = topics.plan_topic(spec, live(read=8, write=8))
    assert (first.action, first.read_queue_nums, first.write_queue_nums, first.shrinking) == (topics.UPDATE, 8, 4, True)
    assert topics.needs_removed_queue_lag(spec, first.as_live())
    waiting = topics.plan_topic(spec, first.as_live(), removed_queue_lag=3)
    assert (waiting.action, waiting.read_queue_nums, waiting.shrinking) == (topics.UNCHANGED, 8, True)
    unknown = topics.plan_topic(spec, first.as_live(), removed_queue_lag=None)
    assert unknown.read_queue_nums == 8
    done = topics.plan_topic(spec, first.as_live(), removed_queue_lag=0)
    assert (done.action, done.read_queue_nums, done.write_queue_nums, done.shrinking) == (topics.UPDATE, 4, 4, False)
    assert not topics.needs_removed_queue_lag(spec, live(read=8, write=8))


def test_report_names_what_the_topic_waits_for() -> None:
    """Goal: the Ready condition and the retry follow one reconcile's outcome. Method: created,
    adopted, a missing group, a refused shrink and a shrink in progress."""
    created = topics.TopicOutcome({"orders-g0": topics.plan_topic(SPEC, None)})
    report = topics.report_topic(SPEC, "orders", created, first_status=True)
    assert (report.ready, report.reason, report.brokers, report.retry) == (True, "Created", ("orders-g0",), "")
    adopted = topics.TopicOutcome({"orders-g0": topics.plan_topic(SPEC, live())})
    assert topics.report_topic(SPEC, "orders", adopted, first_status=True).reason == "Adopted"
    assert topics.report_topic(SPEC, "orders", adopted, first_status=False).reason == "InSync"
    missing = topics.TopicOutcome(adopted.steps, ["orders-g1"])
    report = topics.report_topic(SPEC, "orders", missing, first_status=False)
    assert (report.ready, report.reason, report.retry_delay_s) == (False, "GroupNotServing", limits.RETRY_DELAY_S)
    refused = topics.TopicOutcome({"orders-g0": topics.plan_topic(SPEC, live(read=8, write=8))})
    report = topics.report_topic(SPEC, "orders", refused, first_status=False)
    assert (report.ready, report.reason, report.retry) == (False, "QueueShrinkRefused", "")
    shrink = dataclasses.replace(SPEC, allow_shrink=True)
    shrinking = topics.TopicOutcome({"orders-g0": topics.plan_topic(shrink, live(read=8, write=4), 3)})
    report = topics.report_topic(shrink, "orders", shrinking, first_status=False)
    assert (report.ready, report.reason) == (True, "ShrinkingQueues")
    assert report.retry_delay_s == limits.TOPIC_SHRINK_RECHECK_S


def test_message_type_and_attributes_are_sent_at_creation_and_corrected_on_drift() -> None:
    """spec.messageType becomes `+message.type=...`; a Normal topic needs no attribute (unset is
    NORMAL); a changed type is sent as an update; an unchangeable attribute on an existing topic
    is refused with the reason instead of failing at the broker on every reconcile."""
    fifo = dataclasses.replace(SPEC, message_type="FIFO")
    assert topics.plan_topic(fifo, None).attributes == "+message.type=FIFO"
    assert topics.plan_topic(SPEC, None).attributes == ""
    assert topics.plan_topic(SPEC, live()).action == topics.UNCHANGED
    typed = topics.LiveTopic(4, 4, 6, False, {"message.type": "FIFO"})
    assert topics.plan_topic(fifo, typed).action == topics.UNCHANGED
    drifted = topics.plan_topic(dataclasses.replace(SPEC, message_type="Delay"), typed)
    assert (drifted.action, drifted.attributes) == (topics.UPDATE, "+message.type=DELAY")
    fixed = topics.plan_topic(dataclasses.replace(SPEC, attributes={"queue.type": "SimpleCQ"}), live())
    assert fixed.action == topics.REFUSED and "queue.type" in fixed.reason
    created = topics.plan_topic(dataclasses.replace(fifo, attributes={"queue.type": "SimpleCQ"}), None)
    assert created.attributes == "+message.type=FIFO,+queue.type=SimpleCQ"
