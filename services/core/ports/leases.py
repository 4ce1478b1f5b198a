"""Task leases in the graph: one process at a time runs a (task, tenant)."""

from __future__ import annotations

from typing import Any, Protocol

from services.core.domain.leases import LeaseInfo


class LeaseAcquirer(Protocol):
    """Taking a lease (the backup schedule's whole need: a run per interval, one replica)."""

    async def acquire_lease(self, task: str, tenant: str, owner: str, *, now_us: int, ttl_us: int) -> bool:
        """Take the (task, tenant) lease when it is free or expired, or extend
        it when `owner` holds it, in one query; whether `owner` holds it now."""


class TaskLeases(LeaseAcquirer, Protocol):
    """A lease held for a task's run: renewed as it goes, released at its end."""

    async def renew_lease(
        self, task: str, tenant: str, owner: str, *, now_us: int, ttl_us: int, progress: dict[str, Any] | None = None
    ) -> bool:
        """Extend the lease `owner` holds (and record progress); False when it lost it."""

    async def release_lease(self, task: str, tenant: str, owner: str) -> bool:
        """Drop the lease if `owner` holds it; whether it did."""


class LeaseListing(Protocol):
    """The leases held now, as a status report shows them."""

    async def leases(self, tenant: str, *, now_us: int) -> list[LeaseInfo]:
        """The tenant's unexpired leases (the tasks running now)."""
