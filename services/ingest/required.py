"""What a use case needs before it writes: the memory it changes, and the trust store."""

from __future__ import annotations

from services.core.domain.errors import FailedPrecondition, NotFound
from services.core.domain.model import Memory
from services.core.ports import MemoryLookup, TrustStore


async def require_memory(lookup: MemoryLookup, tenant: str, memory_id: str, field_name: str = "id") -> Memory:
    """The stored memory, or MEMORY_NOT_FOUND naming `field_name`."""
    memory = await lookup.get_memory(tenant, memory_id)
    if memory is None:
        raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field=field_name, id=memory_id)
    return memory


def require_trust(trust: TrustStore | None) -> TrustStore:
    """The trust store; an ingest service built without one (unit tests of
    other rules) refuses what needs it (FAILED_PRECONDITION)."""
    if trust is None:
        raise FailedPrecondition("TRUST_STORE_MISSING", "this ingest service has no trust store")
    return trust
