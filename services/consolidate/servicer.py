"""ConsolidateService: consolidation runs and their status, and backups (proto <-> use cases)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from memgrid.v1 import consolidate_service_pb2 as pb
from memgrid.v1 import consolidate_service_pb2_grpc as pb_grpc
from services.consolidate.archive_reader import read_chunks
from services.consolidate.backup import BackupWriter
from services.consolidate.backup_files import BackupInfo
from services.consolidate.restore import RestoreProgress, Restorer
from services.consolidate.scheduler import ConsolidationRunner, TaskReport
from services.core.codec import ts_to_pb
from services.core.domain.archive_names import missing_backup
from services.core.domain.consolidation import RunRecord, tasks_for_mode
from services.core.domain.errors import InvalidArgument
from services.core.domain.times import parse_iso, to_micros
from services.core.grpc.tenant import is_operator, require_admin, require_operator, tenant_of
from services.core.ports.runs import RunStatus


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


def _now() -> datetime:
    return datetime.now(UTC)


def _tenant_of_archive(info: BackupInfo) -> str | None:
    """The one tenant an archive holds, by its manifest; None for an every-tenant
    archive or one without a manifest (an operator's to see)."""
    header = info.header
    return header.tenant if header is not None and header.scope == "tenant" else None


def backup_to_pb(info: BackupInfo) -> pb.BackupInfo:
    message = pb.BackupInfo(name=info.name, size_bytes=info.size_bytes)
    if info.header is not None:
        h = info.header
        message.scope, message.tenant, message.version = h.scope, h.tenant or "", h.version
        if h.created_at:
            message.created_at.CopyFrom(ts_to_pb(parse_iso(h.created_at, "created_at")))
    if info.manifest is not None:
        m = info.manifest
        message.nodes.update(m.nodes)
        message.edges.update(m.edges)
        message.tenants.update(m.tenants)
        message.sha256 = m.sha256
    return message


def restore_to_pb(progress: RestoreProgress, name: str) -> pb.RestoreProgress:
    message = pb.RestoreProgress(
        phase=progress.phase,
        nodes_total=progress.nodes_total,
        edges_total=progress.edges_total,
        nodes_done=progress.nodes_done,
        edges_done=progress.edges_done,
        created=progress.created,
        updated=progress.updated,
        kept=progress.kept,
        done=progress.done,
        elapsed_seconds=progress.elapsed_seconds,
        skipped=progress.skipped,
        audit_left_out=progress.audit_left_out,
        problems=progress.problems,
        signature=progress.signature,
        tenants=[
            pb.RestoredTenant(tenant=t.tenant, memories=t.memories, unembedded_ids=t.unembedded_ids)
            for t in progress.tenants
        ],
    )
    if progress.done and progress.header is not None:
        message.backup.CopyFrom(
            backup_to_pb(BackupInfo(name, None, 0, progress.header, progress.manifest))  # type: ignore[arg-type]
        )
    return message


class ConsolidateServicer(pb_grpc.ConsolidateServiceServicer):
    def __init__(
        self,
        backups: BackupWriter,
        *,
        restorer: Restorer,
        chunk_bytes: int = 1 << 20,
        runner: ConsolidationRunner,
        store: RunStatus,
        status_history: int = 20,
    ):
        self._backups = backups
        self._restorer = restorer
        self._chunk = chunk_bytes
        self._runner = runner
        self._store = store
        self._history = status_history

    async def RunConsolidation(self, request: pb.RunConsolidationRequest, context) -> pb.RunConsolidationResponse:
        """Run the mode's tasks now over the caller's tenant (or, with
        every_tenant, every tenant's: only an operator's claim may ask);
        dry unless dry_run is set false."""
        if request.every_tenant:
            require_operator(context, "a consolidation of every tenant")
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
        await self._runner.abandon_stale(tenant)  # a run that died mid-way shows as abandoned, not running
        history = await self._store.run_history(tenant, self._history) if self._history else []
        return pb.GetConsolidationStatusResponse(
            running=running, next_runs=next_runs, history=[run_to_pb(r) for r in history]
        )

    async def CreateBackup(self, request: pb.CreateBackupRequest, context) -> pb.CreateBackupResponse:
        """Write the caller's tenant's graph (every tenant's with every_tenant:
        an operator's) to a new archive (services/consolidate/backup.py)."""
        if request.every_tenant:
            require_operator(context, "a backup of every tenant")
        result = await self._backups.create(None if request.every_tenant else tenant_of(context))
        return pb.CreateBackupResponse(
            path=str(result.path),
            memories=result.memories,
            relations=result.relations,
            entities=result.entities,
            patterns=result.patterns,
            backup=backup_to_pb(result.info),
        )

    async def ListBackups(self, request: pb.ListBackupsRequest, context) -> pb.ListBackupsResponse:
        """The archives under the backups directory, newest first: an operator's
        every one, a tenant's admin its own tenant's only."""
        require_admin(context, "the list of backups")
        listing = await asyncio.to_thread(self._backups.files.listing)
        if not is_operator(context):
            tenant = tenant_of(context)
            listing = [info for info in listing if _tenant_of_archive(info) == tenant]
        return pb.ListBackupsResponse(backups=[backup_to_pb(info) for info in listing])

    async def _visible(self, name: str, context) -> None:
        """NotFound, as for an unknown name, unless the caller may see the archive: an operator
        every one, a tenant's admin its own tenant's (never an every-tenant or unlabelled one)."""
        if is_operator(context):
            return
        info = await asyncio.to_thread(self._backups.files.info, name)
        if _tenant_of_archive(info) != tenant_of(context):
            raise missing_backup(name)

    async def ReadBackup(self, request: pb.ReadBackupRequest, context) -> AsyncIterator[pb.BackupChunk]:
        """The archive's bytes, BACKUP_CHUNK_BYTES at a time (an admin's call, of its own tenant's archive)."""
        require_admin(context, "a backup's download")
        await self._visible(request.name, context)
        path = await asyncio.to_thread(self._backups.files.path_of, request.name)
        async for chunk in read_chunks(path, self._chunk):
            yield pb.BackupChunk(data=chunk)

    async def UploadBackup(self, request: pb.UploadBackupRequest, context) -> pb.UploadBackupResponse:
        """Add a chunk to an uploaded archive, for one RestoreBackup (an admin's call)."""
        require_admin(context, "an archive's upload")
        upload, size = await asyncio.to_thread(
            self._backups.files.append_upload, request.upload, request.offset, request.data, request.complete, _now()
        )
        return pb.UploadBackupResponse(upload=upload, size_bytes=size)

    async def RestoreBackup(self, request: pb.RestoreBackupRequest, context) -> AsyncIterator[pb.RestoreProgress]:
        """Verify the archive, then write it into the graph (services/consolidate/restore.py), with progress."""
        caller = tenant_of(context)
        if request.every_tenant:
            require_operator(context, "a restore into every tenant the archive names")
        if request.allow_unsigned:
            require_operator(context, "a restore of an archive this deployment did not sign (allow_unsigned)")
        if bool(request.name) == bool(request.upload):
            raise InvalidArgument(
                "RESTORE_SOURCE", "name one backup ('name') or upload an archive, not both", field="name"
            )
        if request.name:
            await self._visible(request.name, context)
        files = self._backups.files
        path = await asyncio.to_thread(
            files.path_of if request.name else files.upload_path, request.name or request.upload
        )
        # What the manifest file beside a listed archive declares bounds the read (an upload has none).
        declared = 0
        if request.name:
            info = await asyncio.to_thread(files.info, request.name)
            declared = info.manifest.bytes if info.manifest is not None else 0
        files.in_use.add(path.name)
        try:
            async for progress in self._restorer.restore(
                path,
                caller=caller,
                every_tenant=request.every_tenant,
                merge=request.merge,
                allow_unsigned=request.allow_unsigned,
                declared_bytes=declared,
            ):
                yield restore_to_pb(progress, request.name or request.upload)
        finally:
            files.in_use.discard(path.name)
            if request.upload:
                await asyncio.to_thread(path.unlink, missing_ok=True)
