"""Running consolidation tasks: under a lease, recorded in the graph, on a schedule.

`ConsolidationRunner` runs one task over one tenant: it takes the (task,
tenant) lease from the store (so two replicas never run the same task on the
same tenant at once), checks again under the lease that a scheduled run is
still due (another replica may have just run it), records the run in the
graph when it starts and when it ends (the history and the next runs survive
a restart), renews the lease every page (with the progress, which status
shows) and releases it. A dry run changes nothing, so it takes no lease; it
is recorded too, marked dry.

`ConsolidationScheduler` is the tick loop: every CONSOLIDATION_TICK_SECONDS,
per tenant (the store's tenants()) and task with an interval (0 = off), it
runs what is due: the last recorded run's start + the interval, or now when
the task never ran.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import structlog

from services.consolidate.pass_report import PassResult, RunProgress
from services.consolidate.tasks import ConsolidationTasks
from services.core.background import BackgroundLoop
from services.core.domain.consolidation import TASK_ORDER, RunRecord, Schedule, Task
from services.core.domain.errors import Aborted
from services.core.domain.times import to_micros
from services.core.heap import release_freed_memory
from services.core.ports.runs import RunSchedule, RunStore

log = structlog.get_logger()

#: The mode scheduled runs record (a manual run records the mode it was asked for).
SCHEDULED = "scheduled"
#: The error a run gets when found unfinished with its lease gone (its process died mid-way).
ABANDONED = "abandoned: the run stopped before it finished (its replica ended and its lease lapsed)"


class LeaseLost(Exception):
    """Another replica took the lease (ours expired): the pass stops."""


class TaskReport:
    """A finished (or refused) run: its record and the sample of its changes."""

    __slots__ = ("record", "sample")

    def __init__(self, record: RunRecord, sample: list):
        self.record = record
        self.sample = sample


class ConsolidationRunner:
    """Runs tasks under leases and records them; knows what runs in this process."""

    def __init__(
        self,
        *,
        store: RunStore,
        tasks: ConsolidationTasks,
        schedule: Schedule,
        lease_seconds: float,
        history_keep: int,
        owner: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        after_pass: Callable[[], object] = release_freed_memory,
    ):
        self._store = store
        # After each run: a pass's pages go back to the system, not kept as the
        # process's new high-water mark (services/core/heap.py).
        self._after_pass = after_pass
        self._tasks = tasks
        self.schedule = schedule
        self._lease_us = int(lease_seconds * 1_000_000)
        self._keep = history_keep
        #: This replica's name on its leases.
        self.owner = owner or f"consolidate-{uuid.uuid4().hex[:12]}"
        self._clock = clock
        #: Run id -> progress of the runs going on in this process.
        self.running: dict[str, RunProgress] = {}

    async def run(
        self, task: Task, tenant: str, *, mode: str, dry_run: bool, after_dry_decay: bool = False
    ) -> TaskReport | None:
        """Run `task` over the tenant now. A scheduled run (mode "scheduled")
        gives None when another replica holds the lease or the task is no
        longer due; a manual one is refused (ABORTED, 409) when the task is
        already running on the tenant."""
        if dry_run:
            return await self._execute(task, tenant, mode=mode, dry_run=True, after_dry_decay=after_dry_decay)
        now = self._clock()
        if not await self._store.acquire_lease(
            task.value, tenant, self.owner, now_us=to_micros(now), ttl_us=self._lease_us
        ):
            if mode == SCHEDULED:
                return None
            raise Aborted(
                "CONSOLIDATION_RUNNING",
                f"consolidation task '{task.value}' is already running for this tenant; try again when it ends",
                field="mode",
            )
        try:
            if mode == SCHEDULED and not await self._still_due(task, tenant):
                return None  # another replica ran it between our check and our lease
            return await self._execute(task, tenant, mode=mode, dry_run=False)
        finally:
            try:
                await self._store.release_lease(task.value, tenant, self.owner)
            except Exception as exc:  # it expires on its own
                log.warning("consolidation lease release failed", task=task.value, tenant=tenant, error=str(exc))

    def now(self) -> datetime:
        return self._clock()

    async def abandon_stale(self, tenant: str) -> list[str]:
        """Mark the tenant's runs that died mid-way as finished, with the
        ABANDONED error (the store's rule: unfinished, lease gone or lapsed), so
        the history shows no run as running for ever; the run ids marked."""
        marked = await self._store.abandon_stale_runs(tenant, now_us=to_micros(self._clock()), reason=ABANDONED)
        if marked:
            log.warning("consolidation runs abandoned", tenant=tenant, runs=marked)
        return marked

    async def _still_due(self, task: Task, tenant: str) -> bool:
        last = (await self._store.last_runs(tenant)).get(task.value)
        return self.schedule.due(task, last.started_at if last else None, self._clock())

    async def _execute(
        self, task: Task, tenant: str, *, mode: str, dry_run: bool, after_dry_decay: bool = False
    ) -> TaskReport:
        started = self._clock()
        record = RunRecord(
            id=uuid.uuid4().hex,
            tenant=tenant,
            task=task.value,
            mode=mode,
            dry_run=dry_run,
            started_at=started,
            trigger=SCHEDULED if mode == SCHEDULED else "manual",
        )
        progress = RunProgress(task.value, tenant, mode, dry_run, started)
        self.running[record.id] = progress
        result = PassResult(counts=progress.counts)
        log.info("consolidation started", task=task.value, tenant=tenant, mode=mode, dry_run=dry_run)
        try:
            await self.abandon_stale(tenant)
        except Exception as exc:  # bookkeeping of older runs: never a reason to fail this one
            log.warning("consolidation stale runs not checked", tenant=tenant, error=str(exc))
        try:
            # Recorded as it starts, so the next runs count from here even if this replica dies.
            await self._store.record_run(record, keep=self._keep)
            result = await self._tasks.run(
                task,
                tenant,
                dry_run=dry_run,
                progress=progress,
                heartbeat=self._heartbeat(task, dry_run),
                after_dry_decay=after_dry_decay,
            )
        except Exception as exc:  # recorded with the counts so far; the next run starts afresh
            log.warning("consolidation failed", task=task.value, tenant=tenant, error=str(exc))
            result.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.running.pop(record.id, None)
            self._after_pass()
        record.counts = dict(result.counts)
        record.errors = list(result.errors)
        record.finished_at = self._clock()
        try:
            await self._store.record_run(record, keep=self._keep)
        except Exception as exc:
            log.warning("consolidation run not recorded", task=task.value, tenant=tenant, error=str(exc))
            record.errors.append(f"not recorded: {exc}")
        # A run with errors (records skipped, a failure) is no plain success, in the log either.
        (log.warning if record.errors else log.info)(
            "consolidation finished",
            task=task.value,
            tenant=tenant,
            mode=mode,
            dry_run=dry_run,
            seconds=round((record.finished_at - started).total_seconds(), 3),
            errors=len(record.errors),
            **record.counts,
        )
        return TaskReport(record, result.sample)

    def _heartbeat(self, task: Task, dry_run: bool):
        last = [self._clock()]

        async def renew(progress: RunProgress) -> None:
            if dry_run:
                return
            now = self._clock()
            # A third of the lease: renewed well before it lapses, without a write per page.
            if (now - last[0]).total_seconds() * 1_000_000 < self._lease_us / 3:
                return
            last[0] = now
            held = await self._store.renew_lease(
                task.value,
                progress.tenant,
                self.owner,
                now_us=to_micros(now),
                ttl_us=self._lease_us,
                progress={"processed": progress.processed, "total": progress.total, **progress.counts},
            )
            if not held:
                raise LeaseLost(f"the lease on '{task.value}' was taken by another replica")

        return renew

    async def run_mode(self, tasks: tuple[Task, ...], tenants: list[str], *, mode: str, dry_run: bool) -> list:
        """Each task over each tenant, in order (a manual run: POST /consolidate)."""
        reports = []
        for tenant in tenants:
            for task in tasks:
                # A dry decay wrote nothing: a dry forget after it judges the scores it would have written.
                rescore = dry_run and task is Task.FORGET and Task.DECAY in tasks
                report = await self.run(task, tenant, mode=mode, dry_run=dry_run, after_dry_decay=rescore)
                if report is not None:
                    reports.append(report)
        return reports

    async def next_runs(self, tenant: str) -> list[tuple[str, int, datetime | None, datetime | None]]:
        """Per task: (name, interval seconds, last run's start, next run), from the recorded runs."""
        last = await self._store.last_runs(tenant)
        now = self._clock()
        rows = []
        for task in TASK_ORDER:
            started = last[task.value].started_at if task.value in last else None
            rows.append((task.value, self.schedule.interval(task), started, self.schedule.next_run(task, started, now)))
        return rows


class ConsolidationScheduler(BackgroundLoop):
    """The tick loop: runs each due task over each tenant (see the module)."""

    _failed = "consolidation tick failed"

    def __init__(self, runner: ConsolidationRunner, store: RunSchedule, *, tick_seconds: float):
        self._runner = runner
        self._store = store
        self._interval = tick_seconds
        self._first = min(tick_seconds, 5.0)  # soon after start, not a whole tick later

    async def _pass(self) -> None:
        await self.tick()

    async def tick(self) -> list[TaskReport]:
        """One look at every tenant's schedule; the runs it made."""
        schedule = self._runner.schedule
        if not any(schedule.interval(task) for task in TASK_ORDER):
            return []
        reports = []
        for tenant in await self._store.tenants():
            last = await self._store.last_runs(tenant)
            for task in TASK_ORDER:
                previous = last.get(task.value)
                if not schedule.due(task, previous.started_at if previous else None, self._runner.now()):
                    continue
                report = await self._runner.run(task, tenant, mode=SCHEDULED, dry_run=False)
                if report is not None:
                    reports.append(report)
        return reports
