"""Pure cron scheduling for StoreAnalysis: next times, missed runs, deadlines, concurrency.

No I/O and no kopf; the clock is always passed in (`now`, an aware datetime), so tests move time
instead of sleeping. Times are computed in the analysis' IANA time zone (croniter on an aware
datetime handles DST: a 02:30 run on a spring-forward day fires at 03:00) and stored as UTC.

How a tick decides (`plan`), Kubernetes CronJob semantics made explicit:

- `scheduleHash` = hash(schedule, timeZone). When it differs from the stored one (an edit), or no
  next time is stored yet, or the analysis is suspended, the next time is recomputed from `now`
  and nothing is due: an edit takes effect at once and never fires a run of the old schedule,
  and resuming never catches up on runs missed while suspended.
- Otherwise, once `now` reaches the stored next time, the run due is the *latest* fire time in
  [next, now] (older missed ones are counted, not run). If `now` is more than
  startingDeadlineSeconds past it, the run is Skipped (recorded, never started).
- A run's name is `<analysis>-<scheduled minutes since the epoch>`, as the CronJob controller
  names Jobs, so launching it twice (an operator restart before the status write) meets
  AlreadyExists, which means "already launched".
"""

from __future__ import annotations

import datetime
import hashlib
import re
import zoneinfo
from dataclasses import dataclass

from croniter import croniter

from shoal.operator import limits

CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
SCHEDULE_PATTERN = re.compile(r"^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|\S+ \S+ \S+ \S+ \S+)$")
"""Five fields or a macro, as a CronJob accepts; the CRD has the same pattern. croniter alone would
also take a sixth (seconds) field, which Kubernetes users would not expect."""

TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class ScheduleError(ValueError):
    """The schedule is not a valid five-field cron expression (or macro)."""


class TimeZoneError(ValueError):
    """The time zone is not a known IANA zone."""


def zone_of(time_zone: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise TimeZoneError(f"unknown IANA time zone {time_zone!r}") from error


def check_schedule(schedule: str) -> str:
    if SCHEDULE_PATTERN.match(schedule) is None or not croniter.is_valid(schedule):
        raise ScheduleError(f"not a five-field cron expression or macro: {schedule!r}")
    return schedule


def schedule_hash(schedule: str, time_zone: str) -> str:
    return hashlib.sha256(f"{schedule}\n{time_zone}".encode()).hexdigest()[:16]


def next_after(schedule: str, time_zone: str, after: datetime.datetime) -> datetime.datetime:
    """The first fire time strictly after `after`, in UTC."""
    assert after.tzinfo is not None, "times are aware"
    start = after.astimezone(zone_of(time_zone))
    fire: datetime.datetime = croniter(check_schedule(schedule), start).get_next(datetime.datetime)
    return fire.astimezone(datetime.UTC)


def latest_at_or_before(schedule: str, time_zone: str, at: datetime.datetime) -> datetime.datetime:
    """The last fire time <= `at`, in UTC."""
    start = (at + datetime.timedelta(seconds=1)).astimezone(zone_of(time_zone))
    fire: datetime.datetime = croniter(check_schedule(schedule), start).get_prev(datetime.datetime)
    return fire.astimezone(datetime.UTC)


def format_time(moment: datetime.datetime) -> str:
    return moment.astimezone(datetime.UTC).strftime(TIME_FORMAT)


def parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=datetime.UTC)


def run_name(analysis: str, scheduled: datetime.datetime) -> str:
    """`<analysis>-<minutes since the epoch>`: deterministic, so a repeated launch is a 409."""
    return f"{analysis}-{int(scheduled.timestamp()) // 60}"


def ad_hoc_run_name(analysis: str, request: str) -> str:
    """A `shoal.io/run-now` run: named by a hash of the annotation's value, so the same request
    is launched once however often the operator restarts; a new value asks for a new run."""
    return f"{analysis}-now-{hashlib.sha256(request.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Plan:
    schedule_hash: str
    next_time: datetime.datetime
    due_time: datetime.datetime | None = None
    """A run to start now."""
    skipped_time: datetime.datetime | None = None
    """A run that was due but missed its starting deadline."""
    missed_count: int = 0
    """Fire times passed over (older than the one due) because the operator was not running."""


def plan(
    schedule: str,
    time_zone: str,
    now: datetime.datetime,
    stored_hash: str,
    stored_next: datetime.datetime | None,
    starting_deadline_s: int | None,
    suspended: bool,
) -> Plan:
    """What a tick at `now` should do; see the module docstring."""
    current_hash = schedule_hash(schedule, time_zone)
    if current_hash != stored_hash or stored_next is None or suspended:
        return Plan(current_hash, next_after(schedule, time_zone, now))
    if now < stored_next:
        return Plan(current_hash, stored_next)
    latest = latest_at_or_before(schedule, time_zone, now)
    missed = 0
    fire = stored_next
    while fire < latest and missed < limits.ANALYSIS_MISSED_RUNS_COUNTED_MAX:
        missed += 1
        fire = next_after(schedule, time_zone, fire)
    next_time = next_after(schedule, time_zone, now)
    if starting_deadline_s is not None and (now - latest).total_seconds() > starting_deadline_s:
        return Plan(current_hash, next_time, skipped_time=latest, missed_count=missed)
    return Plan(current_hash, next_time, due_time=latest, missed_count=missed)


@dataclass(frozen=True)
class Decision:
    start: bool
    replace: tuple[str, ...] = ()
    """Active runs to stop first (concurrencyPolicy Replace)."""
    reason: str = ""


def concurrency(policy: str, active_runs: tuple[str, ...]) -> Decision:
    """Allow starts beside active runs; Forbid skips while any is active; Replace stops them."""
    assert policy in ("Allow", "Forbid", "Replace"), policy
    if not active_runs or policy == "Allow":
        return Decision(start=True)
    if policy == "Forbid":
        return Decision(start=False, reason=f"concurrencyPolicy Forbid: {', '.join(active_runs)} still active")
    return Decision(
        start=True, replace=active_runs, reason=f"concurrencyPolicy Replace: stopping {', '.join(active_runs)}"
    )
