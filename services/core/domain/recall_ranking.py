"""Ranked recall's ranking, pure: the candidates the arms find, merged by
id, shortlisted, scored by the weighted components, de-duplicated by
content, ordered and diversified over sources; and the stand-in the state
pass puts in a superseded candidate's place."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from services.core.domain.factuality import FICTION
from services.core.domain.model import Memory
from services.core.domain.recall_context import Timed, neighbourhood, speaker_named
from services.core.domain.recall_request import RecallPolicy, RecallRequest
from services.core.domain.recall_text import all_words, tokens
from services.core.domain.tombstones import normalise_content
from services.core.domain.trust import TrustState

#: Score components, in the order score_components reports them.
COMPONENTS = (
    "vector", "keyword", "metadata", "tag", "exact", "relation", "importance", "confidence", "recency", "trust",
    "context", "relevance", "speaker", "neighbourhood", "related",
)  # fmt: skip
#: The arms that find candidates by the query (match_type is the strongest of these).
ARMS = ("vector", "keyword", "metadata", "tag")
#: How expansion brings a candidate (its match_type).
EXPANSIONS = ("relation", "entity_expansion")


@dataclass(slots=True)
class Candidate:
    """One memory found by one or more arms, with what each arm scored."""

    id: str
    arms: dict[str, float] = field(default_factory=dict)
    memory: Memory | None = None
    relation: float = 0.0
    via: str | None = None  # how a non-arm candidate came: priority, relation, entity, recent
    components: dict[str, float] = field(default_factory=dict)
    final: float = 0.0
    state_replaces: str | None = None
    deduped_from: list[str] = field(default_factory=list)
    #: The arms' own scores before normalisation (the vector arm's cosine).
    raw: dict[str, float] = field(default_factory=dict)
    #: Which of the request's queries (by index) an arm found it by.
    queries: set[int] = field(default_factory=set)
    #: Expansion: the edges that brought it (type, strength, the seed's id), or the entity it shares.
    edges: list[tuple[str, float, str]] = field(default_factory=list)
    expanded_from_entity: str | None = None
    #: Found by scope_fallback, outside the caller's tags.
    outside_tag_scope: bool = False
    #: The related-words component (services/core/domain/related_words.py), set before scoring.
    related: float = 0.0

    def add(self, arm: str, score: float, raw: float | None = None, query: int | None = None) -> None:
        if query is not None:
            self.queries.add(query)
        if raw is not None and raw > self.raw.get(arm, -math.inf):
            self.raw[arm] = raw
        if score > self.arms.get(arm, -math.inf):
            self.arms[arm] = score

    @property
    def hydrated(self) -> Memory:
        """The memory, read from the graph (every candidate past hydration has one)."""
        if self.memory is None:
            raise ValueError(f"candidate {self.id} has not been read from the graph")
        return self.memory

    @property
    def match_type(self) -> str:
        if self.state_replaces:
            return "state_replacement"
        if self.via in ("priority",) or not self.arms:
            return self.via or "recent"
        return max(self.arms, key=lambda arm: (self.arms[arm], -ARMS.index(arm)))

    @property
    def match_score(self) -> float:
        """The matching arm's own score (a cosine for the vector arm)."""
        if self.arms:
            arm = self.match_type if self.match_type in self.arms else max(self.arms, key=self.arms.__getitem__)
            return self.raw.get(arm, self.arms[arm])
        return self.relation if self.via in EXPANSIONS else self.final


def merge(
    pool: dict[str, Candidate],
    arm: str,
    hits: Iterable[tuple[str, float]],
    *,
    normalise: bool = False,
    query: int | None = None,
) -> None:
    """Add an arm's (id, score) hits to the pool; with `normalise`, scores are
    divided by the arm's best, so the arm's top hit scores 1 (BM25 and the
    full-text engine have no fixed scale; the vector arm keeps its cosine,
    which measured better on LoCoMo dev); the raw score is kept too."""
    hits = list(hits)
    if not hits:
        return
    top = max(score for _, score in hits) if normalise else 1.0
    for memory_id, score in hits:
        value = score / top if normalise and top > 0 else score
        # A candidate is made only for an id not pooled yet (setdefault would make one for every hit).
        candidate = pool.get(memory_id)
        if candidate is None:
            candidate = pool[memory_id] = Candidate(memory_id)
        candidate.add(arm, max(0.0, min(1.0, value)), raw=score, query=query)


