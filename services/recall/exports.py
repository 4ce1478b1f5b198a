"""Every memory of a tenant, a page at a time (GET /memories/export, the CLI's export)."""

from __future__ import annotations

from services.core.domain.errors import InvalidArgument
from services.core.domain.model import Memory
from services.core.domain.recall_request import clamp_limit
from services.core.ports.archive import GraphExport
from services.core.ports.graph import MemoryLookup

#: A page token is the last id of the page before; longer than any id is a bad token.
MAX_TOKEN_LENGTH = 256


class MemoryExports:
    """Pages in id order (an indexed key), so a page costs its own size and
    a client can resume after any page; a memory written after the export
    started appears if its id sorts after the page being read. No state
    pass: an export is the tenant's history, archived memories included."""

    def __init__(self, *, export: GraphExport, lookup: MemoryLookup, default_limit: int, max_limit: int):
        self._export = export
        self._lookup = lookup
        self._default_limit = default_limit
        self._max_limit = max_limit

    async def page(self, tenant: str, page_token: str, limit: int) -> tuple[list[Memory], str, int]:
        """A page of memories after `page_token` (empty: the first), the
        token of the next page (empty on the last) and the limit applied."""
        if len(page_token) > MAX_TOKEN_LENGTH:
            raise InvalidArgument("INVALID_PAGE_TOKEN", "page_token is not one an export gave", field="page_token")
        limit = clamp_limit(limit, self._default_limit, self._max_limit)
        ids = await self._export.memory_ids(tenant, page_token, limit + 1)
        page = ids[:limit]
        found = await self._lookup.get_memories(tenant, page) if page else {}
        # A memory deleted between the two reads is left out, not an error.
        memories = [found[i] for i in page if i in found]
        return memories, page[-1] if len(ids) > limit else "", limit
