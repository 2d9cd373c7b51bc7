"""The check-back service: every `transactionCheckInterval`, ask producers about old half messages
(RocketMQ's TransactionalMessageCheckService, spec §11.5).

One round walks the half queue from the half progress H to the end it had when the round began.
For each copy (`TransactionTable` and `check_decision` say what to do): settled copies are passed;
the latest copy of an unresolved transaction older than `transactionTimeOut` is re-put with
TRANSACTION_CHECK_TIMES + 1 and CHECK_TRANSACTION_STATE goes, oneway, to any live producer of its
PGROUP group (not necessarily the one that sent it, which may be gone); after
`transactionCheckMax` checks it moves to TRANS_CHECK_MAX_TIME_TOPIC. The walk stops at the first
copy too young to check (later ones are younger) or when a write fails, and H is saved there.

The round runs on the broker's event loop and yields to it after every batch, so sends and
pulls go on while a large backlog is checked; each step on one copy is synchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from shoal.broker.transactions import limits
from shoal.broker.transactions.half_message import HALF_QUEUE_ID, HalfRecord
from shoal.broker.transactions.service import TransactionService
from shoal.broker.transactions.transaction_table import CheckDecision, TransactionTable
from shoal.formats.topics import TRANS_HALF_TOPIC

log = logging.getLogger(__name__)


@dataclass
class RoundReport:
    """What one check round did (logged when it did anything)."""

    examined: int = 0
    checked: int = 0
    renewed: int = 0
    discarded: int = 0
    half_progress: int = 0
    stopped_by: str = "end of the queue"


class TransactionCheckService:
    """start() / stop() / wakeup(); a round every `interval_s` while the broker is master."""

    def __init__(self, service: TransactionService, interval_s: float) -> None:
        assert interval_s > 0
        self.service = service
        self.interval_s = interval_s
        self.rounds = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        assert self._task is None, "started twice"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="transaction check")

    def wakeup(self) -> None:
        """Run a round now (tests, admin)."""
        self._wakeup.set()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), self.interval_s)
            self._wakeup.clear()
            if not self.service.is_master():
                continue
            self.service.sync_role()
            try:
                report = await self.check_round()
            except Exception:
                log.exception("transaction check round failed; next in %.1f s", self.interval_s)
                continue
            self.rounds += 1
            if report.checked or report.renewed or report.discarded:
                log.info("transaction check round: %s", report)

    async def check_round(self) -> RoundReport:
        """One walk of the half queue from H (module docstring); saves the new H."""
        service = self.service
        table = service.table
        end = service.store.max_offset_in_queue(TRANS_HALF_TOPIC, HALF_QUEUE_ID)
        offset = progress = table.half_progress
        report = RoundReport()
        deadline = time.monotonic() + limits.CHECK_ROUND_TIME_MAX_S
        while offset < end:
            if service.table is not table:  # rebuilt meanwhile (promoted to master): this walk is stale
                return self._finish(report, progress, table)
            batch, offset = service.half_batch(offset, end)
            for queue_offset, record in batch:
                decision = service.decide(queue_offset, record)
                if decision is CheckDecision.WAIT:
                    report.stopped_by = f"a half message younger than its immunity at {queue_offset}"
                    return self._finish(report, progress, table)
                if not self._act(decision, record, report):
                    report.stopped_by = f"a failed write for the half message at {queue_offset}"
                    return self._finish(report, progress, table)
                progress = queue_offset + 1
                report.examined += 1
            if not batch:
                progress = offset  # a gap (retention) or nothing readable up to `offset`
            if time.monotonic() > deadline or report.examined >= limits.CHECK_ROUND_MESSAGES_MAX_COUNT:
                report.stopped_by = "the round's time or message limit"
                return self._finish(report, progress, table)
            await asyncio.sleep(0)
        return self._finish(report, progress, table)

    def _finish(self, report: RoundReport, progress: int, table: TransactionTable) -> RoundReport:
        if self.service.table is not table:
            report.stopped_by = "the state was rebuilt during the round"
            return report
        self.service.save_progress(progress)
        report.half_progress = progress
        return report

    def _act(self, decision: CheckDecision, record: HalfRecord, report: RoundReport) -> bool:
        """Carry out `decision` for one copy; False when a write failed (the round stops there)."""
        service = self.service
        if decision is CheckDecision.SKIP:
            return True
        if decision is CheckDecision.DISCARD:
            report.discarded += 1
            return service.discard(record)
        if decision is CheckDecision.RENEW:
            report.renewed += 1
            return service.renew(record, record.check_times) is not None
        renewed = service.renew(record, record.check_times + 1)
        if renewed is None:
            return False
        report.checked += 1
        service.send_check(renewed)
        return True
