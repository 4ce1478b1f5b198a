"""Ranked recall (POST /recall): the arms (vector and full text) run at
once, their hits pooled and shortlisted, the shortlist read from the graph,
scored, through the current-state pass, de-duplicated, ordered,
diversified and cut to the limit; then the expansions and scope_fallback's
fills after the ranked results, the score floors over them all, and the
results' relations."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
from prometheus_client import Histogram

from services.core.domain import recall_ranking as ranking
from services.core.domain.model import Memory, Relation
from services.core.domain.projection import VectorHit
from services.core.domain.recall_assembly import append_new, per_query_cap
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import RecallPolicy, RecallRequest, build_request, in_scope
from services.core.domain.score_floor import adaptive_floor
from services.core.domain.state import Successor, resolve_state_mode
from services.core.domain.times import parse_iso
from services.core.domain.timewindow import Window, resolve_window
from services.core.ports.reads import RankedReads
from services.recall.access import AccessRecorder
from services.recall.current_state import CurrentStatePass
from services.recall.expansion import Expansion
from services.recall.fresh_reads import FreshReads
from services.recall.related_stage import RelatedStage
from services.recall.rerank_stage import RerankStage
from services.recall.text_arms import TEXT_ARMS, TextArms
from services.recall.vector_arm import QueryVector, VectorArm
from services.recall.widening import Widening
from services.recall.word_vectors import WordVectors

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


class RankedRecall:
    """Ranked recall over the arms, the graph and the current-state pass."""

    def __init__(
        self,
        *,
        reader: RankedReads,
        text: TextArms,
        vector: VectorArm,
        state: CurrentStatePass,
        policy: RecallPolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        access: AccessRecorder | None = None,
        words: WordVectors | None = None,
        rerank: RerankStage | None = None,
        fresh: FreshReads | None = None,
    ):
        #: Waits for the vectors of memories stored before a recall (None: never).
        self._fresh = fresh
        self._related = RelatedStage(words, policy)
        self._rerank = rerank or RerankStage(None, 0)
        self._reader = reader
        self._text = text
        self._vector = vector
        self._state = state
        self._policy = policy
        self._clock = clock
        self._access = access
        self._expansion = Expansion(reader=reader, state=state, policy=policy)
        self._widening = Widening(vector=vector, text=text)

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
            self._vector.check(embedding)
        return build_request(
            self._policy, tenant=tenant, now=now, history=history, as_of=as_of, window=window, embedding=embedding,
            **params,
        )  # fmt: skip

    async def _candidates(self, request: RecallRequest, debug: dict, watch: Stopwatch) -> dict[str, Candidate]:
        """Run the arms concurrently and pool their hits by id."""
        scope = request.scope
        fetch = self._policy.candidates_per_arm(request.limit)
        pool: dict[str, Candidate] = {}
        if not request.has_query:
            # A listing is read whole: as many as a shortlist, not the arms' depth.
            order_by = request.sort if request.sort != "score" else "time_desc"
            listed = self._policy.shortlist_size(request.limit)
            for memory in await self._reader.list_memories(scope, order_by, listed):
                pool.setdefault(memory.id, Candidate(memory.id, via="recent"))
            watch.lap("list")
            return pool
        max_df = await self._text.max_df(scope.tenant)

        searched: list[QueryVector] = []

        async def vector_arm() -> list[list[VectorHit]]:
            # Embedding the query and searching the index run beside the text arms.
            started = time.perf_counter()
            vectors = await self._vector.query_vectors(request, debug, self._policy.nameless_query_share)
            searched.extend(vectors)
            debug["vector_searched"] = bool(vectors)
            embedded = time.perf_counter()
            debug["timings_ms"]["embed"] = round((embedded - started) * 1000, 2)
            if vectors and self._fresh is not None:
                # What was stored before this recall is searched too, once its vector is in (bounded).
                await self._fresh.wait(scope.tenant, debug)
                debug["timings_ms"]["fresh_wait"] = round((time.perf_counter() - embedded) * 1000, 2)
                embedded = time.perf_counter()
            found = await self._vector.search(vectors, scope, fetch)
            debug["timings_ms"]["vector_search"] = round((time.perf_counter() - embedded) * 1000, 2)
            return found

        counts = dict.fromkeys(("vector", *TEXT_ARMS), 0)
        vector_hits, text_hits = await asyncio.gather(
            vector_arm(), self._text.search(scope, request.queries, fetch, max_df, debug, counts)
        )
        watch.lap("arms")
        for index, hits in enumerate(vector_hits):
            counts["vector"] += len(hits)
            ranking.merge(pool, "vector", ((h.id, h.score) for h in hits), query=index)
        for arm, index, matches in text_hits:
            ranking.merge(pool, arm, ((m.id, m.score) for m in matches), normalise=True, query=index)
        debug["arms"] = counts
        if request.widening:
            await self._widening.widen(request, pool, searched, fetch, max_df, debug)
            watch.lap("widen")
        return pool

    async def _hydrate(self, tenant: str, pool: dict[str, Candidate]) -> dict[str, list[Successor]]:
        found = await self._reader.read_candidates(tenant, list(pool))
        for memory_id in list(pool):
            if memory_id in found:
                pool[memory_id].memory = found[memory_id][0]
            else:  # gone from the graph since the index saw it
                del pool[memory_id]
        return {i: successors for i, (_, successors) in found.items()}

    async def _scope_fallback(
        self, request: RecallRequest, results: list[Candidate], weights: dict[str, float], debug: dict
    ) -> list[Candidate]:
        """scope_fallback: the slots the tags left empty, filled by a vector
        search without the tags (exclude_tags, the window and the state pass
        still apply), with memories outside the tags only, best first."""
        scope = request.scope
        vectors = await self._vector.query_vectors(request, debug, self._policy.nameless_query_share)
        if not vectors:
            return []
        unscoped = replace(scope, tags=())
        fetch = self._policy.candidates_per_arm(request.limit)
        pool: dict[str, Candidate] = {}
        for index, found in enumerate(await self._vector.search(vectors, unscoped, fetch)):
            ranking.merge(pool, "vector", ((h.id, h.score) for h in found), query=index)
        taken = {c.id for c in results} | {i for c in results for i in (c.state_replaces, *c.deduped_from) if i}
        pool = {i: c for i, c in pool.items() if i not in taken}
        known = await self._hydrate(scope.tenant, pool)
        tags_only = replace(scope, exclude_tags=(), window=Window(), as_of=None)
        fills = [c for c in pool.values() if not in_scope(c.hydrated, tags_only)]
        for candidate in fills:
            ranking.score(candidate, request, self._policy, weights)
        fills = await self._state.apply(scope.tenant, fills, scope, debug, known)
        fills = [c for c in fills if not in_scope(c.hydrated, tags_only) and in_scope(c.hydrated, unscoped)]
        if request.min_score is not None:
            fills = [c for c in fills if c.final >= request.min_score]
        added, _ = append_new(results, ranking.order(fills, "score"))
        added = added[: request.limit - len(results)]
        for candidate in added:
            candidate.outside_tag_scope = True
        return added

    async def _context_memories(self, request: RecallRequest) -> list[Memory]:
        """Memories with the context's priority tags (the most important
        first, within the caller's scope), to join the candidates, so a
        context hint finds its notes even when the query's words miss them."""
        limit = self._policy.context_inject_limit
        if not request.context.tags or not limit:
            return []
        scope = request.scope
        listed = replace(scope, tags=request.context.tags, tag_mode="any", tag_match="prefix")
        return [m for m in await self._reader.list_memories(listed, "importance", limit) if in_scope(m, scope)]

    async def search(self, request: RecallRequest) -> RecallOutcome:
        """Hybrid recall: arms, merge, score, state pass, expansion, de-duplication,
        min_score, ordering, diversity, limit."""
        tenant = request.scope.tenant
        debug: dict = {}
        watch = Stopwatch(debug)
        weights = ranking.weights_for(self._policy, request)
        # The question's word vectors are embedded, and the context listing read, beside the arms.
        question = self._related.question_vectors(request, weights)
        try:
            pool, context = await asyncio.gather(
                self._candidates(request, debug, watch), self._context_memories(request)
            )
        except BaseException:
            _settle(question)
            raise
        for memory in context:
            pool.setdefault(memory.id, Candidate(memory.id, via="context"))
        for memory_id in request.priority_ids:
            pool.setdefault(memory_id, Candidate(memory_id)).via = "priority"
        shortlist = ranking.shortlist(pool, weights, self._policy.shortlist_size(request.limit))
        debug["candidates"] = {"found": len(pool), "read": len(shortlist)}
        pool = {c.id: c for c in shortlist}
        # The shortlist's relations are read while it is hydrated and ranked:
        # the results are mostly among it; the rest are read at the end.
        early = asyncio.ensure_future(self._reader.relations_of(tenant, list(pool), request.relation_limit))
        try:
            return self._accessed(tenant, await self._rank(request, pool, weights, early, question, debug, watch))
        finally:
            _settle(early)
            _settle(question)

    async def _rank(
        self,
        request: RecallRequest,
        pool: dict[str, Candidate],
        weights: dict[str, float],
        early: asyncio.Future[dict[str, list[Relation]]],
        question: asyncio.Future[dict[str, np.ndarray]] | None,
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
        await self._related.score(request, candidates, weights, question)
        watch.lap("related")
        for candidate in candidates:
            ranking.score(candidate, request, self._policy, weights)
        ranking.with_neighbourhood(candidates, self._policy, weights, search=request.has_query)
        watch.lap("score")
        self._rerank.apply(request, candidates, debug)
        watch.lap("rerank")
        results = await self._state.apply(tenant, candidates, scope, debug, known)
        watch.lap("state_pass")
        results = ranking.dedupe(results)
        # Merged by content (deduped_from); a head found itself and in an old one's place is no duplicate.
        outcome = RecallOutcome(request, [], {}, debug, dedup_removed=sum(len(c.deduped_from) for c in results))
        outcome.vector_enabled = request.embedding is not None or self._vector.enabled
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
            relations.update(await self._reader.relations_of(tenant, missing, request.relation_limit))
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
            found = await self._expansion.relations(request, results, taken)
            added, removed = await self._expansion.added(request, found, results, weights, outcome.debug)
            outcome.relation_expanded, outcome.dedup_removed = len(added), outcome.dedup_removed + removed
            results = results + added
            taken |= {c.id for c in added}
        if request.expand_entities:
            found, outcome.entities_found = await self._expansion.entities(request, results, taken)
            added, removed = await self._expansion.added(request, found, results, weights, outcome.debug)
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


def _settle(future: asyncio.Future | None) -> None:
    """A side task the recall no longer needs: cancelled if still running,
    its failure retrieved if it failed (the one reported is the recall's own)."""
    if future is None:
        return
    if not future.done():
        future.cancel()
    elif not future.cancelled():
        future.exception()
