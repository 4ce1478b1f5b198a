"""The full-text arms of recall (TextSearch) and the per-tenant word statistics behind them."""

from __future__ import annotations

import time

from services.core.adapters.falkor.connection import FalkorConnection
from services.core.adapters.falkor.count_cache import CountCache
from services.core.adapters.falkor.counts_in_flight import CountsInFlight, awaited
from services.core.adapters.falkor.rows import ARM_FIELDS, fulltext_query, scope_where
from services.core.domain import text_policy
from services.core.domain.recall_request import Scope
from services.core.domain.recall_text import TextHit, df_count_cap

#: How long a word's document frequency is trusted (by default).
DF_CACHE_SECONDS = 300.0


class FalkorTextSearch:
    """TextSearch on FalkorDB's full-text index, with a per-tenant cache of document frequencies."""

    def __init__(self, connection: FalkorConnection, *, df_cache_seconds: float = DF_CACHE_SECONDS):
        self._conn = connection
        #: (tenant, field, word) -> the word's document frequency.
        self._df_cache = CountCache(seconds=df_cache_seconds)
        #: The counts being taken now: a request that needs one of them waits for it.
        self._counting = CountsInFlight()

    def cached(self) -> int:
        """Document frequencies cached (at most count_cache.COUNT_CACHE_SIZE)."""
        return len(self._df_cache)

    async def document_frequencies(
        self, tenant: str, field: str, words: list[str], *, cap: int | None = None, recount: bool = False
    ) -> dict[str, int]:
        """How many of the tenant's memories hold each word in a full-text
        field; cached per tenant for df_cache_seconds (RECALL_DF_CACHE_SECONDS;
        a stopword filter, not a count). Another tenant's corpus never changes
        the figure, so it neither moves the tenant's scores nor tells the
        tenant how many of others' memories hold a word.

        With cap, counting stops there (the engine yields matches lazily), so a
        word held by nearly every memory costs a bounded count, not a full one
        (docs/performance.md). A word at the cap holds at least that many."""
        return (await self._frequencies(tenant, {field: words}, cap=cap, recount=recount))[field]

    async def arm_frequencies(self, tenant: str, arms: list[str], words: list[str], *, cap: int) -> None:
        """Count (and cache) the words' document frequencies among the
        tenant's memories in the fields of these arms, all in one query: what
        each arm's search_text reads first, so the arms then find them cached."""
        await self._frequencies(tenant, {ARM_FIELDS[arm]: words for arm in arms}, cap=cap)

    async def _frequencies(
        self, tenant: str, fields: dict[str, list[str]], *, cap: int | None, recount: bool = False
    ) -> dict[str, dict[str, int]]:
        now = time.monotonic()
        found: dict[str, dict[str, int]] = {field: {} for field in fields}
        missing: list[tuple[str, str]] = []
        for field, words in fields.items():
            for word in dict.fromkeys(words):
                cached = None if recount else self._df_cache.get((tenant, field, word), now=now, cap=cap)
                if cached is not None:
                    found[field][word] = cached
                elif word.isalnum():
                    missing.append((field, word))
        waiting = {pair: f for pair in missing if (f := self._counting.covering((tenant, *pair), cap)) is not None}
        counting = [pair for pair in missing if pair not in waiting]
        with self._counting.taking([(tenant, *pair) for pair in counting], cap) as futures:
            if counting:
                counted = await self._count(tenant, counting, cap)
                for field, word in counting:
                    found[field][word] = n = counted.get((field, word), 0)
                    self._df_cache.put((tenant, field, word), n, now=now, cap=cap)
                    futures[(tenant, field, word)].set_result(n)
        abandoned: dict[str, list[str]] = {}
        for (field, word), future in waiting.items():
            answer = await awaited(future)
            if answer is None:
                abandoned.setdefault(field, []).append(word)
            else:
                found[field][word] = answer
        if abandoned:  # the count waited for failed: take it here
            for field, counts in (await self._frequencies(tenant, abandoned, cap=cap, recount=True)).items():
                found[field].update(counts)
        return found

    async def _count(self, tenant: str, pairs: list[tuple[str, str]], cap: int | None) -> dict[tuple[str, str], int]:
        """The tenant's matches of each (field, word), counted to cap (None: exactly), in one query."""
        # The full-text index holds every tenant's memories: the tenant's
        # matches are kept before they are counted (and before the cap).
        if cap is None:
            result = await self._conn.query(
                """
                UNWIND $pairs AS p
                CALL db.idx.fulltext.queryNodes('Memory', '@' + p[0] + ':' + p[1]) YIELD node
                WITH p, node WHERE node.tenant = $tenant
                RETURN p[0], p[1], count(node)
                """,
                {"pairs": [list(pair) for pair in pairs], "tenant": tenant},
            )
        else:
            # A branch a word (a LIMIT inside an UNWIND's subquery caps all
            # words together); a word without matches yields no row.
            capped = " UNION ALL ".join(
                f"CALL db.idx.fulltext.queryNodes('Memory', '@{field}:' + $w{i}) YIELD node "
                f"WITH node WHERE node.tenant = $tenant "
                f"WITH node LIMIT $cap RETURN '{field}' AS f, $w{i} AS w, count(node) AS n"
                for i, (field, _) in enumerate(pairs)
            )
            result = await self._conn.query(
                capped, {"cap": cap, "tenant": tenant, **{f"w{i}": w for i, (_, w) in enumerate(pairs)}}
            )
        return {(field, word): int(n) for field, word, n in result.result_set}

    async def sample_texts(self, tenant: str, field: str, size: int) -> list[str]:
        """A random sample of the tenant's memories' texts in a full-text
        field (document frequencies are counted per tenant)."""
        result = await self._conn.query(
            f"MATCH (n:Memory) WHERE n.tenant = $tenant AND n.{field} IS NOT NULL "
            f"WITH n.{field} AS text, rand() AS r ORDER BY r LIMIT $size RETURN text",
            {"tenant": tenant, "size": size},
        )
        return [text for (text,) in result.result_set]

    async def search_text(
        self,
        scope: Scope,
        arm: str,
        words: list[str],
        limit: int,
        *,
        max_df: int | None = None,
        scan: int | None = None,
    ) -> list[TextHit]:
        """An arm over the full-text index (keyword: content, tag: tags,
        metadata: metadata text): (id, score) within the scope, best first.

        With max_df, words held by more memories than that are left out (they
        say little, and every match costs a row); when every word is that
        common, the rarest alone is searched if within DF_REACH x max_df,
        otherwise the arm finds nothing.

        With scan, the arm reads about that many matches at most, its cost at
        scale: the words are searched rarest first while their matches add up
        to no more than scan (the rarest always), and the rarest-word search
        reads at most scan of its matches, in the index's order, the scope then
        keeping those it holds. The words left out are the commonest, whose
        matches rank lowest; reading a common word's matches in full is what
        made a query slow at scale (docs/performance.md), and with the scope
        applied first, a tag held by 2% of memories made the search read all
        of them."""
        field = ARM_FIELDS[arm]
        bound = ""
        if max_df is not None and words:
            # Counted just past max_df: enough to tell which words to leave out.
            df = await self.document_frequencies(scope.tenant, field, words, cap=max_df + 1)
            kept = text_policy.within_max_df(words, df, max_df)
            if not kept:
                df = await self.document_frequencies(scope.tenant, field, words, cap=df_count_cap(max_df))
                kept = text_policy.rarest_fallback(words, df, max_df)
                if scan is not None:
                    # collect() makes the bound hold before the scope: FalkorDB
                    # moves a filter ahead of a bare LIMIT.
                    bound = (
                        f"WITH n, score LIMIT {int(scan)} WITH collect([n, score]) AS read "
                        "UNWIND read AS pair WITH pair[0] AS n, pair[1] AS score"
                    )
            elif scan is not None:
                kept = text_policy.rarest_within(kept, df, scan)
            words = text_policy.searched(kept, df)
        query = fulltext_query(field, words)
        if query is None:
            return []
        where, params = scope_where(scope)
        result = await self._conn.query(
            f"""
            CALL db.idx.fulltext.queryNodes('Memory', $q) YIELD node AS n, score
            {bound} WHERE {where}
            RETURN n.id, score, n.{field} ORDER BY score DESC LIMIT $limit
            """,
            {**params, "q": query, "limit": limit},
        )
        return [TextHit(memory_id, float(score), text or "") for memory_id, score, text in result.result_set]
