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
Every file is created 0600 (the directories 0700): an archive holds every
tenant's memories. Retention keeps BACKUP_KEEP archives per tenant.

An archive's last line is signed (HMAC-SHA256 under BACKUP_SIGNING_KEY,
archive.sign), so a restore tells memgrid's own archives from hand-made ones.
Reading one is bounded: a line longer than RESTORE_MAX_LINE_BYTES, or more
unpacked bytes than RESTORE_MAX_UNPACKED_BYTES (or than the manifest file
declares), is refused after reading at most that much.
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
from typing import Any, BinaryIO

import structlog

from services.consolidate.gzip_lines import GzipLines
from services.core.background import BackgroundLoop
from services.core.domain import archive_names
from services.core.domain.archive import ArchiveEncoder, ArchiveError, Header, Manifest
from services.core.domain.archive_decoder import ArchiveDecoder, check_header
from services.core.domain.errors import FailedPrecondition, InvalidArgument
from services.core.domain.times import format_iso, to_micros
from services.core.ports.archive import GraphBackup
from services.core.ports.leases import LeaseAcquirer

log = structlog.get_logger()

#: What the manifest file beside an archive is called.
MANIFEST_SUFFIX = ".manifest.json"
#: Lines decoded per hop to a worker thread while an archive is read ...
_READ_BATCH = 1000
#: ... and at most this many unpacked bytes (a batch of long lines stays bounded).
_READ_BATCH_BYTES = 8 << 20
#: Files and directories the backups write: the owner's alone.
FILE_MODE = 0o600
DIR_MODE = 0o700


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


def make_dir(directory: Path) -> None:
    """The directory (and its parents), the owner's alone when this creates it."""
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> Any:
    """`path` opened for binary writing, created 0600 whatever the umask (an existing file is made 0600 too)."""
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return os.fdopen(fd, "ab" if flags & os.O_APPEND else "wb")


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with open_private(partial) as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    _fsync_dir(path.parent)


class BackupFiles:
    """The backups directory: archives, their manifest files, uploads."""

    def __init__(self, directory: Path, *, max_upload_bytes: int | None = None):
        self.directory = directory
        self.uploads = directory / "uploads"
        self._max_upload = max_upload_bytes
        #: Uploads a restore is reading: never swept, however long it takes.
        self.in_use: set[str] = set()

    def path_of(self, name: str) -> Path:
        """The path of a listed archive; NotFound when there is none by that name."""
        path = self.directory / archive_names.check_name(name)
        if not path.is_file():
            raise archive_names.missing_backup(name)
        return path

    def upload_path(self, upload: str) -> Path:
        path = self.uploads / archive_names.check_name(upload)
        if not path.is_file():
            raise archive_names.missing_backup(upload)
        return path

    def info(self, name: str) -> BackupInfo:
        path = self.path_of(name)
        header = manifest = None
        side = path.with_name(name + MANIFEST_SUFFIX)
        try:
            data = json.loads(side.read_text(encoding="utf-8"))
            header = check_header(data["header"])
            raw = data["manifest"]
            manifest = Manifest(
                raw["nodes"], raw["edges"], raw["tenants"], raw["lines"], raw["sha256"], int(raw.get("bytes") or 0)
            )
        except (OSError, ValueError, KeyError, TypeError, ArchiveError):
            pass  # an archive put there by hand: listed by name and size only
        return BackupInfo(name, path, path.stat().st_size, header, manifest)

    def names(self) -> list[str]:
        """Every archive's name, newest first."""
        if not self.directory.is_dir():
            return []
        names = [p.name for p in self.directory.iterdir() if p.is_file() and archive_names.name_group(p.name)]
        return sorted(names, key=lambda n: (archive_names.name_time(n), n), reverse=True)

    def listing(self) -> list[BackupInfo]:
        return [self.info(name) for name in self.names()]

    def prune(self, keep: int) -> list[str]:
        """Delete all but the `keep` newest archives of each tenant (and of every tenant's)."""
        doomed = archive_names.to_prune(self.names(), keep)
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
        make_dir(self.uploads)
        if not upload:
            upload = archive_names.archive_name("upload", at).replace("upload-", f"upload{uuid.uuid4().hex[:8]}-", 1)
        partial = self.uploads / (archive_names.check_name(upload) + ".partial")
        if (self.uploads / upload).exists():  # complete: never rewritten under a restore reading it
            raise FailedPrecondition("UPLOAD_COMPLETE", f"the upload {upload!r} is complete already", field="upload")
        size = partial.stat().st_size if partial.exists() else 0
        if offset != size:
            raise FailedPrecondition(
                "UPLOAD_OFFSET", f"the chunk starts at byte {offset}, the upload holds {size}", field="offset"
            )
        if self._max_upload is not None and size + len(data) > self._max_upload:
            partial.unlink(missing_ok=True)
            raise InvalidArgument(
                "UPLOAD_TOO_LARGE",
                f"the archive is larger than RESTORE_MAX_UPLOAD_BYTES ({self._max_upload} bytes)",
                field="archive",
                limit=self._max_upload,
            )
        with open_private(partial, os.O_WRONLY | os.O_CREAT | os.O_APPEND) as out:
            out.write(data)
            if complete:
                out.flush()
                os.fsync(out.fileno())
        if complete:
            os.replace(partial, self.uploads / upload)
        return upload, size + len(data)

    def sweep_uploads(self, max_age_seconds: float, *, now: float | None = None) -> list[str]:
        """Delete uploads (parts, or whole ones never restored) untouched for `max_age_seconds`: an
        upload whose client went away would otherwise stay on disk for good. Their names."""
        if not self.uploads.is_dir():
            return []
        cutoff = (time.time() if now is None else now) - max_age_seconds
        swept = []
        for path in self.uploads.iterdir():
            if path.name in self.in_use:
                continue
            try:
                if path.is_file() and path.stat().st_mtime < cutoff:
                    path.unlink()
                    swept.append(path.name)
            except FileNotFoundError:
                continue  # restored (and deleted) meanwhile
        if swept:
            log.info("abandoned uploads swept", removed=sorted(swept), max_age_seconds=max_age_seconds)
        return sorted(swept)


