"""The audit log's sealer: hash-chains each tenant's new entries in sequence
order (services/core/domain/audit.py), as a background loop.

Writes give entries their sequence numbers in their own queries (Cypher
cannot hash); this loop seals them after. It is safe with more than one
replica: a seal is written only where the tenant's sealed head is still the
one this pass read, and the hashes are deterministic, so two sealers agree."""

from __future__ import annotations

import structlog

from services.core.background import BackgroundLoop
from services.core.domain.audit import GENESIS, seal
from services.core.ports.audit import AuditSealing

log = structlog.get_logger()

#: Tenants with entries to seal, looked up per pass.
_TENANTS_PER_PASS = 100


class AuditSealer(BackgroundLoop):
    """Seals every tenant's unsealed entries every `seal_seconds` (0: off)."""

    _failed = "audit sealing failed"

    def __init__(self, audit: AuditSealing, *, seal_seconds: float, batch: int):
        self._audit = audit
        self._interval = seal_seconds
        self._batch = batch

    async def _pass(self) -> None:
        await self.seal_all()

    async def seal_all(self) -> int:
        """Seal what is unsealed now, tenant by tenant; returns the entries sealed."""
        sealed = 0
        for tenant, head, chain in await self._audit.unsealed_heads(_TENANTS_PER_PASS):
            sealed += await self.seal_tenant(tenant, head, chain or GENESIS)
        return sealed

    async def _next(self, tenant: str, head: int):
        """The next batch after `head`: a bounded window of the sequence, or,
        past a gap as wide as a batch (entries removed), the next ones there are."""
        window = await self._audit.list_entries(tenant, after_seq=head, limit=self._batch, within=self._batch)
        return window or await self._audit.list_entries(tenant, after_seq=head, limit=self._batch)

    async def seal_tenant(self, tenant: str, head: int, chain: str) -> int:
        """Seal the tenant's entries after `head` (chain value `chain`), a batch at a time."""
        sealed = 0
        while entries := await self._next(tenant, head):
            if entries[0].seq != head + 1:
                log.warning("audit log gap before sealing", tenant=tenant, missing=head + 1)
            seals = seal(chain, entries)
            if not await self._audit.seal(tenant, seals, expected_sealed_seq=head):
                return sealed  # another sealer moved the head: it carries on
            sealed += len(seals)
            head, chain = seals[-1].seq, seals[-1].chain_hash
        return sealed
