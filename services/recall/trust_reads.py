"""The review queue and the tombstones, as the tenant's reviewers and admins list them."""

from __future__ import annotations

from dataclasses import dataclass

from services.core.domain.errors import InvalidArgument
from services.core.domain.recall_request import clamp_limit
from services.core.ports.trust import ReviewReads


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing: memories (the queue) or tombstones."""

    items: list
    has_more: bool
    limit: int
    offset: int


class TrustReads:
    """GET /review and GET /admin/tombstones, paged (REVIEW_PAGE_DEFAULT, REVIEW_PAGE_MAX)."""

    def __init__(self, store: ReviewReads, *, page_default: int, page_max: int):
        self._store = store
        self._default = page_default
        self._max = page_max

    def _bounds(self, limit: int, offset: int) -> tuple[int, int]:
        if offset < 0:
            raise InvalidArgument("INVALID_ARGUMENT", "offset must be 0 or more", field="offset")
        return clamp_limit(limit, self._default, self._max), offset

    async def review_queue(self, tenant: str, *, limit: int, offset: int) -> Page:
        """The memories waiting for review, oldest first; each names the rule that caught it."""
        limit, offset = self._bounds(limit, offset)
        found = await self._store.review_queue(tenant, limit + 1, offset)
        return Page(found[:limit], len(found) > limit, limit, offset)

    async def tombstones(self, tenant: str, *, limit: int, offset: int) -> Page:
        """The tenant's tombstones, newest first."""
        limit, offset = self._bounds(limit, offset)
        found = await self._store.list_tombstones(tenant, limit + 1, offset)
        return Page(found[:limit], len(found) > limit, limit, offset)
