"""pages_ahead: a projection's pages from the graph, the next one read while
the caller works on this one (the FalkorDB source itself: the rebuild and
convergence integration tests)."""

import asyncio
from contextlib import aclosing
from datetime import UTC, datetime

from services.recall.graph_pages import pages_ahead
from tests.factories import memory_at

AT = datetime(2026, 1, 1, tzinfo=UTC)


class PagedSource:
    """Memories 0..n-1 by cursor, recording each read as it starts and whether it was cancelled."""

    def __init__(self, n: int, *, hold_after: int | None = None):
        self.memories = [memory_at(str(i), AT, embedding=[1.0]) for i in range(n)]
        self.started: list[int] = []
        self.cancelled: list[int] = []
        self._hold_after = hold_after

    async def scan_memories(self, cursor: int, limit: int, tenant: str | None = None):
        self.started.append(cursor)
        try:
            if self._hold_after is not None and cursor >= self._hold_after:
                await asyncio.sleep(3600)  # a slow read, still going when the caller stops
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            self.cancelled.append(cursor)
            raise
        page = self.memories[cursor + 1 : cursor + 1 + limit]
        return (cursor + len(page), page)


async def test_every_page_in_order_and_the_next_read_started_before_this_one_is_used():
    source = PagedSource(5)
    seen, started_when_given = [], []
    async for page in pages_ahead(source, 2, "a"):
        await asyncio.sleep(0)  # the caller's own await: the read ahead runs meanwhile
        started_when_given.append(list(source.started))
        seen.append([m.id for m in page])
    assert seen == [["0", "1"], ["2", "3"], ["4"]]
    assert started_when_given[0] == [-1, 1]  # page 2's read began while page 1 was in hand
    assert source.started == [-1, 1, 3, 4]  # the last read finds the end


async def test_stopping_early_cancels_the_read_ahead():
    source = PagedSource(10, hold_after=1)
    pages = pages_ahead(source, 2, None)
    async with aclosing(pages):
        async for page in pages:
            assert [m.id for m in page] == ["0", "1"]
            await asyncio.sleep(0)
            break
    await asyncio.sleep(0)
    assert source.started == [-1, 1] and source.cancelled == [1]
