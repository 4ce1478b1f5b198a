"""Keeps the document frequencies of the corpus's commonest words counted.

The keyword arm and BM25 count how many memories hold each query word, and
cache the count for a few minutes (RECALL_DF_CACHE_SECONDS). A word
held by thousands of memories is dear to count, and at 100k memories such a
count was the largest part of a slow query's time the first time a query
named the word. Every `interval` seconds (less than the cache keeps a count),
this counts again the commonest words of a sample of the corpus, in the
background, so no query waits for them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from services.core.background import BackgroundLoop

log = structlog.get_logger()

#: Between two recounting queries: at 100k memories a pass is about 0.5 s of
#: FalkorDB's time, 65 ms a query of 25 words; paced, a recall waits behind
#: one query's worth at most, not the whole pass.
CHUNK_PAUSE_SECONDS = 1.0


class FrequencyWarmer(BackgroundLoop):
    def __init__(self, warm: Callable[[], Awaitable[int]], interval_seconds: float, first_after_seconds: float = 5.0):
        self._warm = warm
        self._interval = interval_seconds
        self._first = first_after_seconds
        self.passes = 0

    async def _loop(self) -> None:
        if self._interval <= 0:
            return  # turned off
        delay = self._first
        while True:
            await asyncio.sleep(delay)
            delay = self._interval
            try:
                counted = await self._warm()
                self.passes += 1
                log.debug("document frequencies counted ahead", words=counted)
            except Exception as exc:  # the graph is down: the next pass tries again
                log.warning("counting document frequencies ahead failed", error=str(exc))
