"""The audit log (services/core/domain/audit.py): entries the writes appended
in their own queries, read in sequence order; and the sealer's head per tenant
and its writes."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.audit import AuditEntry, Seal


class AuditEntries(Protocol):
    """A tenant's entries in sequence order (what both the reads and the sealer walk)."""

    async def list_entries(
        self,
        tenant: str,
        *,
        after_seq: int,
        limit: int,
        since_us: int | None = None,
        until_us: int | None = None,
        kind: str = "",
        memory_id: str = "",
        within: int | None = None,
    ) -> list[AuditEntry]:
        """The tenant's entries after `after_seq`, in sequence order, filtered;
        with `within`, only those numbered up to `after_seq + within`."""


class AuditReader(AuditEntries, Protocol):
    """Recall's reads: a memory's history, listings and the verify walk."""

    async def history(self, tenant: str, memory_id: str, limit: int) -> list[AuditEntry]:
        """One memory's entries, oldest first."""

    async def last_seq(self, tenant: str) -> int:
        """The sequence number of the tenant's latest entry (0: none)."""


class AuditSealing(AuditEntries, Protocol):
    """The sealer's reads of the heads to seal, and its writes."""

    async def unsealed_heads(self, limit: int) -> list[tuple[str, int, str]]:
        """(tenant, last sealed sequence, its chain hash) of tenants with entries to seal."""

    async def seal(self, tenant: str, seals: list[Seal], *, expected_sealed_seq: int) -> bool:
        """Write the seals if the tenant's sealed head is still `expected_sealed_seq`."""