def shortlist(pool: Mapping[str, Candidate], weights: Mapping[str, float], size: int) -> list[Candidate]:
    """The candidates worth reading from the graph: the best `size` by their
    weighted arm scores (what is known before hydration), plus every
    candidate that did not come from an arm (priority, listing)."""

    def preliminary(c: Candidate) -> float:
        return sum(weights.get(arm, 0.0) * value for arm, value in c.arms.items())

    found = [c for c in pool.values() if c.arms]
    rest = [c for c in pool.values() if not c.arms or c.via == "priority"]
    best = sorted(found, key=lambda c: (-preliminary(c), c.id))[:size]
    return list({c.id: c for c in [*best, *rest]}.values())


def recency(memory: Memory, at: datetime, rate: float) -> float:
    """exp(-rate × age in days) of the memory's timestamp; 1.0 for the future."""
    age_days = max(0.0, (at - memory.timestamp).total_seconds() / 86_400.0)
    return math.exp(-rate * age_days)


def relevance(memory: Memory, policy: RecallPolicy) -> float:
    """Consolidation's decayed relevance_score of the memory; a memory no
    decay pass has scored yet (new since the last pass, or consolidation
    off) gets the policy's `relevance_unscored` (1.0 by default: nothing
    has faded yet, the top of decay's range)."""
    if memory.relevance_score is None:
        return policy.relevance_unscored
    return max(0.0, min(1.0, memory.relevance_score))


def _tag_words(memory: Memory) -> set[str]:
    return {w for tag in memory.tags for w in all_words(tag)}


def _context(memory: Memory, request: RecallRequest, policy: RecallPolicy) -> float:
    if memory.type.lower() in request.context_types:
        return 1.0
    prefixes = set(memory.tag_prefixes)
    if any(t in prefixes for t in request.context_tags):
        return 1.0
    keywords = request.context.keywords
    if keywords and set(keywords) & set(all_words(memory.content)):
        return policy.context_keyword_score
    return 0.0


def weights_for(policy: RecallPolicy, request: RecallRequest) -> dict[str, float]:
    """The intent's weight set; recency_bias, when sent, is the recency weight."""
    weights = dict(policy.weights[request.intent])
    if request.recency_bias is not None:
        weights["recency"] = request.recency_bias
    return weights


def score(candidate: Candidate, request: RecallRequest, policy: RecallPolicy, weights: Mapping[str, float]) -> None:
    """Fill components and the final score of a hydrated candidate."""
    memory = candidate.memory
    assert memory is not None  # noqa: S101  narrows the type: only hydrated candidates are scored
    query_words = {w for q in request.queries for w in tokens(q)}
    content = " ".join(memory.content.lower().split())
    exact = 0.0
    if request.queries and any(" ".join(q.lower().split()) in content for q in request.queries):
        exact = 1.0
    tag = len(query_words & _tag_words(memory)) / len(query_words) if query_words else 0.0
    components = {
        "vector": candidate.arms.get("vector", 0.0),
        "keyword": candidate.arms.get("keyword", 0.0),
        "metadata": candidate.arms.get("metadata", 0.0),
        "tag": max(tag, candidate.arms.get("tag", 0.0)),
        "exact": exact,
        "relation": candidate.relation,
        "importance": memory.importance,
        "confidence": memory.confidence,
        "recency": recency(memory, request.scope.at, policy.recency_decay_rate),
        "trust": policy.trust(memory),
        "context": _context(memory, request, policy),
        "relevance": relevance(memory, policy),
        # Only a weighed speaker is looked for (its weight is 0 in browse).
        "speaker": speaker_named(memory, query_words) if weights.get("speaker", 0.0) > 0 else 0.0,
        "neighbourhood": 0.0,  # set by with_neighbourhood, once every candidate is scored
        "related": candidate.related,
    }
    candidate.components = {name: round(components[name], 6) for name in COMPONENTS}
    candidate.final = sum(weights.get(name, 0.0) * value for name, value in components.items())
    candidate.final *= trust_weight(memory, policy)


