"""The tenant's memory limit, held across the write that could take its last place."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from services.core.domain.errors import ResourceExhausted


class QuotaLocks:
    """One lock per tenant (gone once no write holds it) around the count
    and the write, so two writes in this process cannot both take the last place."""

    def __init__(self, count_memories: Callable[[str], Awaitable[int]]):
        self._count = count_memories
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @asynccontextmanager
    async def hold(self, tenant: str, memory_limit: int | None, adding: int) -> AsyncIterator[None]:
        """Count the tenant's memories and refuse the write when `adding` more
        would exceed its limit (MEMORY_LIMIT_EXCEEDED), holding the tenant's
        lock until the write is done. Unlimited tenants skip the count."""
        if memory_limit is None:
            yield
            return
        lock = self._locks.get(tenant)
        if lock is None:
            lock = self._locks[tenant] = asyncio.Lock()
        async with lock:
            stored = await self._count(tenant)
            if stored + adding > memory_limit:
                raise ResourceExhausted(
                    "MEMORY_LIMIT_EXCEEDED",
                    f"memory limit of {memory_limit} reached: {stored} stored, {adding} more would exceed it;"
                    " nothing was written",
                    limit=memory_limit,
                    stored=stored,
                    requested=adding,
                )
            yield
