"""The rules a restore follows, pure: which stored node an archived one is,
which of two versions of a record is newer, whose records a caller may
restore, and a tenant that is not empty.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from services.core.domain.archive import ArchiveNode
from services.core.domain.errors import AlreadyExists, PermissionDenied

#: The property naming a node, in order of preference; a node with none of
#: them is matched on its label and tenant only when the archive holds one
#: such node for the tenant (a per-tenant singleton, such as a counter).
IDENTITY_PROPERTIES = ("id", "key", "tag", "event_id", "hash")


def identity(node: ArchiveNode) -> tuple[str, Any] | None:
    """The property that names the node (and its value), or None for a node with none."""
    for name in IDENTITY_PROPERTIES:
        value = node.properties.get(name)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return name, value
    return None


#: What says which of two versions of a record is newer, in order (`seq`: a counter's).
VERSION_PROPERTIES = ("version", "updated_at", "seq")


def _version_key(properties: dict[str, Any]) -> tuple:
    values = (properties.get(name) for name in VERSION_PROPERTIES)
    return tuple(v if isinstance(v, int | float) and not isinstance(v, bool) else -1 for v in values)


def is_newer(archived: dict[str, Any], existing: dict[str, Any]) -> bool:
    """Whether the archive's record is newer than the stored one (its version,
    then its updated_at, then its seq is higher): only then does a merge
    overwrite it. A tie, or neither saying, keeps what is stored."""
    return _version_key(archived) > _version_key(existing)


def check_tenants(tenants: Iterable[str], caller: str, every_tenant: bool) -> None:
    """A caller restores only its own tenant's records unless it may act for
    every tenant (an admin), which restores each record into its own tenant."""
    if every_tenant:
        return
    foreign = sorted(t for t in set(tenants) if t != caller)
    if foreign:
        raise PermissionDenied(
            "RESTORE_OTHER_TENANT",
            f"the archive holds records of tenant(s) {', '.join(repr(t) for t in foreign[:5])}, not of the caller's"
            f" tenant {caller!r}: only an operator restores another tenant's records",
            field="archive",
        )


def tenant_not_empty(tenant: str, memories: int) -> AlreadyExists:
    """Restoring into a tenant that holds memories, without merge (409: the caller may ask merge)."""
    return AlreadyExists(
        "TENANT_NOT_EMPTY",
        f"tenant {tenant!r} already holds {memories} memories: restore into an empty tenant, or ask merge=true"
        " (which keeps a stored record that is newer than the archive's)",
        field="merge",
        tenant=tenant,
        memories=memories,
    )
