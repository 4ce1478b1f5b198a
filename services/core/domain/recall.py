"""Ranked recall, pure: parameters, candidate scope, scoring, merging,
de-duplication, diversity and ordering. The recall handlers run the arms
(vector, keyword, metadata, tag) through ports and hand the candidates here.

Every weight and limit comes from a RecallPolicy built from settings.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from services.core.domain.context_hints import ContextProfile, context_profile
from services.core.domain.decompose import DecomposePolicy, decompose
from services.core.domain.errors import InvalidArgument
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import Memory
from services.core.domain.timewindow import Window

#: Score components, in the order score_components reports them.
COMPONENTS = (
    "vector", "keyword", "metadata", "tag", "exact", "relation", "importance", "confidence", "recency", "trust",
    "context",
)  # fmt: skip
#: The arms that find candidates by the query (match_type is the strongest of these).
ARMS = ("vector", "keyword", "metadata", "tag")
SORTS = ("score", "time_desc", "time_asc", "updated_desc", "updated_asc")
INTENTS = ("recall", "browse")
TAG_MODES = ("any", "all")
TAG_MATCHES = ("prefix", "exact")

_TOKEN = re.compile(r"[a-z0-9]+")
#: Words that carry no signal for the tag and exact-match components.
_STOPWORD_TEXT = """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric words without stopwords."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match plural and tense variants
    (memory/memories, database/databases, cache/cached/caching, class/classes).
    Cached: BM25 stems every word of a couple of hundred candidates per query,
    and words repeat."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            if suffix in ("ies", "ied"):
                return stem(word[: -len(suffix)] + "y")
            return word[: -len(suffix)]
    # A final e goes, as it does before -es, -ed and -ing.
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def common_words(texts: Iterable[str], count: int) -> list[str]:
    """At most `count` words found in the most texts (two at least), commonest
    first: in a sample of the corpus, the words whose document frequencies
    cost the most to count when a query first names them."""
    found: dict[str, int] = {}
    for text in texts:
        for word in set(tokens(text)):
            found[word] = found.get(word, 0) + 1
    return [w for w in sorted(found, key=lambda w: (-found[w], w)) if found[w] > 1][:count]


@functools.lru_cache(maxsize=1 << 14)
def text_stems(text: str) -> tuple[str, ...]:
    """The stemmed words of a text, cached: BM25 re-reads the texts of the
    keyword arm's candidates on every query, and at scale the same texts
    come back for query after query."""
    return tuple(stem(t) for t in tokens(text))


@dataclass(frozen=True, slots=True)
class TextHit:
    """A full-text arm's hit: the engine's score and the text it matched."""

    id: str
    score: float
    text: str = ""


def bm25(
    query_words: Iterable[str],
    texts: Mapping[str, str],
    document_frequency: Mapping[str, int],
    corpus_size: int,
    *,
    k1: float,
    b: float,
) -> dict[str, float]:
    """Okapi BM25 of each text for the query: term frequencies from the
    texts (light stemming), document frequencies from the full-text index
    (corpus-wide), Lucene's non-negative IDF, and the texts' mean length
    standing in for the corpus's. The engine's own scores rank poorly, so
    the keyword arm re-ranks its candidates with this."""
    words = list(dict.fromkeys(query_words))
    if not words or not texts:
        return {}
    terms = {i: text_stems(text) for i, text in texts.items()}
    average = sum(len(t) for t in terms.values()) / len(terms) or 1.0
    n = max(corpus_size, max(document_frequency.values(), default=0), 1)
    weights = {}
    for word in words:
        df = min(document_frequency.get(word, 0), n)
        weights[stem(word)] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    scores = {}
    for memory_id, stems in terms.items():
        length = len(stems)
        total = 0.0
        for word_stem, idf in weights.items():
            tf = stems.count(word_stem)
            if tf:
                total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))
        scores[memory_id] = total
    return scores


#: How far past the document-frequency bound (max_df) words are still told
#: apart: when every query word is over the bound, the rarest is searched if
#: within this many times it, and BM25 counts frequencies this far (past it a
#: word's weight is small anyway).
DF_REACH = 10


def df_count_cap(max_df: int) -> int:
    """Where counting a word's document frequency can stop, for both rules above."""
    return DF_REACH * max_df + 1


