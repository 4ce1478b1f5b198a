"""Keeps the document frequencies of the corpus's commonest words counted.

The keyword arm and BM25 count how many memories hold each query word, and
cache the count for a few minutes (RECALL_DF_CACHE_SECONDS). A word
held by thousands of memories is dear to count, and at 100k memories such a
count was the largest part of a slow query's time the first time a query
named the word. Every `interval` seconds (less than the cache keeps a count),
this counts again the commonest words of a sample of the corpus, in the
background, so no query waits for them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from services.core.background import BackgroundLoop

log = structlog.get_logger()


class FrequencyWarmer(BackgroundLoop):
    _failed = "counting document frequencies ahead failed"

    def __init__(self, warm: Callable[[], Awaitable[int]], interval_seconds: float, first_after_seconds: float = 5.0):
        self._warm = warm
        self._interval = interval_seconds
        self._first = first_after_seconds
        self.passes = 0

    async def _pass(self) -> None:
        counted = await self._warm()
        self.passes += 1
        log.debug("document frequencies counted ahead", words=counted)
