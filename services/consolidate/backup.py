"""Backups (POST /backup, on a schedule): a versioned archive of one tenant's
graph, or of every tenant's, at one point in time, written under
MEMGRID_DATA_DIR/backups/ (the format: services/core/domain/archive.py and
docs/backup.md).

Consistency: the export reads a snapshot (GraphBackup.snapshot, on FalkorDB
a scratch replica cut loose from the store), so the archive holds every
write acknowledged before the snapshot and none after, whatever runs
meanwhile. Durability: the archive is written
to a .partial file, fsync'd, renamed and the directory fsync'd, so a file
under its final name is whole; a small `<name>.manifest.json` beside it
(written the same way) lets GET /backups list archives without reading them.
Retention keeps BACKUP_KEEP archives per tenant.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from services.core.background import BackgroundLoop
from services.core.domain import archive
from services.core.domain.archive import ArchiveDecoder, ArchiveEncoder, ArchiveError, Header, Manifest
from services.core.domain.errors import FailedPrecondition
from services.core.domain.times import format_iso, to_micros
from services.core.ports import ConsolidationStore, GraphBackup

log = structlog.get_logger()

#: What the manifest file beside an archive is called.
MANIFEST_SUFFIX = ".manifest.json"
#: Lines decoded per hop to a worker thread while an archive is read.
_READ_BATCH = 1000


@dataclass(frozen=True, slots=True)
class BackupInfo:
    """An archive as its manifest describes it (manifest None: an archive without its manifest file)."""

    name: str
    path: Path
    size_bytes: int
    header: Header | None
    manifest: Manifest | None


@dataclass(frozen=True, slots=True)
class BackupResult:
    path: Path
    memories: int
    relations: int
    entities: int
    patterns: int
    info: BackupInfo


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with partial.open("wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    _fsync_dir(path.parent)


class BackupFiles:
    """The backups directory: archives, their manifest files, uploads."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.uploads = directory / "uploads"

    def path_of(self, name: str) -> Path:
        """The path of a listed archive; NotFound when there is none by that name."""
        path = self.directory / archive.check_name(name)
        if not path.is_file():
            raise archive.missing_backup(name)
        return path

    def upload_path(self, upload: str) -> Path:
        path = self.uploads / archive.check_name(upload)
        if not path.is_file():
            raise archive.missing_backup(upload)
        return path

    def info(self, name: str) -> BackupInfo:
        path = self.path_of(name)
        header = manifest = None
        side = path.with_name(name + MANIFEST_SUFFIX)
        try:
            data = json.loads(side.read_text(encoding="utf-8"))
            header = archive.check_header(data["header"])
            raw = data["manifest"]
            manifest = Manifest(raw["nodes"], raw["edges"], raw["tenants"], raw["lines"], raw["sha256"])
        except (OSError, ValueError, KeyError, TypeError, ArchiveError):
            pass  # an archive put there by hand: listed by name and size only
        return BackupInfo(name, path, path.stat().st_size, header, manifest)

    def names(self) -> list[str]:
        """Every archive's name, newest first."""
        if not self.directory.is_dir():
            return []
        names = [p.name for p in self.directory.iterdir() if p.is_file() and archive.name_group(p.name)]
        return sorted(names, key=lambda n: (archive.name_time(n), n), reverse=True)

    def listing(self) -> list[BackupInfo]:
        return [self.info(name) for name in self.names()]

    def prune(self, keep: int) -> list[str]:
        """Delete all but the `keep` newest archives of each tenant (and of every tenant's)."""
        doomed = archive.to_prune(self.names(), keep)
        for name in doomed:
            (self.directory / name).unlink(missing_ok=True)
            (self.directory / (name + MANIFEST_SUFFIX)).unlink(missing_ok=True)
        if doomed:
            log.info("backups pruned", removed=doomed, keep=keep)
        return doomed

    def save_manifest(self, path: Path, header: Header, manifest: Manifest) -> None:
        header_dict = json.loads(ArchiveEncoder(header).header_line())
        body = {"header": header_dict, "manifest": manifest.as_dict(), "size_bytes": path.stat().st_size}
        _write_atomically(path.with_name(path.name + MANIFEST_SUFFIX), json.dumps(body, indent=1).encode())

    def append_upload(self, upload: str, offset: int, data: bytes, complete: bool, at: datetime) -> tuple[str, int]:
        """Add a chunk to an upload (a new one when `upload` is empty) at
        `offset`, the bytes so far; `complete` makes it usable (fsync'd,
        renamed from .partial). Its handle and size so far."""
        self.uploads.mkdir(parents=True, exist_ok=True)
        if not upload:
            upload = archive.archive_name("upload", at).replace("upload-", f"upload{uuid.uuid4().hex[:8]}-", 1)
        partial = self.uploads / (archive.check_name(upload) + ".partial")
        size = partial.stat().st_size if partial.exists() else 0
        if offset != size:
            raise FailedPrecondition(
                "UPLOAD_OFFSET", f"the chunk starts at byte {offset}, the upload holds {size}", field="offset"
            )
        with partial.open("ab") as out:
            out.write(data)
            if complete:
                out.flush()
                os.fsync(out.fileno())
        if complete:
            os.replace(partial, self.uploads / upload)
        return upload, size + len(data)


