"""schedule.py: cron next times in IANA zones, missed runs, starting deadlines, concurrency, names."""

from __future__ import annotations

import datetime

import pytest

from shoal.operator import schedule

UTC = datetime.UTC


def at(hour: int, minute: int, second: int = 0, day: int = 1) -> datetime.datetime:
    return datetime.datetime(2026, 1, day, hour, minute, second, tzinfo=UTC)


def test_next_time_is_computed_in_the_time_zone_and_returned_in_utc() -> None:
    """02:30 in Berlin is 01:30 UTC in winter; in Tokyo 03:00 is 18:00 UTC the day before."""
    assert schedule.next_after("30 2 * * *", "Europe/Berlin", at(0, 0)) == at(1, 30)
    assert schedule.next_after("0 3 * * *", "Asia/Tokyo", at(0, 0)) == at(18, 0)
    assert schedule.next_after("@hourly", "UTC", at(0, 0)) == at(1, 0)


def test_spring_forward_runs_at_the_first_valid_time() -> None:
    """On 2026-03-29 Berlin skips 02:00-03:00: a 02:30 run fires at 03:00 local (01:00 UTC)."""
    start = datetime.datetime(2026, 3, 29, 0, 0, tzinfo=UTC)
    assert schedule.next_after("30 2 * * *", "Europe/Berlin", start) == datetime.datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize("bad", ["61 * * * *", "* * * *", "0 0 * * * *", "TZ=UTC 0 0 * * *", "", "@often"])
def test_bad_schedules_are_refused(bad: str) -> None:
    """Only five-field expressions and macros pass (croniter alone would take a seconds field)."""
    with pytest.raises(schedule.ScheduleError):
        schedule.check_schedule(bad)


def test_unknown_time_zone_is_refused() -> None:
    """A zone missing from the tz database is a TimeZoneError, never the operator's local zone."""
    with pytest.raises(schedule.TimeZoneError):
        schedule.zone_of("Mars/Olympus_Mons")


def test_run_names_are_minutes_since_the_epoch() -> None:
    """Like CronJob Jobs: the same scheduled time always gives the same name."""
    moment = at(0, 5)
    assert schedule.run_name("stats", moment) == f"stats-{int(moment.timestamp()) // 60}"
    assert schedule.run_name("stats", moment) == schedule.run_name("stats", moment + datetime.timedelta(seconds=59))
    assert schedule.ad_hoc_run_name("stats", "a") == schedule.ad_hoc_run_name("stats", "a")
    assert schedule.ad_hoc_run_name("stats", "a") != schedule.ad_hoc_run_name("stats", "b")


def _plan(now: datetime.datetime, stored_next: datetime.datetime | None, **kwargs: object) -> schedule.Plan:
    defaults: dict[str, object] = {
        "schedule": "*/5 * * * *",
        "time_zone": "UTC",
        "stored_hash": schedule.schedule_hash("*/5 * * * *", "UTC"),
        "starting_deadline_s": None,
        "suspended": False,
    }
    defaults.update(kwargs)
    return schedule.plan(now=now, stored_next=stored_next, **defaults)  # type: ignore[arg-type]


def test_first_plan_only_computes_the_next_time() -> None:
    """With no stored next time nothing is due; the next fire time is set."""
    plan = _plan(at(0, 0, 30), None, stored_hash="")
    assert (plan.next_time, plan.due_time, plan.skipped_time) == (at(0, 5), None, None)


def test_due_run_is_the_stored_next_time_once_reached() -> None:
    """At 00:05:10 the 00:05 run is due and the next time moves to 00:10."""
    plan = _plan(at(0, 5, 10), at(0, 5))
    assert (plan.due_time, plan.next_time, plan.missed_count) == (at(0, 5), at(0, 10), 0)
    assert _plan(at(0, 4, 59), at(0, 5)).due_time is None


def test_downtime_runs_only_the_latest_missed_time_and_counts_the_rest() -> None:
    """Back at 00:17 after downtime from 00:05: only the 00:15 run is due; 00:05 and 00:10 missed."""
    plan = _plan(at(0, 17), at(0, 5))
    assert (plan.due_time, plan.missed_count, plan.next_time) == (at(0, 15), 2, at(0, 20))


def test_starting_deadline_turns_a_late_run_into_skipped() -> None:
    """120 s late with a 60 s deadline: Skipped; 30 s late: due."""
    late = _plan(at(0, 7), at(0, 5), starting_deadline_s=60)
    assert (late.due_time, late.skipped_time) == (None, at(0, 5))
    on_time = _plan(at(0, 5, 30), at(0, 5), starting_deadline_s=60)
    assert (on_time.due_time, on_time.skipped_time) == (at(0, 5), None)


def test_schedule_or_zone_change_recomputes_from_now() -> None:
    """A different hash recomputes the next time from now and runs nothing of the old schedule."""
    plan = _plan(at(0, 7), at(0, 5), schedule="0 3 * * *")
    assert (plan.due_time, plan.next_time) == (None, at(3, 0))
    assert plan.schedule_hash != schedule.schedule_hash("*/5 * * * *", "UTC")
    assert schedule.schedule_hash("0 3 * * *", "UTC") != schedule.schedule_hash("0 3 * * *", "Asia/Tokyo")


def test_suspended_never_catches_up() -> None:
    """While suspended nothing is due and the next time keeps moving with now."""
    plan = _plan(at(0, 17), at(0, 5), suspended=True)
    assert (plan.due_time, plan.skipped_time, plan.next_time) == (None, None, at(0, 20))


def test_concurrency_policies() -> None:
    """Allow starts beside active runs; Forbid refuses; Replace names the runs to stop."""
    assert schedule.concurrency("Forbid", ()) == schedule.Decision(start=True)
    assert schedule.concurrency("Allow", ("a",)).start
    forbid = schedule.concurrency("Forbid", ("a",))
    assert not forbid.start and "a" in forbid.reason
    replace = schedule.concurrency("Replace", ("a", "b"))
    assert replace.start and replace.replace == ("a", "b")


def test_times_round_trip_as_rfc3339_utc() -> None:
    """Status times are written and read as ...Z strings."""
    assert schedule.format_time(at(0, 5)) == "2026-01-01T00:05:00Z"
    assert schedule.parse_time("2026-01-01T00:05:00Z") == at(0, 5)
    assert schedule.parse_time("") is None