class UploadSweeper(BackgroundLoop):
    """Sweeps abandoned uploads at start-up and every RESTORE_UPLOAD_SWEEP_SECONDS (0: at start-up only)."""

    _failed = "upload sweep failed"

    def __init__(self, files: BackupFiles, *, max_age_seconds: float, interval_seconds: float):
        self._files = files
        self._max_age = max_age_seconds
        self._interval = interval_seconds

    def start(self) -> None:
        try:
            self._files.sweep_uploads(self._max_age)  # a directory listing: what a crash or a lost client left
        except OSError as exc:
            log.warning(self._failed, error=str(exc))
        super().start()

    async def _pass(self) -> None:
        await asyncio.to_thread(self._files.sweep_uploads, self._max_age)


#: RESTORE_MAX_LINE_BYTES and RESTORE_MAX_UNPACKED_BYTES's defaults (services/core/settings/backup.py).
MAX_LINE_BYTES = 16 << 20
MAX_UNPACKED_BYTES = 16 << 30


class _BoundedLines:
    """Lines of an unpacked stream, each at most `max_line` bytes, at most `max_total` in all:
    past either bound the archive is refused, having read no more than the bound."""

    def __init__(self, stream: Any, max_line: int, max_total: int, total_setting: str):
        self._stream = stream
        self._max_line = max_line
        self._max_total = max_total
        self._total_setting = total_setting
        self.total = 0
        self.lines = 0

    def read(self, count: int, max_bytes: int) -> list[bytes]:
        lines: list[bytes] = []
        size = 0
        while len(lines) < count and size < max_bytes:
            line = self._stream.readline(self._max_line + 1)
            if not line:
                break
            self.lines += 1
            if len(line) > self._max_line:
                raise ArchiveError(
                    "ARCHIVE_LINE_TOO_LONG",
                    f"the archive is refused: line {self.lines} is longer than RESTORE_MAX_LINE_BYTES"
                    f" ({self._max_line} bytes)",
                    line=self.lines,
                    limit=self._max_line,
                )
            self.total += len(line)
            if self.total > self._max_total:
                raise ArchiveError(
                    "ARCHIVE_TOO_LARGE",
                    f"the archive is refused: it unpacks to more than {self._total_setting} ({self._max_total} bytes)"
                    f" by line {self.lines}",
                    line=self.lines,
                    limit=self._max_total,
                )
            lines.append(line)
            size += len(line)
        return lines


async def read_archive(
    path: Path | BinaryIO,
    decoder: ArchiveDecoder,
    batch: int = _READ_BATCH,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_unpacked_bytes: int = MAX_UNPACKED_BYTES,
    declared_bytes: int = 0,
) -> AsyncIterator[list[Any]]:
    """The archive's records, a batch at a time, each line checked by `decoder`
    (a damaged gzip stream is refused as ARCHIVE_CORRUPT, a cut one as
    ARCHIVE_TRUNCATED); decoder.finish() after the last batch checks the manifest.

    Bounded: a line longer than `max_line_bytes`, or more unpacked bytes than
    `max_unpacked_bytes` (or than `declared_bytes`, what the manifest file beside
    the archive declares, with the manifest line itself), is refused having
    read at most that much."""
    limit, setting = max_unpacked_bytes, "RESTORE_MAX_UNPACKED_BYTES"
    if declared_bytes and declared_bytes + max_line_bytes < limit:
        limit, setting = declared_bytes + max_line_bytes, "what its manifest declares"
    raw = await asyncio.to_thread(path.open, "rb") if isinstance(path, Path) else path
    reader = _BoundedLines(GzipLines(raw), max_line_bytes, limit, setting)
    try:
        while True:
            try:
                lines = await asyncio.to_thread(reader.read, batch, _READ_BATCH_BYTES)
            except EOFError:
                raise ArchiveError(
                    "ARCHIVE_TRUNCATED", "the archive is truncated: its gzip stream ends early"
                ) from None
            except (zlib.error, OSError) as exc:
                raise ArchiveError("ARCHIVE_CORRUPT", f"the archive is not a readable gzip file: {exc}") from None
            if not lines:
                break
            yield [decoder.feed(line) for line in lines]
        decoder.finish()
    finally:
        if raw is not path:
            await asyncio.to_thread(raw.close)


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
            await asyncio.to_thread(_fsync_dir, directory)
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
