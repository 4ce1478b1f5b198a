"""The graph's memories page by page for a projection into the vector index
(a rebuild, a convergence repair): the next page is read from the graph
while the caller puts this one into the index, so the two wait on each
other's I/O no more than once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from services.core.domain.model import Memory
from services.core.ports.vector import IndexSource


async def pages_ahead(source: IndexSource, batch_size: int, tenant: str | None) -> AsyncGenerator[list[Memory], None]:
    """The tenant's memories with embeddings (None: every tenant's), `batch_size` a
    page, each page's successor already being read when it is yielded. Close the
    generator (contextlib.aclosing) when stopping early: the read ahead is cancelled."""
    ahead = asyncio.create_task(source.scan_memories(-1, batch_size, tenant))
    try:
        while True:
            cursor, page = await ahead
            if not page:
                return
            ahead = asyncio.create_task(source.scan_memories(cursor, batch_size, tenant))
            yield page
    finally:
        ahead.cancel()
