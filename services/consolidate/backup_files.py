"""The backups directory (MEMGRID_DATA_DIR/backups/): archives, the manifest
file beside each, uploads waiting for a restore, and retention.

Durability: a file is written to a .partial file, fsync'd, renamed and the
directory fsync'd, so a file under its final name is whole; a small
`<name>.manifest.json` beside an archive (written the same way) lets GET
/backups list archives without reading them. Every file is created 0600
(the directories 0700): an archive holds every tenant's memories.
Retention keeps BACKUP_KEEP archives per tenant.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from services.core.background import BackgroundLoop
from services.core.domain import archive_names
from services.core.domain.archive import ArchiveEncoder, ArchiveError, Header, Manifest
from services.core.domain.archive_decoder import check_header
from services.core.domain.errors import FailedPrecondition, InvalidArgument

log = structlog.get_logger()

#: What the manifest file beside an archive is called.
MANIFEST_SUFFIX = ".manifest.json"

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


def fsync_dir(directory: Path) -> None:
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


def write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with open_private(partial) as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    fsync_dir(path.parent)


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
        write_atomically(path.with_name(path.name + MANIFEST_SUFFIX), json.dumps(body, indent=1).encode())

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
