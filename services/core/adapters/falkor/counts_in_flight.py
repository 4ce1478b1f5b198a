"""Counts being taken from the graph right now, so that a second request for
the same count waits for the first instead of taking it again.

The keyword arm asks for a query's document frequencies twice at once: BM25
counts them (to df_count_cap) while the search counts them (to the
document-frequency bound, then, when every word is over it, to df_count_cap
again for the rarest-word fallback). At a million memories a common word's
count is the arm's dearest read, and two requests that miss the cache
together both paid for it (docs/performance.md, issue 27)."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager


class CountAbandoned(Exception):
    """The count a request waited for was not finished (its query failed or was cancelled)."""


class CountsInFlight:
    """Keys being counted, each with the cap it is counted to (None: exactly)."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, tuple[int | None, asyncio.Future[int]]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def covering(self, key: Hashable, cap: int | None) -> asyncio.Future[int] | None:
        """The count under way for `key` that answers a request counting to
        `cap` (None: exactly), as a cached one would; None when there is none."""
        pending = self._pending.get(key)
        if pending is None:
            return None
        counting_to, future = pending
        if counting_to is None or (cap is not None and counting_to >= cap):
            return future
        return None

    @contextmanager
    def taking(self, keys: Iterable[Hashable], cap: int | None) -> Iterator[dict[Hashable, asyncio.Future[int]]]:
        """Announce counts of `keys` to `cap`; the caller sets each future's
        result. Whatever is unset on leaving (an error, a cancellation) is
        failed with CountAbandoned, so a waiter counts for itself."""
        loop = asyncio.get_running_loop()
        futures: dict[Hashable, asyncio.Future[int]] = {key: loop.create_future() for key in keys}
        for key, future in futures.items():
            self._pending[key] = (cap, future)
        try:
            yield futures
        finally:
            for key, future in futures.items():
                if not future.done():
                    future.set_exception(CountAbandoned(str(key)))
                    future.exception()  # retrieved: no waiter is owed a traceback in the log
                if self._pending.get(key, (None, None))[1] is future:
                    del self._pending[key]


async def awaited(future: asyncio.Future[int]) -> int | None:
    """Another request's count, or None when it was abandoned. A cancelled
    waiter does not cancel the count it waited for (shield)."""
    try:
        return await asyncio.shield(future)
    except CountAbandoned:
        return None
