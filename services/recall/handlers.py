"""Recall use cases over ports: every read, each through the current-state pass."""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import structlog
from prometheus_client import Histogram

from services.core.domain import recall as ranking
from services.core.domain.errors import InvalidArgument, NotFound
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import AUTHORABLE_RELATIONS, SYSTEM_RELATIONS, ComponentStatus, Memory, Relation
from services.core.domain.projection import VectorHit, VectorQuery, vector_payload
from services.core.domain.recall import Candidate, RecallPolicy, RecallRequest, Scope, TextHit
from services.core.domain.recall_assembly import append_new, entity_names, per_query_cap
from services.core.domain.score_floor import adaptive_floor
from services.core.domain.state import State, Successor, Verdict, judge, resolve_state_mode, to_load
from services.core.domain.times import parse_iso, to_micros
from services.core.domain.timewindow import Window, resolve_window
from services.core.ports import Embedder, EventPublisher, GraphStore, VectorIndex
from services.recall.access import AccessRecorder

log = structlog.get_logger()

STAGE_SECONDS = Histogram(
    "memgrid_recall_stage_seconds",
    "Time per stage of a ranked recall",
    ["stage"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)


class Stopwatch:
    """Times the stages of one recall (Prometheus, and state_debug's timings_ms)."""

    def __init__(self, debug: dict):
        self._timings = debug.setdefault("timings_ms", {})
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        STAGE_SECONDS.labels(stage).observe(now - self._last)
        self._timings[stage] = round((now - self._last) * 1000, 2)
        self._last = now


#: How often a tenant's corpus size behind the text arms' stopword bound is recounted.
CORPUS_COUNT_SECONDS = 60.0
#: Tenants whose corpus size (and last recall) are kept in memory.
CORPUS_TENANTS = 10_000


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """Page sizes of the listing reads, from settings."""

    by_tag_default: int
    by_tag_max: int
    startup_default: int
    related_default: int


@dataclass(frozen=True, slots=True)
class StartupRules:
    """What /startup-recall gathers besides its listing (AutoMem's
    critical_lessons and system_rules), from settings."""

    lesson_tags: tuple[str, ...] = ("critical", "lesson", "ai-assistant")
    lesson_limit: int = 10
    system_tags: tuple[str, ...] = ("system", "memory-recall")
    system_limit: int = 5
    critical_importance: float = 0.9


@dataclass(frozen=True, slots=True)
class StartupRecall:
    """The listing (the most important current memories, within the tags),
    the current lessons and system rules, and whether a lesson is critical."""

    results: list[Candidate]
    lessons: list[Candidate]
    system_rules: list[Candidate]
    has_critical: bool


@dataclass(frozen=True, slots=True)
class TaggedMemory:
    """One memory of a by-tag listing, flagged with its state and, when
    superseded, the current head of its chain."""

    candidate: Candidate
    state: State
    replaced_by: str | None


@dataclass(slots=True)
class RecallOutcome:
    request: RecallRequest
    results: list[Candidate]
    relations: dict[str, list[Relation]]
    debug: dict = field(default_factory=dict)
    #: The ranked results come first; expansions and scope_fallback's fills after them.
    seed_count: int = 0
    dedup_removed: int = 0
    vector_enabled: bool = False
    vector_matched: bool = False
    #: Vector candidates within the tags (None: no vector search ran).
    pool_size_hint: int | None = None
    relation_expanded: int = 0
    entity_expanded: int = 0
    entities_found: list[str] = field(default_factory=list)
    scope_fallback: bool = False
    score_floor: float | None = None
    filtered_count: int = 0
    context_injected: bool = False

    @property
    def suppressed(self) -> list[dict]:
        """The state pass's withheld and replaced results (state_filter)."""
        return [*self.debug.get("withheld", []), *self.debug.get("replaced", [])]


@dataclass(frozen=True, slots=True)
class MemoryRead:
    memory: Memory
    relations: list[Relation]
    state: State
    replaced_by: str | None


@dataclass(frozen=True, slots=True)
class RebuildProgress:
    indexed: int
    skipped: int
    total: int
    done: bool
    elapsed_seconds: float


#: The full-text arms, each searched for every query.
TEXT_ARMS = ("keyword", "metadata", "tag")


class QueryEmbeddings:
    """Query vectors by text, with a small LRU cache (agents repeat queries)."""

    def __init__(self, embedder: Embedder | None, size: int):
        self._embedder = embedder
        self._size = size
        self._cache: OrderedDict[str, list[float]] = OrderedDict()

    @property
    def available(self) -> bool:
        return self._embedder is not None

    async def vectors(self, texts: tuple[str, ...]) -> list[list[float]]:
        missing = [t for t in texts if t not in self._cache]
        if missing:
            assert self._embedder is not None
            for text, vector in zip(missing, await self._embedder.embed(missing), strict=True):
                self._cache[text] = vector
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        for text in texts:
            self._cache.move_to_end(text)
        return [self._cache[t] for t in texts]


class RecallHandlers:
    def __init__(
        self,
        *,
        graph: GraphStore,
        vectors: VectorIndex,
        events: EventPublisher,
        policy: RecallPolicy,
        limits: ReadLimits,
        embedder: Embedder | None = None,
        query_cache_size: int = 1024,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        startup: StartupRules | None = None,
        access: AccessRecorder | None = None,
        df_warm_tenants: int = 8,
        df_recent_seconds: float = 300.0,
    ):
        self._graph = graph
        self._vectors = vectors
        self._events = events
        self._policy = policy
        self._limits = limits
        self._queries = QueryEmbeddings(embedder, query_cache_size)
        self._clock = clock
        self._startup = startup or StartupRules()
        self._access = access
        self._df_warm_tenants = df_warm_tenants
        self._df_recent_seconds = df_recent_seconds
        #: tenant -> (its memories, when counted), least recently used first.
        self._corpus: OrderedDict[str, tuple[int, float]] = OrderedDict()
        #: tenant -> when it last ran a text search, least recent first (the warmer's tenants).
        self._searched: OrderedDict[str, float] = OrderedDict()

    async def _max_df(self, tenant: str, *, searching: bool = True) -> int:
        """The text arms' document-frequency bound for a tenant, from the
        tenant's corpus size counted once a minute: one tenant's corpus never
        moves another's bound (or its BM25 scores). A search (not the
        warmer) marks the tenant as recalling."""
        now = time.monotonic()
        if searching:
            self._searched[tenant] = now
            self._searched.move_to_end(tenant)
        size, counted = self._corpus.get(tenant, (0, -math.inf))
        if now - counted > CORPUS_COUNT_SECONDS:
            size = await self._graph.count_memories(tenant)
            self._corpus[tenant] = (size, time.monotonic())
        self._corpus.move_to_end(tenant)
        for cache in (self._corpus, self._searched):
            while len(cache) > CORPUS_TENANTS:
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
        counts them: counting a word in thousands of memories took up to 20 ms
        of a query's time the first time the query named it. The tenants are
        those that recalled lately (None) or the ones given. `chunk` words a
        query, with a pause between queries. Returns the words counted."""
        counted = 0
        for tenant in self._recent_tenants() if tenants is None else tenants:
            if counted:
                await asyncio.sleep(pause_seconds)
            cap = ranking.df_count_cap(await self._max_df(tenant, searching=False))
            common = ranking.common_words(await self._graph.sample_texts(tenant, "content", sample), words)
            for start in range(0, len(common), chunk):
                if start:
                    await asyncio.sleep(pause_seconds)
                await self._graph.document_frequencies(
                    tenant, "content", common[start : start + chunk], cap=cap, recount=True
                )
            counted += len(common)
        return counted

    # The current-state pass ---------------------------------------------------------------------------

    async def _verdicts(
        self,
        tenant: str,
        memories: list[Memory],
        at: datetime,
        known: dict[str, list[Successor]] | None = None,
    ) -> dict[str, Verdict]:
        """The state of each memory at `at`: superseded ones walked to the
        last current memory of their chain, reading the records and edges of
        each hop's frontier in one batch."""
        ids = [m.id for m in memories]
        max_hops = self._policy.max_hops
        records = {m.id: m for m in memories}
        successors: dict[str, list[Successor]] = dict(known) if known is not None else {}
        missing = [i for i in ids if i not in successors]
        if missing:
            successors.update(await self._graph.successors(tenant, missing))
        for _ in range(max_hops + 1):
            needed = sorted(to_load(ids, successors, at, max_hops))
            if not needed:
                break
            found = await self._graph.read_candidates(tenant, needed)
            for memory_id in needed:  # one gone from the graph is loaded too: no record, no edges
                record, edges = found.get(memory_id, (None, []))
                successors[memory_id] = edges
                if record is not None:
                    records[memory_id] = record
        return {m.id: judge(m, successors, records, at, max_hops) for m in memories}

    async def verdicts(self, tenant: str, memories: list[Memory], at: datetime) -> dict[str, Verdict]:
        """The pass's verdict on each memory at `at` (the graph views flag their nodes with it)."""
        return await self._verdicts(tenant, memories, at)

    # Reads by id --------------------------------------------------------------------------------------

    async def get_memory(self, tenant: str, memory_id: str, state_mode: str = "") -> MemoryRead:
        """One memory of the caller's tenant with its strongest relations; an
        access bumps last_accessed. The memory comes back in every mode,
        flagged with its state and, when superseded, its current head."""
        resolve_state_mode(state_mode)
        memory_id = validate_memory_id(memory_id)
        now = self._clock()
        found = await self._graph.read_memory(
            tenant, memory_id, accessed_us=to_micros(now), relation_limit=self._policy.relation_limit
        )
        if found is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        memory, relations = found
        verdict = (await self._verdicts(tenant, [memory], now))[memory.id]
        return MemoryRead(memory, relations, verdict.state, verdict.head.id if verdict.head else None)

    # Ranked recall ------------------------------------------------------------------------------------

    def request(self, tenant: str, **params) -> RecallRequest:
        """Validate the raw parameters of a recall (INVALID_ARGUMENT names the field)."""
        now = self._clock()
        history = resolve_state_mode(params.pop("state_mode", ""), params.pop("current_only", ""))
        as_of_text = params.pop("as_of", "")
        as_of = parse_iso(as_of_text, "as_of") if as_of_text else None
        window = resolve_window(
            params.pop("time_query", ""), params.pop("start", ""), params.pop("end", ""), as_of or now
        )
        embedding = params.pop("embedding", None) or None
        if embedding is not None:
            self._check_dimension(embedding)
        return ranking.build_request(
            self._policy, tenant=tenant, now=now, history=history, as_of=as_of, window=window, embedding=embedding,
            **params,
        )  # fmt: skip

    def _vector_query(self, vector: list[float], scope: Scope, limit: int) -> VectorQuery:
        return VectorQuery(
            vector=vector,
            tenant=scope.tenant,
            limit=limit,
            current_at=scope.current_at,
            tags=scope.tags,
            tag_mode=scope.tag_mode,
            tag_match=scope.tag_match,
            exclude_tags=scope.exclude_tags,
            recorded_before=scope.as_of,
            window_start=scope.window.start,
            window_end=scope.window.end,
        )

    async def _query_vectors(self, request: RecallRequest, debug: dict) -> list[list[float]]:
        """The request's embedding, or its queries embedded (cached); none
        when the embedder is missing or failing (the other arms still answer)."""
        if request.embedding is not None:
            return [request.embedding]
        if not request.queries:
            return []
        if not self._queries.available:
            debug.setdefault("degraded", []).append("vector: no embedder configured")
            return []
        try:
            return await self._queries.vectors(request.queries)
        except Exception as exc:
            log.warning("query embedding failed; recalling without the vector arm", error=str(exc))
            debug.setdefault("degraded", []).append(f"vector: {exc}")
            return []

    async def _vector_arm(
        self, request: RecallRequest, vectors: list[list[float]], fetch: int
    ) -> list[list[VectorHit]]:
        if not vectors:
            return []
        hits = await self._vectors.search_many([self._vector_query(v, request.scope, fetch) for v in vectors])
        return [[h for h in found if h.score > 0] for found in hits]

    async def _candidates(self, request: RecallRequest, debug: dict, watch: Stopwatch) -> dict[str, Candidate]:
        """Run the arms concurrently and pool their hits by id."""
        scope = request.scope
        fetch = self._policy.candidates_per_arm(request.limit)
        pool: dict[str, Candidate] = {}
        if not request.has_query:
            order_by = request.sort if request.sort != "score" else "time_desc"
            for memory in await self._graph.list_memories(scope, order_by, fetch):
                pool.setdefault(memory.id, Candidate(memory.id, via="recent"))
            watch.lap("list")
            return pool
        max_df = await self._max_df(scope.tenant)
        text_arms = [(arm, query) for query in request.queries for arm in TEXT_ARMS]
        words_of = {query: ranking.tokens(query) for query in request.queries}
        keyword_fetch = max(fetch, self._policy.keyword_candidates)

        async def vector_arm() -> list[list[VectorHit]]:
            # Embedding the query and searching the index run beside the text arms.
            started = time.perf_counter()
            vectors = await self._query_vectors(request, debug)
            debug["vector_searched"] = bool(vectors)
            embedded = time.perf_counter()
            debug["timings_ms"]["embed"] = round((embedded - started) * 1000, 2)
            found = await self._vector_arm(request, vectors, fetch)
            debug["timings_ms"]["vector_search"] = round((time.perf_counter() - embedded) * 1000, 2)
            return found

        async def text_arm(arm: str, query: str) -> list[TextHit]:
            started = time.perf_counter()
            words = words_of[query]
            if arm == "keyword":
                # BM25's document frequencies are counted while the engine searches
                # (as far as df_count_cap).
                frequencies = asyncio.ensure_future(
                    self._graph.document_frequencies(scope.tenant, "content", words, cap=ranking.df_count_cap(max_df))
                )
            try:
                hits = await self._graph.search_text(
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

        async def all_text_arms() -> list[list[TextHit]]:
            # Every text arm first counts its words (to leave out the commonest):
            # one query counts them all, and the arms find the counts cached.
            words = [w for query in request.queries for w in words_of[query]]
            await self._graph.arm_frequencies(scope.tenant, list(TEXT_ARMS), words, cap=max_df + 1)
            return await asyncio.gather(*(text_arm(arm, query) for arm, query in text_arms))

        counts = dict.fromkeys(("vector", *TEXT_ARMS), 0)
        vector_hits, text_hits = await asyncio.gather(vector_arm(), all_text_arms())
        watch.lap("arms")
        for index, hits in enumerate(vector_hits):
            counts["vector"] += len(hits)
            ranking.merge(pool, "vector", ((h.id, h.score) for h in hits), query=index)
        for (arm, query), hits in zip(text_arms, text_hits, strict=True):
            index = request.queries.index(query)
            ranking.merge(pool, arm, ((h.id, h.score) for h in hits), normalise=True, query=index)
        debug["arms"] = counts
        return pool

    def _bm25(self, tenant: str, words: list[str], hits: list[TextHit], frequencies: dict[str, int]) -> list[TextHit]:
        """The keyword arm's matches re-ranked by BM25 over the tenant's corpus, best first."""
        if not hits:
            return hits
        size, _ = self._corpus.get(tenant, (0, 0.0))
        scores = ranking.bm25(
            words,
            {h.id: h.text for h in hits},
            frequencies,
            size,
            k1=self._policy.bm25_k1,
            b=self._policy.bm25_b,
        )
        ranked = sorted(hits, key=lambda h: (-scores.get(h.id, 0.0), h.id))
        return [TextHit(h.id, scores.get(h.id, 0.0)) for h in ranked if scores.get(h.id, 0.0) > 0]

    async def _hydrate(self, tenant: str, pool: dict[str, Candidate]) -> dict[str, list[Successor]]:
        found = await self._graph.read_candidates(tenant, list(pool))
        for memory_id in list(pool):
            if memory_id in found:
                pool[memory_id].memory = found[memory_id][0]
            else:  # gone from the graph since the index saw it
                del pool[memory_id]
        return {i: successors for i, (_, successors) in found.items()}

    async def _state_pass(
        self,
        tenant: str,
        candidates: list[Candidate],
        scope: Scope,
        debug: dict,
        known: dict[str, list[Successor]] | None = None,
    ) -> list[Candidate]:
        """Withhold what is not current; put the head of a chain in the place
        of a superseded memory. History mode keeps everything as found."""
        if scope.history or not candidates:
            return candidates
        verdicts = await self._verdicts(tenant, [c.memory for c in candidates], scope.at, known)
        kept: list[Candidate] = []
        for candidate in candidates:
            verdict = verdicts[candidate.id]
            if verdict.kept:
                kept.append(candidate)
            elif verdict.replaced:
                kept.append(ranking.stand_in(candidate, verdict.head))
                debug.setdefault("replaced", []).append(
                    {"id": candidate.id, "head": verdict.head.id, "hops": verdict.hops}
                )
            else:
                debug.setdefault("withheld", []).append({"id": candidate.id, "state": verdict.state.value})
        return kept

    async def _expand_relations(
        self, request: RecallRequest, seeds: list[Candidate], taken: set[str]
    ) -> list[Candidate]:
        """Memories one edge from the ranked results (relation_limit a seed),
        each with the edges that brought it, strongest first."""
        scope = request.scope
        seed_ids = [c.id for c in seeds]
        if not seed_ids:
            return []
        edges = await self._graph.neighbours(
            scope.tenant,
            seed_ids,
            types=list(AUTHORABLE_RELATIONS),  # as AutoMem's: not enrichment's SIMILAR_TO, PRECEDED_BY, ...
            per_memory=request.relation_limit,
            min_strength=request.expand_min_strength,
            min_importance=request.expand_min_importance,
        )
        found: dict[str, Candidate] = {}
        seeds_of = set(seed_ids)
        for relation, memory in edges:
            if memory.id in taken or not ranking.in_scope(memory, scope, respect_tags=request.expand_respect_tags):
                continue
            seed = relation.source_id if relation.source_id in seeds_of else relation.target_id
            candidate = found.setdefault(memory.id, Candidate(memory.id, memory=memory, via="relation"))
            candidate.relation = max(candidate.relation, min(1.0, max(0.0, relation.strength)))
            candidate.edges.append((relation.type, relation.strength, seed))
        return sorted(found.values(), key=lambda c: (-c.relation, -c.memory.importance, c.id))

    async def _expand_entities(
        self, request: RecallRequest, seeds: list[Candidate], taken: set[str]
    ) -> tuple[list[Candidate], list[str]]:
        """Memories sharing entities with the results (most shared first), each
        with the first entity it shares; and the results' entities."""
        scope = request.scope
        seed_ids = [c.id for c in seeds]
        seed_entities = list(dict.fromkeys(n for c in seeds for n in entity_names(c.memory)))
        if not seed_ids:
            return [], seed_entities
        shared = await self._graph.entity_neighbours(scope.tenant, seed_ids, request.expansion_limit)
        top = max((n for _, n in shared), default=1)
        fresh = [i for i, _ in shared if i not in taken]
        records = await self._graph.read_candidates(scope.tenant, fresh) if fresh else {}
        found = []
        for memory_id, count in shared:
            if memory_id not in records:
                continue
            memory = records[memory_id][0]
            if not ranking.in_scope(memory, scope, respect_tags=request.expand_respect_tags):
                continue
            candidate = Candidate(memory_id, memory=memory, via="entity_expansion", relation=count / top)
            candidate.expanded_from_entity = next((n for n in entity_names(memory) if n in seed_entities), None)
            found.append(candidate)
        return found, seed_entities

    async def _expansion(
        self,
        request: RecallRequest,
        found: list[Candidate],
        results: list[Candidate],
        weights: dict[str, float],
        debug: dict,
    ) -> tuple[list[Candidate], int]:
        """Expanded candidates scored and through the state pass, without what
        the results hold, best first, at most expansion_limit; and how many
        repeated a result's content."""
        for candidate in found:
            ranking.score(candidate, request, self._policy, weights)
        passed = await self._state_pass(request.scope.tenant, found, request.scope, debug)
        added, removed = append_new(results, ranking.order(passed, "score"))
        return added[: request.expansion_limit], removed

    async def _scope_fallback(
        self, request: RecallRequest, results: list[Candidate], weights: dict[str, float], debug: dict
    ) -> list[Candidate]:
        """scope_fallback: the slots the tags left empty, filled by a vector
        search without the tags (exclude_tags, the window and the state pass
        still apply), with memories outside the tags only, best first."""
        scope = request.scope
        vectors = await self._query_vectors(request, debug)
        if not vectors:
            return []
        unscoped = replace(scope, tags=())
        fetch = self._policy.candidates_per_arm(request.limit)
        hits = await self._vectors.search_many([self._vector_query(v, unscoped, fetch) for v in vectors])
        pool: dict[str, Candidate] = {}
        for index, found in enumerate(hits):
            ranking.merge(pool, "vector", ((h.id, h.score) for h in found if h.score > 0), query=index)
        taken = {c.id for c in results} | {i for c in results for i in (c.state_replaces, *c.deduped_from) if i}
        pool = {i: c for i, c in pool.items() if i not in taken}
        known = await self._hydrate(scope.tenant, pool)
        tags_only = replace(scope, exclude_tags=(), window=Window(), as_of=None)
        fills = [c for c in pool.values() if not ranking.in_scope(c.memory, tags_only)]
        for candidate in fills:
            ranking.score(candidate, request, self._policy, weights)
        fills = await self._state_pass(scope.tenant, fills, scope, debug, known)
        fills = [c for c in fills if not ranking.in_scope(c.memory, tags_only) and ranking.in_scope(c.memory, unscoped)]
        if request.min_score is not None:
            fills = [c for c in fills if c.final >= request.min_score]
        added, _ = append_new(results, ranking.order(fills, "score"))
        added = added[: request.limit - len(results)]
        for candidate in added:
            candidate.outside_tag_scope = True
        return added

    async def _context_candidates(self, request: RecallRequest, pool: dict[str, Candidate]) -> None:
        """Memories with the context's priority tags join the candidates (the
        most important first, within the caller's scope), so a context hint
        finds its notes even when the query's words miss them."""
        limit = self._policy.context_inject_limit
        if not request.context.tags or not limit:
            return
        scope = request.scope
        listed = replace(scope, tags=request.context.tags, tag_mode="any", tag_match="prefix")
        for memory in await self._graph.list_memories(listed, "importance", limit):
            if ranking.in_scope(memory, scope):
                pool.setdefault(memory.id, Candidate(memory.id, via="context"))

    async def search(self, request: RecallRequest) -> RecallOutcome:
        """Hybrid recall: arms, merge, score, state pass, expansion, de-duplication,
        min_score, ordering, diversity, limit."""
        tenant = request.scope.tenant
        debug: dict = {}
        watch = Stopwatch(debug)
        pool = await self._candidates(request, debug, watch)
        await self._context_candidates(request, pool)
        for memory_id in request.priority_ids:
            pool.setdefault(memory_id, Candidate(memory_id)).via = "priority"
        weights = ranking.weights_for(self._policy, request)
        shortlist = ranking.shortlist(pool, weights, self._policy.candidates_per_arm(request.limit))
        debug["candidates"] = {"found": len(pool), "read": len(shortlist)}
        pool = {c.id: c for c in shortlist}
        # The shortlist's relations are read while it is hydrated and ranked:
        # the results are mostly among it; the rest are read at the end.
        early = asyncio.ensure_future(self._graph.relations_of(tenant, list(pool), request.relation_limit))
        try:
            return self._accessed(tenant, await self._rank(request, pool, weights, early, debug, watch))
        finally:
            if not early.done():
                early.cancel()
            elif not early.cancelled():
                early.exception()  # retrieved: a failure elsewhere is the one reported

    async def _rank(
        self,
        request: RecallRequest,
        pool: dict[str, Candidate],
        weights: dict[str, float],
        early: asyncio.Future[dict[str, list[Relation]]],
        debug: dict,
        watch: Stopwatch,
    ) -> RecallOutcome:
        """Hydrate the shortlist, score, state pass, ordering, limit; then
        the expansions and scope_fallback's fills after the ranked results,
        the score floors over them all, and the results' relations."""
        tenant, scope = request.scope.tenant, request.scope
        known = await self._hydrate(tenant, pool)
        watch.lap("hydrate")
        candidates = list(pool.values())
        for candidate in candidates:
            ranking.score(candidate, request, self._policy, weights)
        watch.lap("score")
        results = await self._state_pass(tenant, candidates, scope, debug, known)
        watch.lap("state_pass")
        results = ranking.dedupe(results)
        # Merged by content (deduped_from); a head found itself and in an old one's place is no duplicate.
        outcome = RecallOutcome(request, [], {}, debug, dedup_removed=sum(len(c.deduped_from) for c in results))
        outcome.vector_enabled = request.embedding is not None or self._queries.available
        outcome.vector_matched = debug.get("arms", {}).get("vector", 0) > 0
        if debug.get("vector_searched"):
            outcome.pool_size_hint = debug["arms"]["vector"]
        if request.min_score is not None:
            results = [c for c in results if c.final >= request.min_score]
        if request.multi:
            results = per_query_cap(results, request.per_query_limit, len(request.queries))
        results = ranking.order(results, request.sort)
        if request.sort == "score":
            results = ranking.diversify(results, request.diversity_factor, len(results))
        priority = set(request.priority_ids)
        results = [c for c in results if c.id in priority] + [c for c in results if c.id not in priority]
        results = results[: request.limit]
        results = await self._assemble(request, results, weights, outcome, watch)
        watch.lap("rank")
        relations = await early
        missing = [c.id for c in results if c.id not in relations]
        if missing:
            relations.update(await self._graph.relations_of(tenant, missing, request.relation_limit))
        relations = {c.id: relations[c.id] for c in results}
        watch.lap("relations")
        outcome.results, outcome.relations = results, relations
        return outcome

    async def _assemble(
        self,
        request: RecallRequest,
        results: list[Candidate],
        weights: dict[str, float],
        outcome: RecallOutcome,
        watch: Stopwatch,
    ) -> list[Candidate]:
        """After the ranked results (the seeds): what relation and entity
        expansion bring, then scope_fallback's fills; then the adaptive floor
        and min_score over them all. The outcome gets the figures of each."""
        scope = request.scope
        outcome.seed_count = len(results)
        taken = {i for c in results for i in (c.id, c.state_replaces, *c.deduped_from) if i}
        if request.expand_relations:
            found = await self._expand_relations(request, results, taken)
            added, removed = await self._expansion(request, found, results, weights, outcome.debug)
            outcome.relation_expanded, outcome.dedup_removed = len(added), outcome.dedup_removed + removed
            results = results + added
            taken |= {c.id for c in added}
        if request.expand_entities:
            found, outcome.entities_found = await self._expand_entities(request, results, taken)
            added, removed = await self._expansion(request, found, results, weights, outcome.debug)
            outcome.entity_expanded, outcome.dedup_removed = len(added), outcome.dedup_removed + removed
            results = results + added
        if request.expand_relations or request.expand_entities:
            watch.lap("expand")
        if request.scope_fallback and scope.tags and request.has_query and outcome.seed_count < request.limit:
            fills = await self._scope_fallback(request, results[: outcome.seed_count], weights, outcome.debug)
            outcome.scope_fallback = bool(fills)
            results = results + fills
            watch.lap("scope_fallback")
        assembled = len(results)
        if request.adaptive_floor and request.sort == "score":
            outcome.score_floor = adaptive_floor(
                [c.final for c in results],
                min_results=self._policy.adaptive_floor_min_results,
                gap_ratio=self._policy.adaptive_floor_gap,
            )
            if outcome.score_floor is not None:
                results = [c for c in results if c.final >= outcome.score_floor]
        if request.min_score is not None:
            results = [c for c in results if c.final >= request.min_score]
        outcome.filtered_count = assembled - len(results)
        outcome.context_injected = any(c.via == "context" and not c.arms for c in results)
        return results

    def _accessed(self, tenant: str, outcome: RecallOutcome) -> RecallOutcome:
        """Hand the returned memories to the access recorder (written later,
        off the request: last_accessed only)."""
        if self._access is not None:
            self._access.record(tenant, (c.id for c in outcome.results))
        return outcome

    # Listings -----------------------------------------------------------------------------------------

    async def _current_page(self, tenant: str, memories: list[Memory], scope: Scope, via: str) -> list[Candidate]:
        """A listing through the state pass; a head already listed is not repeated."""
        candidates = [Candidate(m.id, memory=m, via=via) for m in memories]
        passed = await self._state_pass(tenant, candidates, scope, {})
        seen: set[str] = set()
        page = []
        for candidate in passed:
            if candidate.id not in seen:
                seen.add(candidate.id)
                page.append(candidate)
        return page

    async def list_by_tag(
        self, tenant: str, tags: list[str], *, limit: int, offset: int, state_mode: str = ""
    ) -> tuple[list[TaggedMemory], bool, int, int]:
        """Memories with any of the tags (exact, case-insensitive), ordered
        importance desc, timestamp desc, id asc; has_more says whether
        another page exists.

        By default (and with state_mode=history) every memory with the tag is
        listed, archived ones too, each flagged with its state and, when
        superseded, its current head: a client lists a tag before deleting
        by it, and the delete removes all of them. state_mode=current
        withholds what is not current (a superseded one replaced by its head)."""
        history = resolve_state_mode(state_mode, default_history=True)
        wanted = ranking.clean_tags(tags)
        if not wanted:
            raise InvalidArgument("TAGS_REQUIRED", "'tags' is required", field="tags")
        if offset < 0:
            raise InvalidArgument("INVALID_ARGUMENT", "offset must be 0 or more", field="offset")
        limit = ranking.clamp_limit(limit, self._limits.by_tag_default, self._limits.by_tag_max)
        now = self._clock()
        scope = Scope(tenant=tenant, at=now, history=history, tags=wanted, tag_match="exact")
        found = await self._graph.list_memories(scope, "importance", limit + 1, offset, with_archived=history)
        if not history:
            page = await self._current_page(tenant, found[:limit], scope, "tag")
            return [TaggedMemory(c, State.CURRENT, None) for c in page], len(found) > limit, limit, offset
        verdicts = await self._verdicts(tenant, found[:limit], now)
        flagged = []
        for memory in found[:limit]:
            verdict = verdicts[memory.id]
            head = verdict.head.id if verdict.head else None
            flagged.append(TaggedMemory(Candidate(memory.id, memory=memory, via="tag"), verdict.state, head))
        return flagged, len(found) > limit, limit, offset

    async def startup(self, tenant: str, tags: list[str], *, limit: int, state_mode: str = "") -> StartupRecall:
        """What an agent should know at the start of a session: the most
        important current memories (within the tags, when given), and, as
        AutoMem answers, the current lessons (memories tagged critical,
        lesson or ai-assistant, most important first) and system rules
        (tagged system or memory-recall); all through the state pass. What
        it returns counts as accessed."""
        history = resolve_state_mode(state_mode)
        limit = ranking.clamp_limit(limit, self._limits.startup_default, self._policy.max_limit)
        now, rules = self._clock(), self._startup

        async def listing(wanted: tuple[str, ...], size: int, exact: bool) -> list[Candidate]:
            scope = Scope(tenant=tenant, at=now, history=history, tags=wanted, tag_match="exact" if exact else "prefix")
            found = await self._graph.list_memories(scope, "importance", size)
            return (await self._current_page(tenant, found, scope, "startup"))[:size]

        results, lessons, system_rules = await asyncio.gather(
            listing(ranking.clean_tags(tags), limit, False),
            listing(ranking.clean_tags(rules.lesson_tags), rules.lesson_limit, True),
            listing(ranking.clean_tags(rules.system_tags), rules.system_limit, True),
        )
        if self._access is not None:
            self._access.record(tenant, (c.id for c in (*results, *lessons, *system_rules)))
        critical = any(c.memory.importance >= rules.critical_importance for c in lessons)
        return StartupRecall(results, lessons, system_rules, critical)

    async def related(
        self,
        tenant: str,
        memory_id: str,
        *,
        relation_types: list[str],
        limit: int,
        min_strength: float | None,
        state_mode: str = "",
        max_depth: int = 0,
    ) -> list[tuple[Relation, Memory, str | None]]:
        """The memories one edge away, strongest first, then (max_depth, 1 to
        RECALL_RELATED_MAX_DEPTH) those one edge further, and so on; a
        superseded neighbour is replaced by its head (its id in the third place)."""
        history = resolve_state_mode(state_mode)
        memory_id = validate_memory_id(memory_id)
        types = [t.strip().upper() for t in relation_types if t.strip()]
        known_types = set(AUTHORABLE_RELATIONS) | set(SYSTEM_RELATIONS) | {"MENTIONS"}
        for t in types:
            if t not in known_types:
                raise InvalidArgument("INVALID_RELATION_TYPE", f"unknown relation type {t!r}", field="relation_types")
        if min_strength is not None and not 0.0 <= min_strength <= 1.0:
            raise InvalidArgument("INVALID_ARGUMENT", "min_strength must be between 0 and 1", field="min_strength")
        if await self._graph.get_memory(tenant, memory_id) is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        limit = ranking.clamp_limit(limit, self._limits.related_default, self._policy.max_limit)
        depth = min(max(max_depth, 1), self._policy.related_max_depth)
        edges: list[tuple[Relation, Memory]] = []
        reached, frontier = {memory_id}, [memory_id]
        for _ in range(depth):
            found = await self._graph.neighbours(
                tenant, frontier, types=types or None, per_memory=limit, min_strength=min_strength or 0.0,
                min_importance=0.0,
            )  # fmt: skip
            frontier = []
            for relation, memory in found:
                if memory.id not in reached and len(edges) < limit:
                    reached.add(memory.id)
                    frontier.append(memory.id)
                    edges.append((relation, memory))
            if not frontier or len(edges) >= limit:
                break
        if history:
            return [(relation, memory, None) for relation, memory in edges]
        now = self._clock()
        verdicts = await self._verdicts(tenant, [m for _, m in edges], now)
        related, seen = [], {memory_id}
        for relation, memory in edges:
            verdict = verdicts[memory.id]
            shown = verdict.head if verdict.replaced else (memory if verdict.kept else None)
            if shown is None or shown.id in seen:
                continue
            seen.add(shown.id)
            related.append((relation, shown, memory.id if verdict.replaced else None))
        return related

    # The vector index ---------------------------------------------------------------------------------

    async def find_similar(
        self, tenant: str, queries: list[tuple[str, list[float]]], *, limit: int, min_score: float
    ) -> list[list[VectorHit]]:
        """Nearest current memories to each vector, from the index alone."""
        for _, vector in queries:
            self._check_dimension(vector)
        now = self._clock()
        return await self._vectors.search_many(
            [
                VectorQuery(
                    vector, tenant, limit, current_at=now, exclude_ids=(i,) if i else (), min_score=min_score,
                    keep_superseded=False,
                )
                for i, vector in queries
            ],
            with_payload=True,
        )  # fmt: skip

    async def rebuild_index(self, batch_size: int, tenant: str | None) -> AsyncIterator[RebuildProgress]:
        """Drop the tenant's points (None: every point) and project its part
        of the graph again, page by page: the index is a projection, so the
        graph alone reproduces it. Other tenants' points stay searchable."""
        started = time.perf_counter()
        total = await self._graph.count_memories(tenant)
        await self._vectors.clear(tenant)
        indexed = skipped = 0
        cursor = -1
        while True:
            cursor, page = await self._graph.scan_memories(cursor, batch_size, tenant)
            if not page:
                break
            points = [
                (m.id, m.embedding, vector_payload(m))
                for m in page
                if m.embedding is not None and len(m.embedding) == self._vectors.dimension
            ]
            await self._vectors.upsert(points)
            indexed += len(points)
            skipped += len(page) - len(points)
            yield RebuildProgress(indexed, skipped, total, False, time.perf_counter() - started)
        if tenant is None:
            await self._vectors.optimize()  # every point is new: index them all before answering
        # A tenant's points are left to the periodic optimisation, as any
        # write's are: an optimisation holds up every tenant's searches.
        log.info("vector index rebuilt", tenant=tenant or "every tenant", indexed=indexed, skipped=skipped)
        yield RebuildProgress(indexed, skipped, total, True, time.perf_counter() - started)

    def _check_dimension(self, vector: list[float]) -> None:
        if len(vector) != self._vectors.dimension:
            raise InvalidArgument(
                "EMBEDDING_DIMENSION_MISMATCH",
                f"'embedding' has {len(vector)} dimensions; expected {self._vectors.dimension}",
                field="embedding",
            )

    async def system_status(self, tenant: str | None) -> tuple[int, list[ComponentStatus]]:
        """The memory count (the tenant's; None: all tenants') and the stores recall depends on."""
        graph = await self._graph.status()
        components = [graph, await self._events.status(), await self._vectors.status()]
        if tenant is not None and graph.status == "connected":
            return await self._graph.count_memories(tenant), components
        return int(graph.figures.get("memories", 0)), components
