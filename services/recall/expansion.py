"""Ranked recall's expansions: the memories one edge from the ranked
results (expand_relations) and those sharing their entities
(expand_entities), within the caller's scope, scored and through the
current-state pass, appended after the ranked results."""

from __future__ import annotations

from services.core.domain.model import AUTHORABLE_RELATIONS, relation_rank
from services.core.domain.recall_assembly import append_new, entity_names
from services.core.domain.recall_ranking import Candidate, order, score
from services.core.domain.recall_request import RecallPolicy, RecallRequest, in_scope
from services.core.ports.reads import ExpansionReads
from services.recall.current_state import CurrentStatePass


def _rank(candidate: Candidate) -> int:
    """The best kind (model.relation_rank) of the edges that brought a candidate."""
    return min((relation_rank(kind) for kind, _, _ in candidate.edges), default=0)


class Expansion:
    """What expansion adds after a recall's ranked results."""

    def __init__(self, *, reader: ExpansionReads, state: CurrentStatePass, policy: RecallPolicy):
        self._reader = reader
        self._state = state
        self._policy = policy

    async def relations(self, request: RecallRequest, seeds: list[Candidate], taken: set[str]) -> list[Candidate]:
        """Memories one edge from the ranked results (relation_limit a seed),
        each with the edges that brought it, strongest first."""
        scope = request.scope
        seed_ids = [c.id for c in seeds]
        if not seed_ids:
            return []
        edges = await self._reader.neighbours(
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
            if memory.id in taken or not in_scope(memory, scope, respect_tags=request.expand_respect_tags):
                continue
            seed = relation.source_id if relation.source_id in seeds_of else relation.target_id
            candidate = found.setdefault(memory.id, Candidate(memory.id, memory=memory, via="relation"))
            candidate.relation = max(candidate.relation, min(1.0, max(0.0, relation.strength)))
            candidate.edges.append((relation.type, relation.strength, seed))
        return sorted(found.values(), key=lambda c: (_rank(c), -c.relation, -c.hydrated.importance, c.id))

    async def entities(
        self, request: RecallRequest, seeds: list[Candidate], taken: set[str]
    ) -> tuple[list[Candidate], list[str]]:
        """Memories sharing entities with the results (most shared first), each
        with the first entity it shares; and the results' entities."""
        scope = request.scope
        seed_ids = [c.id for c in seeds]
        seed_entities = list(dict.fromkeys(n for c in seeds for n in entity_names(c.hydrated)))
        if not seed_ids:
            return [], seed_entities
        shared = await self._reader.entity_neighbours(scope.tenant, seed_ids, request.expansion_limit)
        top = max((n for _, n in shared), default=1)
        fresh = [i for i, _ in shared if i not in taken]
        records = await self._reader.read_candidates(scope.tenant, fresh) if fresh else {}
        found = []
        for memory_id, count in shared:
            if memory_id not in records:
                continue
            memory = records[memory_id][0]
            if not in_scope(memory, scope, respect_tags=request.expand_respect_tags):
                continue
            candidate = Candidate(memory_id, memory=memory, via="entity_expansion", relation=count / top)
            candidate.expanded_from_entity = next((n for n in entity_names(memory) if n in seed_entities), None)
            found.append(candidate)
        return found, seed_entities

    async def added(
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
            score(candidate, request, self._policy, weights)
        passed = await self._state.apply(request.scope.tenant, found, request.scope, debug)
        added, removed = append_new(results, order(passed, "score"))
        return added[: request.expansion_limit], removed
