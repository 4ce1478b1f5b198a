"""Ranked recall's full-text arms (keyword, metadata, tag) and the word
statistics behind them: each tenant's corpus size (its document-frequency
bound and BM25's corpus), BM25 over the keyword arm's matches, and the
warmer that counts the commonest words' frequencies ahead."""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict

from services.core.domain.query_focus import focus_terms
from services.core.domain.recall_request import RecallPolicy, Scope
from services.core.domain.recall_text import TextHit, bm25, common_words, df_count_cap
from services.core.ports.graph import MemoryLookup
from services.core.ports.text_search import TextSearch

#: The full-text arms, each searched for every query.
TEXT_ARMS = ("keyword", "metadata", "tag")


class TextArms:
    """The text arms of one recall, and the per-tenant statistics they keep."""

    def __init__(
        self,
        *,
        text: TextSearch,
        lookup: MemoryLookup,
        policy: RecallPolicy,
        df_warm_tenants: int = 8,
        df_recent_seconds: float = 300.0,
        corpus_count_seconds: float = 60.0,
        corpus_tenants: int = 10_000,
    ):
        self._text = text
        self._lookup = lookup
        self._policy = policy
        self._df_warm_tenants = df_warm_tenants
        self._df_recent_seconds = df_recent_seconds
        #: How often a tenant's corpus size is recounted, and the tenants whose
        #: corpus size (and last recall) are kept (RECALL_CORPUS_*).
        self._corpus_count_seconds = corpus_count_seconds
        self._corpus_tenants = corpus_tenants
        #: tenant -> (its memories, when counted), least recently used first.
        self._corpus: OrderedDict[str, tuple[int, float]] = OrderedDict()
        #: tenant -> when it last ran a text search, least recent first (the warmer's tenants).
        self._searched: OrderedDict[str, float] = OrderedDict()

    async def max_df(self, tenant: str, *, searching: bool = True) -> int:
        """The text arms' document-frequency bound for a tenant, from the
        tenant's corpus size counted every corpus_count_seconds: one tenant's corpus never
        moves another's bound (or its BM25 scores). A search (not the
        warmer) marks the tenant as recalling."""
        now = time.monotonic()
        if searching:
            self._searched[tenant] = now
            self._searched.move_to_end(tenant)
        size, counted = self._corpus.get(tenant, (0, -math.inf))
        if now - counted > self._corpus_count_seconds:
            size = await self._lookup.count_memories(tenant)
            self._corpus[tenant] = (size, time.monotonic())
        self._corpus.move_to_end(tenant)
        for cache in (self._corpus, self._searched):
            while len(cache) > self._corpus_tenants:
                cache.popitem(last=False)
        return self._policy.max_document_frequency(size)

    def _recent_tenants(self) -> list[str]:
        """The tenants that searched within df_recent_seconds (their counts
        would still be cached), most recent first, at most df_warm_tenants."""
        since = time.monotonic() - self._df_recent_seconds
        recent = [t for t, at in reversed(self._searched.items()) if at >= since]
        return recent[: self._df_warm_tenants]

    async def warm_document_frequencies(
        self, sample: int, words: int, chunk: int, pause_seconds: float = 0.0, *, tenants: list[str] | None = None
    ) -> int:
        """Count again, and cache, the document frequencies of each tenant's
        commonest words (found in a sample of its memories), as far as BM25
        counts them: counting a word held by thousands of memories is dear, and
        a query should not pay for it the first time it names the word
        (docs/performance.md). The tenants are
        those that recalled lately (None) or the ones given. `chunk` words a
        query, with a pause between queries. Returns the words counted."""
        counted = 0
        for tenant in self._recent_tenants() if tenants is None else tenants:
            if counted:
                await asyncio.sleep(pause_seconds)
            cap = df_count_cap(await self.max_df(tenant, searching=False))
            common = common_words(await self._text.sample_texts(tenant, "content", sample), words)
            for start in range(0, len(common), chunk):
                if start:
                    await asyncio.sleep(pause_seconds)
                await self._text.document_frequencies(
                    tenant, "content", common[start : start + chunk], cap=cap, recount=True
                )
            counted += len(common)
        return counted

    async def search(
        self, scope: Scope, queries: tuple[str, ...], fetch: int, max_df: int, debug: dict, counts: dict[str, int]
    ) -> list[tuple[str, int, list[TextHit]]]:
        """Every text arm for every query, at once: (arm, the query's index,
        its hits, best first, at most `fetch`); `counts` gets each arm's
        matches and debug the arms' timings."""
        text_arms = [(arm, index) for index in range(len(queries)) for arm in TEXT_ARMS]
        words_of = [focus_terms(query) for query in queries]
        keyword_fetch = max(fetch, self._policy.keyword_candidates)

        async def text_arm(arm: str, index: int) -> list[TextHit]:
            started = time.perf_counter()
            words = words_of[index]
            if arm == "keyword":
                # BM25's document frequencies are counted while the engine searches
                # (as far as df_count_cap).
                frequencies = asyncio.ensure_future(
                    self._text.document_frequencies(scope.tenant, "content", words, cap=df_count_cap(max_df))
                )
            try:
                hits = await self._text.search_text(
                    scope,
                    arm,
                    words,
                    keyword_fetch if arm == "keyword" else fetch,
                    max_df=max_df,
                    scan=self._policy.keyword_scan,
                )
            except BaseException:
                if arm == "keyword":
                    frequencies.cancel()
                raise
            counts[arm] += len(hits)
            if arm == "keyword":
                # BM25 re-ranks the keyword hits while the query is still being embedded.
                searched = time.perf_counter()
                hits = self._bm25(scope.tenant, words, hits, await frequencies)
                debug["timings_ms"]["bm25"] = round((time.perf_counter() - searched) * 1000, 2)
            debug["timings_ms"][f"{arm}_arm"] = round((time.perf_counter() - started) * 1000, 2)
            return hits[:fetch]

        # Every text arm first counts its words (to leave out the commonest):
        # one query counts them all, and the arms find the counts cached.
        words = [w for found in words_of for w in found]
        await self._text.arm_frequencies(scope.tenant, list(TEXT_ARMS), words, cap=max_df + 1)
        found = await asyncio.gather(*(text_arm(arm, index) for arm, index in text_arms))
        return [(arm, index, hits) for (arm, index), hits in zip(text_arms, found, strict=True)]

    def _bm25(self, tenant: str, words: list[str], hits: list[TextHit], frequencies: dict[str, int]) -> list[TextHit]:
        """The keyword arm's matches re-ranked by BM25 over the tenant's corpus, best first."""
        if not hits:
            return hits
        size, _ = self._corpus.get(tenant, (0, 0.0))
        scores = bm25(
            words,
            {h.id: h.text for h in hits},
            frequencies,
            size,
            k1=self._policy.bm25_k1,
            b=self._policy.bm25_b,
        )
        ranked = sorted(hits, key=lambda h: (-scores.get(h.id, 0.0), h.id))
        return [TextHit(h.id, scores.get(h.id, 0.0)) for h in ranked if scores.get(h.id, 0.0) > 0]
