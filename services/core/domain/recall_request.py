"""A ranked recall's request, pure: the policy (every number, from
settings), the scope (which memories are candidates at all), and the
validation and defaults of the raw parameters (INVALID_ARGUMENT names the
field)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from services.core.domain.context_hints import ContextProfile, context_profile
from services.core.domain.decompose import DecomposePolicy, decompose
from services.core.domain.drafts import check_tag_limits
from services.core.domain.errors import InvalidArgument
from services.core.domain.ids import validate_memory_id
from services.core.domain.limits import Limits
from services.core.domain.model import Memory
from services.core.domain.recall_text import tokens
from services.core.domain.timewindow import Window
from services.core.domain.trust import VISIBLE_BY_DEFAULT, parse_trust_states, visible
from services.core.domain.values import finite_number

SORTS = ("score", "time_desc", "time_asc", "updated_desc", "updated_asc")
INTENTS = ("recall", "browse")
TAG_MODES = ("any", "all")
TAG_MATCHES = ("prefix", "exact")


@dataclass(frozen=True, slots=True)
class RecallPolicy:
    """The numbers behind ranked recall. No defaults: RecallSettings.policy fills every one, so the
    settings are the one source of each number."""

    default_limit: int
    max_limit: int
    candidate_multiplier: int
    candidate_min: int
    candidate_cap: int
    #: The least number of pooled candidates read from the graph and scored (the shortlist).
    shortlist_min: int
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
    keyword_max_df: int  # ... and at most this many, however large the corpus
    keyword_candidates: int
    keyword_scan: int
    bm25_k1: float
    bm25_b: float
    #: The related-words component: the least cosine of a related word, and how many a question word brings.
    related_threshold: float
    related_per_word: int
    max_queries: int  # queries of one recall (query and queries together)
    max_query_words: int  # words of one query
    max_priority_ids: int
    adaptive_floor: bool  # the adaptive_floor default
    adaptive_floor_min_results: int  # the floor looks at rankings longer than this
    adaptive_floor_gap: float  # a drop larger than this share of the best score
    context_inject_limit: int  # memories of the context's tags added as candidates
    context_keyword_score: float  # the context component of a context keyword in the content
    decompose: DecomposePolicy
    related_max_depth: int  # GET /memories/{id}/related's max_depth at most
    relevance_unscored: float  # the relevance component of a memory decay has not scored
    disputed_weight: float  # the final score of a disputed memory is multiplied by this
    fiction_weight: float  # ... and of one whose factuality is FICTION by this
    #: The neighbourhood component looks at candidates written this close in time (0: off).
    neighbourhood_seconds: float
    #: ... and among them, the this-many written just before and just after it (0: every one that close).
    neighbourhood_adjacent: int
    #: The vector arm's share of each query searched without its names (domain/query_names.py; 0: off).
    nameless_query_share: float
    #: The write side's tag limits, applied to tags, exclude_tags and context_tags (None: unchecked).
    tag_limits: Limits | None

    def candidates_per_arm(self, limit: int) -> int:
        """How many candidates each arm fetches for `limit` results."""
        return min(max(limit * self.candidate_multiplier, self.candidate_min), self.candidate_cap)

    def shortlist_size(self, limit: int) -> int:
        """How many of the arms' pooled candidates are read from the graph
        and scored for `limit` results: limit x the multiplier, at least
        shortlist_min, at most the cap (the arms may fetch deeper)."""
        return min(max(limit * self.candidate_multiplier, self.shortlist_min), self.candidate_cap)

    def max_document_frequency(self, corpus_size: int) -> int:
        """Words held by more memories than this are left out of the text
        arms (stopwords of this corpus; they would cost a row per match): a
        share of the corpus, at least keyword_min_df and at most
        keyword_max_df, so that counting and searching a word costs the same
        in a corpus of a million as in one of a hundred thousand."""
        share = min(int(self.keyword_max_df_ratio * corpus_size), self.keyword_max_df)
        return max(self.keyword_min_df, share)

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
    #: The trust states shown (trust.parse_trust_states); by default all but
    #: pending_review, rejected and deprecated, in history mode too.
    trust_states: tuple[str, ...] = VISIBLE_BY_DEFAULT

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
    #: auto_decompose's queries: they widen the candidates, and only `queries` score them.
    widening: tuple[str, ...] = ()
    #: What the context hints favour (its tags and types are context_tags and context_types).
    context: ContextProfile = field(default_factory=ContextProfile)

    @property
    def has_query(self) -> bool:
        return bool(self.queries) or self.embedding is not None

    @property
    def asked(self) -> tuple[str, ...]:
        """Every query searched: the caller's, then auto_decompose's (as the reply lists them)."""
        return (*self.queries, *self.widening)

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


def _queries(
    policy: RecallPolicy, query: str, queries: Iterable[str], auto_decompose: bool
) -> tuple[tuple[str, ...], bool, tuple[str, ...]]:
    """The caller's queries (at most max_queries, each at most
    max_query_words words), whether there are several, and with
    auto_decompose a single question's supplementary queries: those only
    widen the candidates, which the question alone scores (a name alone
    matches every turn its speaker said as strongly as the question's own
    evidence, so scored on their own they ranked far worse)."""
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
        extra = tuple(q for q in dict.fromkeys(decompose(texts[0], policy.decompose)) if q != texts[0])
        if extra:
            return texts, True, extra
    return texts, multi, ()


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
    trust_states: Iterable[str] = (),
) -> RecallRequest:
    """Validate and default every parameter (INVALID_ARGUMENT names the field)."""
    tags, exclude_tags, context_tags = tuple(tags), tuple(exclude_tags), tuple(context_tags)  # read twice below
    if policy.tag_limits is not None:  # the write side's tag limits, for whoever calls (the gateway checks too)
        for field_name, values in (("tags", tags), ("exclude_tags", exclude_tags), ("context_tags", context_tags)):
            check_tag_limits(list(clean_tags(values)), policy.tag_limits, field_name)
    texts, multi, widening = _queries(policy, query, queries, auto_decompose)
    limit = clamp_limit(limit, policy.default_limit, policy.max_limit)
    profile = context_profile(
        tags=clean_tags(context_tags), types=context_types, language=language, context=context,
        active_path=active_path, query=" ".join(texts[:1]),
    )  # fmt: skip
    embedding = embedding or None  # an empty vector is no query
    if min_score is not None:
        finite_number(min_score, "min_score")
    if recency_bias is not None and finite_number(recency_bias, "recency_bias") < 0:
        raise InvalidArgument("INVALID_ARGUMENT", "'recency_bias' must be a number >= 0", field="recency_bias")
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
        trust_states=parse_trust_states(trust_states),
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
        widening=widening,
        context=profile,
    )


def in_scope(memory: Memory, scope: Scope, *, respect_tags: bool = True) -> bool:
    """Whether a memory reached by expansion is inside the caller's tag
    filters and time window (the arms apply the same rules in their stores);
    without `respect_tags`, only exclude_tags of the tag filters apply."""
    if memory.tenant != scope.tenant or memory.archived:
        return False
    if not visible(memory.trust_state, scope.trust_states):
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


def check_dimension(vector: list[float], dimension: int) -> None:
    """A caller's embedding must have the index's dimension (INVALID_ARGUMENT naming `embedding`)."""
    if len(vector) != dimension:
        raise InvalidArgument(
            "EMBEDDING_DIMENSION_MISMATCH",
            f"'embedding' has {len(vector)} dimensions; expected {dimension}",
            field="embedding",
        )