def _read_lines(stream: Any, count: int) -> list[bytes]:
    lines = []
    for _ in range(count):
        line = stream.readline()
        if not line:
            break
        lines.append(line)
    return lines


async def read_archive(path: Path, decoder: ArchiveDecoder, batch: int = _READ_BATCH) -> AsyncIterator[list[Any]]:
    """The archive's records, a batch at a time, each line checked by `decoder`
    (a damaged gzip stream is refused as ARCHIVE_CORRUPT, a cut one as
    ARCHIVE_TRUNCATED); decoder.finish() after the last batch checks the manifest."""
    stream = await asyncio.to_thread(gzip.open, path, "rb")
    try:
        while True:
            try:
                lines = await asyncio.to_thread(_read_lines, stream, batch)
            except EOFError:
                raise ArchiveError(
                    "ARCHIVE_TRUNCATED", "the archive is truncated: its gzip stream ends early"
                ) from None
            except (gzip.BadGzipFile, zlib.error, OSError) as exc:
                raise ArchiveError("ARCHIVE_CORRUPT", f"the archive is not a readable gzip file: {exc}") from None
            if not lines:
                break
            yield [decoder.feed(line) for line in lines]
        decoder.finish()
    finally:
        await asyncio.to_thread(stream.close)


async def read_chunks(path: Path, size: int) -> AsyncIterator[bytes]:
    """A file's bytes, `size` at a time (a download)."""
    stream = await asyncio.to_thread(path.open, "rb")
    try:
        while chunk := await asyncio.to_thread(stream.read, size):
            yield chunk
    finally:
        await asyncio.to_thread(stream.close)


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
    ):
        self._graph = graph
        self.files = files
        self._page_size = page_size
        self._keep = keep
        self._clock = clock

    async def create(self, tenant: str | None) -> BackupResult:
        """Write the tenant's graph (None: every tenant's) to a new archive; its path and counts."""
        started = self._clock()
        began = time.perf_counter()
        directory = self.files.directory
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
        path = (directory / archive.archive_name(tenant, started)).resolve()
        partial = path.with_name(path.name + ".partial")
        header = Header(
            created_at=format_iso(started),
            scope="tenant" if tenant is not None else "every_tenant",
            tenant=tenant,
            snapshot="scratch_replica",
        )
        encoder = ArchiveEncoder(header)
        log.info("backup started", tenant=tenant, path=str(path))
        out = await asyncio.to_thread(gzip.open, partial, "wb", 6)
        try:
            await asyncio.to_thread(out.write, encoder.header_line())
            async with self._graph.snapshot() as snapshot:
                log.info("backup snapshot ready", tenant=tenant, seconds=round(time.perf_counter() - began, 3))
                top = await snapshot.max_node_id()
                nodes = edges = 0
                for start in range(0, top + 1, self._page_size):
                    page = await snapshot.nodes(tenant, start, start + self._page_size)
                    if page:
                        await asyncio.to_thread(out.write, b"".join(encoder.node_line(n) for n in page))
                        nodes += len(page)
                        log.info("backup progress", tenant=tenant, nodes=nodes, of_ids=top + 1)
                for start in range(0, top + 1, self._page_size):
                    page = await snapshot.edges(tenant, start, start + self._page_size)
                    if page:
                        await asyncio.to_thread(out.write, b"".join(encoder.edge_line(e) for e in page))
                        edges += len(page)
                        log.info("backup progress", tenant=tenant, nodes=nodes, edges=edges)
            await asyncio.to_thread(out.write, encoder.manifest_line())
            await asyncio.to_thread(out.close)
            await asyncio.to_thread(_fsync_file, partial)
            await asyncio.to_thread(os.replace, partial, path)
            await asyncio.to_thread(_fsync_dir, directory)
        except BaseException:
            await asyncio.to_thread(out.close)
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
        store: ConsolidationStore,
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