@dataclass(frozen=True, slots=True)
class RecallPolicy:
    """The numbers behind ranked recall, from settings."""

    default_limit: int
    max_limit: int
    candidate_multiplier: int
    candidate_min: int
    candidate_cap: int
    relation_limit: int
    expansion_limit: int
    expand_min_strength: float
    expand_min_importance: float
    max_hops: int
    recency_decay_rate: float
    diversity_factor: float
    weights: Mapping[str, Mapping[str, float]]
    source_trust: Mapping[str, float]
    default_trust: float
    keyword_max_df_ratio: float
    keyword_min_df: int
    keyword_candidates: int
    keyword_scan: int
    bm25_k1: float
    bm25_b: float
    max_queries: int = 10  # queries of one recall (query and queries together)
    max_query_words: int = 64  # words of one query
    max_priority_ids: int = 100
    adaptive_floor: bool = False  # the adaptive_floor default
    adaptive_floor_min_results: int = 3  # the floor looks at rankings longer than this
    adaptive_floor_gap: float = 0.25  # a drop larger than this share of the best score
    context_inject_limit: int = 3  # memories of the context's tags added as candidates
    context_keyword_score: float = 0.5  # the context component of a context keyword in the content
    decompose: DecomposePolicy = field(default_factory=DecomposePolicy)
    related_max_depth: int = 3  # GET /memories/{id}/related's max_depth at most

    def candidates_per_arm(self, limit: int) -> int:
        """How many candidates each arm fetches for `limit` results."""
        return min(max(limit * self.candidate_multiplier, self.candidate_min), self.candidate_cap)

    def max_document_frequency(self, corpus_size: int) -> int:
        """Words held by more memories than this are left out of the text
        arms (stopwords of this corpus; they would cost a row per match)."""
        return max(self.keyword_min_df, int(self.keyword_max_df_ratio * corpus_size))

    def trust(self, memory: Memory) -> float:
        source = memory.metadata.get("source") if isinstance(memory.metadata, dict) else None
        if isinstance(source, str):
            return self.source_trust.get(source.lower(), self.default_trust)
        return self.default_trust


@dataclass(frozen=True, slots=True)
class Scope:
    """Which memories are candidates at all: the caller's tenant, the tag
    filters, the time window and, unless in history mode, the state at
    `at` (not yet valid and expired withheld; superseded kept for the pass)."""

    tenant: str
    at: datetime
    history: bool = False
    as_of: datetime | None = None
    tags: tuple[str, ...] = ()
    tag_mode: str = "any"
    tag_match: str = "prefix"
    exclude_tags: tuple[str, ...] = ()
    window: Window = field(default_factory=Window)

    @property
    def current_at(self) -> datetime | None:
        return None if self.history else self.at


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """Validated parameters of one ranked recall."""

    queries: tuple[str, ...]
    embedding: list[float] | None
    limit: int
    scope: Scope
    sort: str
    state_debug: bool
    min_score: float | None
    priority_ids: tuple[str, ...]
    context_tags: tuple[str, ...]
    context_types: tuple[str, ...]
    expand_relations: bool
    relation_limit: int
    expansion_limit: int
    expand_min_strength: float
    expand_min_importance: float
    expand_entities: bool
    recency_bias: float | None
    intent: str
    diversity_factor: float
    per_query_limit: int = 0  # results one query contributes at most (0: limit)
    scope_fallback: bool = False
    expand_respect_tags: bool = False
    adaptive_floor: bool = False
    multi: bool = False  # several queries were asked (or made by decomposition)
    #: What the context hints favour (its tags and types are context_tags and context_types).
    context: ContextProfile = field(default_factory=ContextProfile)

    @property
    def has_query(self) -> bool:
        return bool(self.queries) or self.embedding is not None

    @property
    def keywords(self) -> tuple[str, ...]:
        """The words of the queries the text arms search, as AutoMem echoes them for one query."""
        return tuple(dict.fromkeys(w for q in self.queries for w in tokens(q)))


def _choice(value: str | None, allowed: tuple[str, ...], default: str, name: str) -> str:
    text = (value or "").strip().lower()
    if not text:
        return default
    if text not in allowed:
        raise InvalidArgument(
            "INVALID_ARGUMENT", f"{name} must be one of {', '.join(allowed)}, not {value!r}", field=name
        )
    return text


def _fraction(value: float | None, name: str, default: float) -> float:
    if value is None:
        return default
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument("INVALID_ARGUMENT", f"{name} must be between 0 and 1", field=name)
    return float(value)


def clean_tags(values: Iterable[str]) -> tuple[str, ...]:
    """Lowercase, trimmed, without blanks or repeats (tag matches ignore case)."""
    seen: dict[str, None] = {}
    for value in values:
        for part in value.split(","):
            part = part.strip().lower()
            if part:
                seen.setdefault(part, None)
    return tuple(seen)


