"""Backups and restores, run by consolidate; the gateway bounds uploads and chunks with them."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr

from services.core.settings.base import Group


class BackupSettings(Group):
    """Backups: archives (docs/backup.md) and restores, run by consolidate."""

    # Writing archives.
    #
    # Node ids per graph read while a backup is written (a window of ids, so a
    # read holds at most this many nodes and the edges leaving them).
    backup_page_size: int = Field(default=2000, ge=1)
    # A backup of every tenant every this many seconds (0: none on a schedule;
    # POST /backup still writes one on demand). One replica of consolidate
    # takes each run (a lease), so replicas do not write one each.
    backup_interval_seconds: float = Field(default=0.0, ge=0)
    # Archives kept per tenant (and of every tenant), newest first; older
    # ones are deleted after each backup. 0 keeps every archive.
    backup_keep: int = Field(default=7, ge=0)
    # A backup's point in time is a scratch replica of FalkorDB (docs/backup.md):
    # consolidate starts a redis-server of its own that syncs from FalkorDB,
    # cuts it loose and reads the archive from it. It may take this long to
    # sync (FalkorDB forks and streams its data, the scratch loads it); then
    # the backup is refused, BACKUP_SNAPSHOT_TIMEOUT.
    backup_snapshot_timeout_seconds: float = Field(default=600.0, gt=0)
    # Where the scratch replica keeps what it loads (as much disk as FalkorDB's
    # data, for the backup's length). Empty: MEMGRID_DATA_DIR/backups/.scratch.
    backup_scratch_dir: str = ""
    restore_page_size: int = Field(default=500, ge=1)  # records per graph write while a restore runs
    # The largest archive POST /restore takes in its body (MAX_REQUEST_BYTES
    # is sized for JSON requests; 100k memories with 384-dimension vectors
    # make an archive of a few hundred MB).
    restore_max_upload_bytes: int = Field(default=8 * 1024**3, ge=1)
    # An archive is untrusted input and read bounded (docs/backup.md): a line longer than this is refused
    # having read no more of it (a memory's line is a few KB; its metadata is capped at 16 KB) ...
    restore_max_line_bytes: int = Field(default=16 * 1024**2, ge=1024)
    # ... and so is an archive that unpacks to more than this, or than its manifest file declares.
    restore_max_unpacked_bytes: int = Field(default=16 * 1024**3, ge=1024)
    # An upload (POST /restore's body, kept under backups/uploads/ until its restore ends) untouched this
    # long is abandoned and deleted ...
    restore_upload_max_age_seconds: float = Field(default=3600.0, gt=0)
    # ... by a sweep consolidate runs at start-up and every this many seconds (0: at start-up only).
    restore_upload_sweep_seconds: float = Field(default=600.0, ge=0)
    # Archives are signed (HMAC-SHA256) with this key, so a restore tells this deployment's archives from
    # hand-made ones; an unsigned or foreign-signed one needs an operator and allow_unsigned. Kept like
    # SERVICE_CLAIM_KEY: a Secret in a pod; unset, the file backup_signing_key in MEMGRID_DATA_DIR,
    # generated on first start (a restore on another host needs the same key).
    backup_signing_key: SecretStr | None = Field(default=None, min_length=32)  # at least 32 characters
    # Also accepted, never signed with: rotating the key keeps older archives restorable (comma-separated).
    backup_signing_previous_keys: SecretStr | None = None
    # Bytes per chunk when an archive travels over gRPC (download, upload):
    # well under gRPC's 4 MB message limit.
    backup_chunk_bytes: int = Field(default=1 << 20, ge=1024, le=3 << 20)

    def backups_dir(self, data_dir: Path) -> Path:
        """Where consolidate writes archives: MEMGRID_DATA_DIR/backups (`data_dir`: ProcessSettings')."""
        return data_dir / "backups"

    def backup_scratch_root(self, data_dir: Path) -> Path:
        """Where a backup's scratch replica keeps its data: BACKUP_SCRATCH_DIR, else backups/.scratch."""
        return Path(self.backup_scratch_dir) if self.backup_scratch_dir else self.backups_dir(data_dir) / ".scratch"
