"""Archives' names and their retention, pure: <tenant>-<UTC time>.jsonl.gz,
sortable by time within a tenant, and which of them retention removes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from services.core.domain.archive import EVERY_TENANT, SUFFIX
from services.core.domain.errors import InvalidArgument, NotFound

_ARCHIVE_NAME = re.compile(r"^(?P<group>[A-Za-z0-9_@-]{1,200})-(?P<time>\d{8}T\d{12}Z)\.jsonl\.gz$")


def safe_tenant(tenant: str) -> str:
    """The tenant reduced to characters safe in a file name."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in tenant) or "_"


def archive_name(tenant: str | None, at: datetime) -> str:
    """<tenant>-<UTC time>.jsonl.gz (`@all-` for every tenant's): sortable by time within a tenant."""
    group = EVERY_TENANT if tenant is None else safe_tenant(tenant)
    return f"{group}-{at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}{SUFFIX}"


def check_name(name: str) -> str:
    """A name as archive_name makes them (no path, no other file): refused otherwise."""
    if not isinstance(name, str) or not _ARCHIVE_NAME.match(name):
        raise InvalidArgument(
            "BACKUP_NAME_INVALID",
            f"'name' must be a backup's name as GET /backups lists it, not {name!r}",
            field="name",
        )
    return name


def name_group(name: str) -> str:
    """The tenant part of a name (what retention counts within)."""
    match = _ARCHIVE_NAME.match(name)
    return match.group("group") if match else ""


def name_time(name: str) -> str:
    match = _ARCHIVE_NAME.match(name)
    return match.group("time") if match else ""


def to_prune(names: Iterable[str], keep: int) -> list[str]:
    """The names retention removes: all but the `keep` newest of each tenant's
    (and of every-tenant archives); keep 0 removes none."""
    if keep <= 0:
        return []
    groups: dict[str, list[str]] = {}
    for name in names:
        if _ARCHIVE_NAME.match(name):
            groups.setdefault(name_group(name), []).append(name)
    doomed = []
    for members in groups.values():
        members.sort(key=name_time, reverse=True)
        doomed.extend(members[keep:])
    return sorted(doomed)


def missing_backup(name: str) -> NotFound:
    return NotFound("BACKUP_NOT_FOUND", f"no backup named {name!r} (GET /backups lists them)", field="name")
