"""The backup key: what archives are signed with (archive.sign), kept like the
service plane's claim key (services/core/grpc/plane.py). BACKUP_SIGNING_KEY,
or a file generated on first start under MEMGRID_DATA_DIR (0600); the keys of
BACKUP_SIGNING_PREVIOUS_KEYS are accepted on restore, never signed with, so a
rotation leaves the archives already written restorable."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from services.core.key_files import load_or_create_key_file

if TYPE_CHECKING:
    from services.core.settings import BackupSettings

#: Where the generated key is kept, under MEMGRID_DATA_DIR.
BACKUP_KEY_FILE_NAME = "backup_signing_key"
#: A key shorter than this is refused (an HMAC key should carry >= 256 bits).
MIN_KEY_LENGTH = 32


def _checked(key: str, setting: str) -> bytes:
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"{setting} must be at least {MIN_KEY_LENGTH} characters")  # never the key itself
    return key.encode()


def load_or_create_key(data_dir: Path) -> bytes:
    """The key saved under the data dir, minted on first start (0600)."""
    path = data_dir / BACKUP_KEY_FILE_NAME
    return load_or_create_key_file(path, lambda saved: _checked(saved, str(path)))


def backup_keys(settings: BackupSettings, data_dir: Path) -> tuple[bytes, ...]:
    """The signing key first, then the previous ones (accepted on restore only); a generated key is kept
    under `data_dir`."""
    if settings.backup_signing_key is not None:
        current = _checked(settings.backup_signing_key.get_secret_value(), "BACKUP_SIGNING_KEY")
    else:
        current = load_or_create_key(data_dir)
    previous = settings.backup_signing_previous_keys
    older = [] if previous is None else [k.strip() for k in previous.get_secret_value().split(",") if k.strip()]
    return (current, *(_checked(k, "BACKUP_SIGNING_PREVIOUS_KEYS") for k in older))