def clamp_limit(limit: int | None, default: int, maximum: int) -> int:
    """Bad values (missing, zero, negative) fall back to the default; more
    than the maximum is the maximum."""
    if limit is None or limit <= 0:
        return default
    return min(limit, maximum)


def _queries(policy: RecallPolicy, query: str, queries: Iterable[str], auto_decompose: bool) -> tuple[tuple, bool]:
    """The queries to run, and whether there are several: the caller's
    (at most max_queries, each at most max_query_words words), then with
    auto_decompose a single question's supplementary queries."""
    asked = [("query", query.strip())] if query and query.strip() else []
    asked += [("queries", q.strip()) for q in queries if q and q.strip()]
    for name, text in asked:
        if len(text.split()) > policy.max_query_words:
            raise InvalidArgument(
                "QUERY_TOO_LONG", f"'{name}' has more than {policy.max_query_words} words", field=name
            )
    texts = tuple(dict.fromkeys(text for _, text in asked))
    if len(texts) > policy.max_queries:
        raise InvalidArgument(
            "TOO_MANY_QUERIES", f"'queries' holds more than {policy.max_queries} queries", field="queries"
        )
    multi = any(name == "queries" for name, _ in asked)
    if auto_decompose and len(texts) == 1 and not multi:
        extra = decompose(texts[0], policy.decompose)
        if extra:
            return (*texts, *dict.fromkeys(extra)), True
    return texts, multi


def _priority_ids(policy: RecallPolicy, values: Iterable[str]) -> tuple[str, ...]:
    ids = tuple(dict.fromkeys(validate_memory_id(v, "priority_ids") for v in values if v and v.strip()))
    if len(ids) > policy.max_priority_ids:
        raise InvalidArgument(
            "TOO_MANY_PRIORITY_IDS", f"'priority_ids' holds more than {policy.max_priority_ids} ids",
            field="priority_ids",
        )  # fmt: skip
    return ids


def build_request(
    policy: RecallPolicy,
    *,
    tenant: str,
    now: datetime,
    history: bool,
    as_of: datetime | None,
    window: Window,
    query: str = "",
    queries: Iterable[str] = (),
    embedding: list[float] | None = None,
    limit: int | None = None,
    tags: Iterable[str] = (),
    tag_mode: str | None = None,
    tag_match: str | None = None,
    exclude_tags: Iterable[str] = (),
    sort: str | None = None,
    state_debug: bool = False,
    min_score: float | None = None,
    priority_ids: Iterable[str] = (),
    context_tags: Iterable[str] = (),
    context_types: Iterable[str] = (),
    expand_relations: bool = False,
    relation_limit: int | None = None,
    expansion_limit: int | None = None,
    expand_min_strength: float | None = None,
    expand_min_importance: float | None = None,
    expand_entities: bool = False,
    recency_bias: float | None = None,
    intent: str | None = None,
    diversity_factor: float | None = None,
    auto_decompose: bool = False,
    per_query_limit: int | None = None,
    scope_fallback: bool = False,
    expand_respect_tags: bool = False,
    adaptive_floor: bool | None = None,
    context: str = "",
    language: str = "",
    active_path: str = "",
) -> RecallRequest:
    """Validate and default every parameter (INVALID_ARGUMENT names the field)."""
    texts, multi = _queries(policy, query, queries, auto_decompose)
    limit = clamp_limit(limit, policy.default_limit, policy.max_limit)
    profile = context_profile(
        tags=clean_tags(context_tags), types=context_types, language=language, context=context,
        active_path=active_path, query=" ".join(texts[:1]),
    )  # fmt: skip
    embedding = embedding or None  # an empty vector is no query
    if min_score is not None and not math.isfinite(min_score):
        raise InvalidArgument("INVALID_ARGUMENT", "min_score must be a number", field="min_score")
    if recency_bias is not None and (not math.isfinite(recency_bias) or recency_bias < 0):
        raise InvalidArgument("INVALID_ARGUMENT", "recency_bias must be a number >= 0", field="recency_bias")
    has_query = bool(texts) or embedding is not None
    default_sort = "time_desc" if not has_query and not window.empty else "score"
    scope = Scope(
        tenant=tenant,
        at=as_of or now,
        history=history,
        as_of=as_of,
        tags=clean_tags(tags),
        tag_mode=_choice(tag_mode, TAG_MODES, "any", "tag_mode"),
        tag_match=_choice(tag_match, TAG_MATCHES, "prefix", "tag_match"),
        exclude_tags=clean_tags(exclude_tags),
        window=window,
    )
    return RecallRequest(
        queries=texts,
        embedding=embedding,
        limit=limit,
        scope=scope,
        sort=_choice(sort, SORTS, default_sort, "sort"),
        state_debug=state_debug,
        min_score=min_score,
        priority_ids=_priority_ids(policy, priority_ids),
        context_tags=clean_tags(profile.tags),
        context_types=profile.types,
        expand_relations=expand_relations,
        relation_limit=clamp_limit(relation_limit, policy.relation_limit, policy.max_limit),
        expansion_limit=clamp_limit(expansion_limit, policy.expansion_limit, policy.max_limit),
        expand_min_strength=_fraction(expand_min_strength, "expand_min_strength", policy.expand_min_strength),
        expand_min_importance=_fraction(expand_min_importance, "expand_min_importance", policy.expand_min_importance),
        expand_entities=expand_entities,
        recency_bias=recency_bias,
        intent=_choice(intent, INTENTS, "recall", "intent"),
        diversity_factor=_fraction(diversity_factor, "diversity_factor", policy.diversity_factor),
        per_query_limit=clamp_limit(per_query_limit, limit, policy.max_limit),
        scope_fallback=scope_fallback,
        expand_respect_tags=expand_respect_tags,
        adaptive_floor=policy.adaptive_floor if adaptive_floor is None else adaptive_floor,
        multi=multi,
        context=profile,
    )


