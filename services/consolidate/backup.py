"""Backups (POST /backup, on a schedule): a versioned archive of one tenant's
graph, or of every tenant's, at one point in time, written under
MEMGRID_DATA_DIR/backups/ (the format: services/core/domain/archive.py and
docs/backup.md; the directory: backup_files.py; reading one back:
archive_reader.py).

Consistency: the export reads a snapshot (GraphBackup.snapshot, on FalkorDB
a scratch replica cut loose from the store), so the archive holds every
write acknowledged before the snapshot and none after, whatever runs
meanwhile. The archive is written to a .partial file, fsync'd and renamed,
as every file of the directory is.

An archive's last line is signed (HMAC-SHA256 under BACKUP_SIGNING_KEY,
archive.sign), so a restore tells memgrid's own archives from hand-made ones.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import structlog

from services.consolidate.backup_files import BackupFiles, BackupInfo, fsync_dir, make_dir, open_private
from services.core.background import BackgroundLoop
from services.core.domain import archive_names
from services.core.domain.archive import ArchiveEncoder, Header
from services.core.domain.times import format_iso, to_micros
from services.core.ports.archive import GraphBackup
from services.core.ports.leases import LeaseAcquirer

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class BackupResult:
    path: Path
    memories: int
    relations: int
    entities: int
    patterns: int
    info: BackupInfo


class BackupWriter:
    """Writes archives from snapshots of the graph."""

    def __init__(
        self,
        *,
        graph: GraphBackup,
        files: BackupFiles,
        page_size: int,
        keep: int = 0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        key: bytes | None = None,
    ):
        self._graph = graph
        self.files = files
        self._page_size = page_size
        self._keep = keep
        self._clock = clock
        #: The backup key the archives are signed with (None: unsigned, as an archive by hand is).
        self._key = key

    async def create(self, tenant: str | None) -> BackupResult:
        """Write the tenant's graph (None: every tenant's) to a new archive; its path and counts."""
        started = self._clock()
        began = time.perf_counter()
        directory = self.files.directory
        await asyncio.to_thread(make_dir, directory)
        path = (directory / archive_names.archive_name(tenant, started)).resolve()
        partial = path.with_name(path.name + ".partial")
        header = Header(
            created_at=format_iso(started),
            scope="tenant" if tenant is not None else "every_tenant",
            tenant=tenant,
            snapshot="scratch_replica",
        )
        encoder = ArchiveEncoder(header)
        log.info("backup started", tenant=tenant, path=str(path))
        raw = await asyncio.to_thread(open_private, partial)
        out = gzip.GzipFile(filename=partial.name, mode="wb", compresslevel=6, fileobj=raw)
        try:
            await asyncio.to_thread(out.write, encoder.header_line())
            async with self._graph.snapshot() as snapshot:
                log.info("backup snapshot ready", tenant=tenant, seconds=round(time.perf_counter() - began, 3))
                ranges = await snapshot.id_ranges(tenant)
                windows = [
                    (start, min(start + self._page_size, stop))
                    for low, stop in ranges
                    for start in range(low, stop, self._page_size)
                ]
                of_ids = sum(stop - low for low, stop in ranges)
                nodes = edges = 0
                for start, stop in windows:
                    page = await snapshot.nodes(tenant, start, stop)
                    if page:
                        await asyncio.to_thread(out.write, b"".join(encoder.node_line(n) for n in page))
                        nodes += len(page)
                        log.info("backup progress", tenant=tenant, nodes=nodes, of_ids=of_ids)
                for start, stop in windows:
                    edge_page = await snapshot.edges(tenant, start, stop)
                    if edge_page:
                        await asyncio.to_thread(out.write, b"".join(encoder.edge_line(e) for e in edge_page))
                        edges += len(edge_page)
                        log.info("backup progress", tenant=tenant, nodes=nodes, edges=edges)
            await asyncio.to_thread(out.write, encoder.manifest_line(self._key))
            await asyncio.to_thread(out.close)
            await asyncio.to_thread(raw.close)
            await asyncio.to_thread(_fsync_file, partial)
            await asyncio.to_thread(os.replace, partial, path)
            await asyncio.to_thread(fsync_dir, directory)
        except BaseException:
            await asyncio.to_thread(out.close)
            await asyncio.to_thread(raw.close)
            await asyncio.to_thread(partial.unlink, missing_ok=True)
            raise
        manifest = encoder.manifest()
        await asyncio.to_thread(self.files.save_manifest, path, header, manifest)
        if self._keep:
            await asyncio.to_thread(self.files.prune, self._keep)
        info = await asyncio.to_thread(self.files.info, path.name)
        log.info(
            "backup written",
            tenant=tenant,
            path=str(path),
            nodes=manifest.node_count,
            edges=manifest.edge_count,
            size_bytes=info.size_bytes,
            seconds=round(time.perf_counter() - began, 3),
        )
        return BackupResult(
            path=path,
            memories=manifest.memories,
            relations=manifest.edge_count,
            entities=manifest.nodes.get("Entity", 0),
            patterns=manifest.nodes.get("Pattern", 0),
            info=info,
        )


def _fsync_file(path: Path) -> None:
    with path.open("rb") as stream:
        os.fsync(stream.fileno())


class BackupScheduler(BackgroundLoop):
    """A backup of every tenant every BACKUP_INTERVAL_SECONDS (0: off). A
    lease in the graph lets one consolidate replica take each run."""

    _failed = "scheduled backup failed"
    #: The lease's task and tenant names.
    LEASE = ("backup", "*")

    def __init__(
        self,
        writer: BackupWriter,
        store: LeaseAcquirer,
        *,
        interval_seconds: float,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._writer = writer
        self._store = store
        self._interval = interval_seconds
        self._clock = clock
        self._owner = f"backup-{uuid.uuid4().hex[:12]}"

    async def _pass(self) -> None:
        now_us = to_micros(self._clock())
        # The lease outlives the run by the interval: a replica that starts its
        # pass a moment later finds it held and leaves the run to this one.
        ttl_us = int(self._interval * 1_000_000)
        if not await self._store.acquire_lease(*self.LEASE, self._owner, now_us=now_us, ttl_us=ttl_us):
            return
        await self._writer.create(None)