def with_neighbourhood(
    candidates: list[Candidate], policy: RecallPolicy, weights: Mapping[str, float], *, search: bool
) -> None:
    """The neighbourhood component of scored candidates (recall_context):
    the best first-pass score (trust weight included) among the candidates
    written within policy.neighbourhood_seconds of each (and, with
    policy.neighbourhood_adjacent, at most that many places from it). The final score
    moves from the first-pass one towards it, (own + w·t × best) / (1 + w·t)
    with t the memory's own trust weight: the best memory of its
    neighbourhood keeps its score, no score grows past the best one near it
    (min_score keeps its meaning, and a disputed best is not overtaken by
    what it lifts), and a disputed memory is lifted less. Only a query's
    recall (`search`) has first-pass scores worth spreading; 0 weight or
    seconds leaves the scores as they are."""
    weight = weights.get("neighbourhood", 0.0)
    if not search or weight <= 0 or policy.neighbourhood_seconds <= 0:
        return
    scored = [c for c in candidates if c.memory is not None]
    timed = [Timed(c.hydrated.timestamp.timestamp(), c.final, c.hydrated.recorded_at.timestamp()) for c in scored]
    best = neighbourhood(timed, policy.neighbourhood_seconds, policy.neighbourhood_adjacent)
    for candidate, near in zip(scored, best, strict=True):
        lift = weight * trust_weight(candidate.hydrated, policy)
        candidate.components["neighbourhood"] = round(near, 6)
        candidate.final = (candidate.final + lift * near) / (1.0 + lift)


def trust_weight(memory: Memory, policy: RecallPolicy) -> float:
    """The multiplier of a memory's final score: a disputed memory and one
    whose factuality is FICTION rank below an otherwise equal one
    (RECALL_DISPUTED_WEIGHT, RECALL_FICTION_WEIGHT)."""
    weight = policy.disputed_weight if memory.trust_state == TrustState.DISPUTED else 1.0
    factuality = memory.factuality
    if isinstance(factuality, dict) and factuality.get("label") == FICTION:
        weight *= policy.fiction_weight
    return weight


def fingerprint(content: str) -> str:
    """Content identity for de-duplication: case and whitespace ignored."""
    return hashlib.sha1(normalise_content(content).encode()).hexdigest()  # noqa: S324  a de-duplication fingerprint, not a security hash


def dedupe(candidates: list[Candidate]) -> list[Candidate]:
    """One result per id and per content fingerprint: the best-scored one
    stays and lists the ids merged into it (deduped_from)."""
    kept: dict[str, Candidate] = {}
    seen_ids: set[str] = set()
    for candidate in sorted(candidates, key=lambda c: -c.final):
        if candidate.memory is None or candidate.memory.id in seen_ids:
            continue
        seen_ids.add(candidate.memory.id)
        key = fingerprint(candidate.memory.content)
        if key in kept:
            kept[key].deduped_from.append(candidate.memory.id)
            continue
        kept[key] = candidate
    return list(kept.values())


def order(candidates: list[Candidate], sort: str) -> list[Candidate]:
    """Sort by score (ties: importance, newer, id) or by time."""
    if sort == "score":
        return sorted(
            candidates, key=lambda c: (-c.final, -c.hydrated.importance, -c.hydrated.timestamp.timestamp(), c.id)
        )
    attribute = "timestamp" if sort.startswith("time") else "updated_at"
    newest_first = sort.endswith("desc")
    return sorted(candidates, key=lambda c: (getattr(c.hydrated, attribute).timestamp(), c.id), reverse=newest_first)


def source_of(candidate: Candidate) -> str:
    metadata = candidate.memory.metadata if candidate.memory else {}
    source = metadata.get("source") if isinstance(metadata, dict) else None
    return source.lower() if isinstance(source, str) and source else "manual"


def diversify(ranked: list[Candidate], factor: float, limit: int) -> list[Candidate]:
    """Greedy interleaved diversity over sources: each slot takes
    the best candidate of the least-represented source if its score is
    within `factor` of the best remaining, else the best remaining.
    0 keeps the ranking as it is."""
    if factor <= 0 or len(ranked) <= 1:
        return ranked[:limit]
    remaining = list(ranked)
    chosen: list[Candidate] = []
    counts: dict[str, int] = {}
    while remaining and len(chosen) < limit:
        best = remaining[0]
        fewest = min(counts.get(source_of(c), 0) for c in remaining)
        pick = next(c for c in remaining if counts.get(source_of(c), 0) == fewest)
        if best.final - pick.final > factor:
            pick = best
        remaining.remove(pick)
        chosen.append(pick)
        counts[source_of(pick)] = counts.get(source_of(pick), 0) + 1
    return chosen


def stand_in(candidate: Candidate, head: Memory) -> Candidate:
    """The head of a chain in a superseded candidate's place and score."""
    return replace(candidate, id=head.id, memory=head, state_replaces=candidate.id, deduped_from=[])
