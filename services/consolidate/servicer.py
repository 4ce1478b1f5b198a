"""ConsolidateService: consolidation runs and their status, and backups (proto <-> use cases)."""

from __future__ import annotations

from memgrid.v1 import consolidate_service_pb2 as pb
from memgrid.v1 import consolidate_service_pb2_grpc as pb_grpc
from services.consolidate.backup import BackupWriter
from services.consolidate.scheduler import ConsolidationRunner, TaskReport
from services.core.codec import ts_to_pb
from services.core.domain.consolidation import RunRecord, tasks_for_mode
from services.core.domain.times import to_micros
from services.core.grpc.tenant import tenant_of
from services.core.ports import ConsolidationStore


def run_to_pb(record: RunRecord, sample=()) -> pb.ConsolidationRun:
    return pb.ConsolidationRun(
        task=record.task,
        tenant=record.tenant,
        mode=record.mode,
        dry_run=record.dry_run,
        started=ts_to_pb(record.started_at),
        finished=ts_to_pb(record.finished_at),
        counts={k: int(v) for k, v in record.counts.items()},
        errors=list(record.errors),
        sample=[
            pb.ConsolidationChange(memory_id=c.memory_id, action=c.action, before=c.before, after=c.after)
            for c in sample
        ],
    )


class ConsolidateServicer(pb_grpc.ConsolidateServiceServicer):
    def __init__(
        self,
        backups: BackupWriter | None = None,
        *,
        runner: ConsolidationRunner | None = None,
        store: ConsolidationStore | None = None,
        status_history: int = 20,
    ):
        self._backups = backups
        self._runner = runner
        self._store = store
        self._history = status_history

    async def RunConsolidation(self, request: pb.RunConsolidationRequest, context) -> pb.RunConsolidationResponse:
        """Run the mode's tasks now over the caller's tenant (or, with
        every_tenant, every tenant's: the gateway lets only an admin ask);
        dry unless dry_run is set false."""
        tasks = tasks_for_mode(request.mode)
        dry_run = request.dry_run if request.HasField("dry_run") else True
        tenants = await self._store.tenants() if request.every_tenant else [tenant_of(context)]
        mode = (request.mode or "").strip().lower()
        reports: list[TaskReport] = await self._runner.run_mode(tasks, tenants, mode=mode, dry_run=dry_run)
        return pb.RunConsolidationResponse(
            mode=mode, dry_run=dry_run, runs=[run_to_pb(r.record, r.sample) for r in reports]
        )

    async def GetConsolidationStatus(
        self, request: pb.GetConsolidationStatusRequest, context
    ) -> pb.GetConsolidationStatusResponse:
        """The caller's tenant's runs in progress (this replica's and, by
        their leases, other replicas'), next runs and recent history."""
        tenant = tenant_of(context)
        running = [
            pb.RunningTask(
                task=p.task,
                tenant=p.tenant,
                mode=p.mode,
                dry_run=p.dry_run,
                started=ts_to_pb(p.started_at),
                processed=p.processed,
                total=p.total,
                counts=dict(p.counts),
            )
            for p in list(self._runner.running.values())
            if p.tenant == tenant
        ]
        for lease in await self._store.leases(tenant, now_us=to_micros(self._runner.now())):
            if lease.owner == self._runner.owner:
                continue  # this replica's: its progress is above
            figures = {k: int(v) for k, v in (lease.progress or {}).items() if isinstance(v, int | float)}
            running.append(
                pb.RunningTask(
                    task=lease.task,
                    tenant=lease.tenant,
                    mode="",
                    started=ts_to_pb(lease.acquired_at),
                    processed=figures.pop("processed", 0),
                    total=figures.pop("total", 0),
                    counts=figures,
                )
            )
        next_runs = [
            pb.ScheduledTask(name=name, interval_seconds=interval, last_run=ts_to_pb(last), next_run=ts_to_pb(due))
            for name, interval, last, due in await self._runner.next_runs(tenant)
        ]
        history = await self._store.run_history(tenant, self._history) if self._history else []
        return pb.GetConsolidationStatusResponse(
            running=running, next_runs=next_runs, history=[run_to_pb(r) for r in history]
        )

    async def CreateBackup(self, request: pb.CreateBackupRequest, context) -> pb.CreateBackupResponse:
        """Write the caller's tenant's graph to a backup file (see services/consolidate/backup.py)."""
        result = await self._backups.create(tenant_of(context))
        return pb.CreateBackupResponse(
            path=str(result.path),
            memories=result.memories,
            relations=result.relations,
            entities=result.entities,
            patterns=result.patterns,
        )
