"""Long admin actions run as jobs: the request that starts one answers at once with the job's page,
which shows its progress (refreshing itself each second, no script) until it is done, then what
happened to each item."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from shoal.client import MQClientError
from shoal.dashboard.limits import JOBS_KEPT

log = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(slots=True)
class Job:
    job_id: int
    title: str
    total: int
    owner: str
    """The access key that started it (only its sessions see it)."""
    done: int = 0
    failures: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    finished: bool = False

    @property
    def percent(self) -> int:
        return 100 if self.total == 0 else round(100 * (self.done + len(self.failures)) / self.total)


@dataclass(slots=True)
class JobBoard:
    """The jobs of this dashboard process, the newest JOBS_KEPT of them."""

    jobs: OrderedDict[int, Job] = field(default_factory=OrderedDict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def start(
        self,
        title: str,
        owner: str,
        items: Sequence[_T],
        action: Callable[[_T], Awaitable[str]],
        describe: Callable[[_T], str],
    ) -> Job:
        """Run `action` on each item in turn; each answer (or failure) is recorded as it comes."""
        job = Job(next(self._ids), title, len(items), owner)
        self.jobs[job.job_id] = job
        while len(self.jobs) > JOBS_KEPT:
            self.jobs.popitem(last=False)

        async def run() -> None:
            for item in items:
                try:
                    job.results.append(f"{describe(item)}: {await action(item)}")
                    job.done += 1
                except (MQClientError, ValueError) as error:
                    job.failures.append(f"{describe(item)}: {error}")
            job.finished = True
            log.info("%s: %d done, %d failed", title, job.done, len(job.failures))

        task = asyncio.create_task(run(), name=f"dashboard job {job.job_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    def find(self, job_id: int, owner: str) -> Job | None:
        job = self.jobs.get(job_id)
        return job if job is not None and job.owner == owner else None

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