# Candidates and scores -------------------------------------------------------------------------------------


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

    def add(self, arm: str, score: float, raw: float | None = None, query: int | None = None) -> None:
        if query is not None:
            self.queries.add(query)
        if raw is not None and raw > self.raw.get(arm, -math.inf):
            self.raw[arm] = raw
        if score > self.arms.get(arm, -math.inf):
            self.arms[arm] = score

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
        pool.setdefault(memory_id, Candidate(memory_id)).add(arm, max(0.0, min(1.0, value)), raw=score, query=query)


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
    """exp(-rate × age in days) of the memory's timestamp (spec 004); 1.0 for the future."""
    age_days = max(0.0, (at - memory.timestamp).total_seconds() / 86_400.0)
    return math.exp(-rate * age_days)


def _tag_words(memory: Memory) -> set[str]:
    return {w for tag in memory.tags for w in _TOKEN.findall(tag.lower())}


def _context(memory: Memory, request: RecallRequest, policy: RecallPolicy) -> float:
    if memory.type.lower() in request.context_types:
        return 1.0
    prefixes = set(memory.tag_prefixes)
    if any(t in prefixes for t in request.context_tags):
        return 1.0
    keywords = request.context.keywords
    if keywords and set(keywords) & set(_TOKEN.findall(memory.content.lower())):
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
    assert memory is not None
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
    }
    candidate.components = {name: round(components[name], 6) for name in COMPONENTS}
    candidate.final = sum(weights.get(name, 0.0) * value for name, value in components.items())


def fingerprint(content: str) -> str:
    """Content identity for de-duplication: case and whitespace ignored."""
    return hashlib.sha1(" ".join(content.lower().split()).encode()).hexdigest()


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
        return sorted(candidates, key=lambda c: (-c.final, -c.memory.importance, -c.memory.timestamp.timestamp(), c.id))
    attribute = "timestamp" if sort.startswith("time") else "updated_at"
    newest_first = sort.endswith("desc")
    return sorted(candidates, key=lambda c: (getattr(c.memory, attribute).timestamp(), c.id), reverse=newest_first)


def source_of(candidate: Candidate) -> str:
    metadata = candidate.memory.metadata if candidate.memory else {}
    source = metadata.get("source") if isinstance(metadata, dict) else None
    return source.lower() if isinstance(source, str) and source else "manual"


def diversify(ranked: list[Candidate], factor: float, limit: int) -> list[Candidate]:
    """Greedy interleaved diversity over sources (spec 004): each slot takes
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


def in_scope(memory: Memory, scope: Scope, *, respect_tags: bool = True) -> bool:
    """Whether a memory reached by expansion is inside the caller's tag
    filters and time window (the arms apply the same rules in their stores);
    without `respect_tags`, only exclude_tags of the tag filters apply."""
    if memory.tenant != scope.tenant or memory.archived:
        return False
    if scope.as_of is not None and memory.recorded_at > scope.as_of:
        return False
    window = scope.window
    if window.start is not None and memory.timestamp < window.start:
        return False
    if window.end is not None and memory.timestamp >= window.end:
        return False
    have = {t.lower() for t in memory.tags} if scope.tag_match == "exact" else set(memory.tag_prefixes)
    if scope.tags and respect_tags:
        matched = [t in have for t in scope.tags]
        if not (all(matched) if scope.tag_mode == "all" else any(matched)):
            return False
    return not any(t in have for t in scope.exclude_tags)
