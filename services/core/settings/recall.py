"""Recall's settings: limits, candidate pools, scoring, the text arms' statistics, reads, watches."""

from __future__ import annotations

from pydantic import Field, model_validator

from services.core.domain import recall_text
from services.core.domain.decompose import DecomposePolicy
from services.core.domain.fresh_vectors import FreshPolicy
from services.core.domain.limits import Limits
from services.core.domain.recall_request import RecallPolicy
from services.core.settings.base import Group


class RecallSettings(Group):
    """Recall: ranked recall (docs/recall.md), its reads, graph views, exports, watches and readiness."""

    # Ranked recall and reads (docs/recall.md): limits, candidate pools, scoring.
    recall_default_limit: int = 5  # results of GET /recall without (or with a bad) limit
    recall_relation_limit: int = 5  # relations shown with each result (the strongest)
    recall_max_limit: int = 100  # the largest limit GET /recall takes
    recall_candidate_multiplier: int = 3  # each arm fetches limit x this ...
    recall_candidate_min: int = 100  # ... but at least this many ...
    recall_candidate_cap: int = 250  # ... and at most this many
    # Of the arms' pooled candidates, at least this many (or limit x the multiplier, within the cap)
    # are read from the graph and scored (the shortlist, by their arm scores); a recall without a
    # query lists as many.
    recall_shortlist_min: int = Field(default=30, ge=1)
    # The second stage (services/core/domain/rerank.py): a query's best this-many
    # candidates of the first stage are reordered by a learned model (0 or 1: off) ...
    recall_rerank_depth: int = Field(default=50, ge=0)
    # ... read from this file ("": the model shipped in services/recall/rerank_model.json,
    # fitted by benchmarks/quality_rerank.py); one that cannot be read leaves it off.
    recall_rerank_model: str = ""
    recall_expansion_limit: int = 10  # memories each expansion adds at most (expansion_limit)
    recall_expand_min_strength: float = 0.0  # defaults of expand_min_strength ...
    recall_expand_min_importance: float = 0.0  # ... and expand_min_importance
    recall_state_max_hops: int = 5  # edges the current-state pass walks to find a chain's head
    # Request limits of one recall: queries (query and queries together), words of one query, priority_ids.
    recall_max_queries: int = Field(default=10, ge=1)
    recall_max_query_words: int = Field(default=64, ge=1)
    recall_max_priority_ids: int = Field(default=100, ge=1)
    # adaptive_floor (its default when not sent): past the first this-many results, a drop
    # between two scores larger than this share of the best leaves out what is below it.
    recall_adaptive_floor: bool = False
    recall_adaptive_floor_min_results: int = Field(default=3, ge=1)
    recall_adaptive_floor_gap: float = Field(default=0.25, ge=0)
    # Context hints (context, language, active_path): memories with their tags
    # added as candidates, and the context component of a context keyword in the content.
    recall_context_inject_limit: int = Field(default=3, ge=0)
    recall_context_keyword_score: float = Field(default=0.5, ge=0, le=1)
    # auto_decompose: entities searched, topics paired with each, topics read, a topic's least length.
    recall_decompose_entities: int = Field(default=2, ge=0)
    recall_decompose_topics: int = Field(default=3, ge=0)
    recall_decompose_topic_words: int = Field(default=5, ge=0)
    recall_decompose_min_topic_length: int = Field(default=4, ge=1)
    # GET /memories/{id}/related walks at most this many edges out (max_depth).
    recall_related_max_depth: int = Field(default=3, ge=1)
    recall_recency_decay_rate: float = 0.005  # recency = exp(-rate x age in days)
    recall_diversity_factor: float = 0.15  # 0 turns diversity ordering off
    # Query texts whose embeddings are kept in memory (a recall embeds two: the
    # question and its nameless twin), about 1.8 KiB each: 2 MiB at 1024.
    recall_query_cache_size: int = 1024
    # A query's texts (the question and its nameless twin) embedded side by side,
    # one a core, at most this many at once in the process (the local model; 1:
    # one text after another, one query's embedding at a time).
    recall_embed_parallel: int = Field(default=2, ge=1)
    # Fresh reads (docs/recall.md): a recall that searches by vector first waits at most this
    # long for the vectors of memories stored before it and not yet in the index (0: never);
    # only with the embedded index, where each replica's projector sees every event, and enrichment on.
    recall_fresh_wait_seconds: float = Field(default=3.0, ge=0)
    # ... but not at all when more than this many are awaited: a bulk import, more than the
    # local model embeds in about three minutes on two cores, while the recalls wait ...
    recall_fresh_max_awaited: int = Field(default=5000, ge=0)
    # ... nor when no vector has reached the tenant's index for this long (enrichment off or down).
    recall_fresh_stall_seconds: float = Field(default=10.0, gt=0)
    # Memories awaited that the process keeps in mind, every tenant together (about 100 bytes
    # each), and how long it awaits one before letting it go.
    recall_fresh_capacity: int = Field(default=100_000, ge=0)
    recall_fresh_expire_seconds: float = Field(default=600.0, gt=0)
    # The text arms leave out words held by more than this share of memories (at least recall_keyword_min_df).
    recall_keyword_max_df_ratio: float = 0.02
    recall_keyword_min_df: int = 200  # the least document frequency the share rule leaves out
    # ... and the most: past a corpus of 100,000 (at the 2 % share) a word held by more memories than this is
    # left out too. Counting and searching a word costs its matches, so without it the text arms grew with the
    # corpus: at 1M memories their p95 was 139 ms against 56 ms with this bound (25 ms at 100k).
    recall_keyword_max_df: int = Field(default=2000, ge=1)
    recall_keyword_candidates: int = 200  # the keyword arm re-ranks this many full-text matches by BM25
    # The most full-text matches a text arm reads (its cost at scale): the rarest
    # words while their matches add up to this; when every word is over the
    # share, this many matches of the rarest (FalkorTextSearch.search_text).
    recall_keyword_scan: int = Field(default=2000, ge=1)
    # BM25's stems, kept least recently used first: of words (about 0.17 KiB
    # each, 11 MiB full) and of the texts of the keyword arm's candidates (the
    # text, kept as the key, and about 0.25 KiB more: 6 MiB full of the soak's
    # 100-character texts). Every new word and text of the corpus takes a
    # place until the bound.
    recall_stem_cache_words: int = Field(default=recall_text.STEM_CACHE_WORDS, ge=1)
    recall_stem_cache_texts: int = Field(default=recall_text.STEM_CACHE_TEXTS, ge=1)
    # How long a word's counted document frequency (FalkorTextSearch) and an
    # entity's counted mentions (expand_entities: FalkorMemoryReader) are trusted.
    recall_df_cache_seconds: float = Field(default=300.0, gt=0)
    # The commonest words of a sample of the corpus have their document frequencies
    # counted ahead this often (less than recall_df_cache_seconds; 0: never).
    recall_df_warm_seconds: float = Field(default=120.0, ge=0)
    recall_df_warm_sample: int = Field(default=2000, ge=1)  # memories sampled
    # Words counted: enough that few queries count a common word on first use
    # (docs/performance.md has the figures behind the default).
    recall_df_warm_words: int = Field(default=1000, ge=1)
    # Words a counting query (each holds FalkorDB for a while), and the
    # pause between two: a recall waits behind one of them, not the pass.
    recall_df_warm_chunk: int = Field(default=25, ge=1)
    recall_df_warm_pause_seconds: float = Field(default=1.0, ge=0)
    # Document frequencies are per tenant: a pass warms the tenants that
    # recalled most recently (within recall_df_cache_seconds), at most this many.
    recall_df_warm_tenants: int = Field(default=8, ge=1)
    # A tenant's memory count (the text arms' document-frequency bound and
    # BM25's corpus size) is counted again after this long (TextArms.max_df).
    recall_corpus_count_seconds: float = Field(default=60.0, gt=0)
    recall_corpus_tenants: int = Field(default=10_000, ge=1)  # tenants whose memory count is kept in memory
    # expand_entities reads at most this many entities of each seed (the rarest),
    # skips entities mentioned by more memories than this (the stopwords of
    # entities), and reads at most this many mentions in all (FalkorMemoryReader.entity_neighbours).
    recall_entity_per_seed: int = Field(default=5, ge=1)
    recall_entity_max_mentions: int = Field(default=200, ge=2)
    recall_entity_max_reads: int = Field(default=1000, ge=1)
    # Recall records the access of what it returns (last_accessed) off the
    # request: ids are collected per tenant and written in one query a tenant
    # every recall_access_flush_ms, or as soon as recall_access_batch_size are waiting.
    recall_access_flush_ms: float = Field(default=1000.0, gt=0)
    recall_access_batch_size: int = Field(default=500, ge=1)
    # BM25 for short passages (Anserini's MS MARCO passage defaults; memories are short).
    recall_bm25_k1: float = 0.9
    recall_bm25_b: float = 0.4
    # The related-words component (services/core/domain/related_words.py): a
    # question's words stand for their neighbours among the shortlist's words
    # within this cosine (single words embedded by the local MiniLM), the
    # nearest few a word; chosen leave-one-conversation-out on LoCoMo dev
    # over five runs (benchmarks/quality_related.py, docs/performance.md).
    recall_related_threshold: float = Field(default=0.4, ge=-1.0, le=1.0)
    recall_related_per_word: int = Field(default=8, ge=0)
    # Word vectors kept by a recall process (0 turns the component off), and
    # the unseen words waiting to be embedded at most: a recall waits for its
    # question's words only (at most this many), and the shortlist's unseen
    # words are embedded in the background, 32 at a time (services/recall/
    # word_vectors.py); about 2 ms of CPU a word.
    # Each kept word costs about 1.9 KiB (384 float32 and the word), so the
    # default holds up to about 92 MiB once the corpus has shown that many
    # words (a soak's uuids: about 15,000 an hour, docs/reliability.md).
    recall_related_cache_words: int = Field(default=50_000, ge=0)
    recall_related_new_words: int = Field(default=256, ge=0)
    # Weight sets per intent over the score components (services/core/domain/recall_ranking.py COMPONENTS).
    # relevance (consolidation's decayed relevance_score) weighs 0 in both: the
    # rankings measured without it stay as they are until a weight is chosen.
    # keyword, tag, exact, speaker, neighbourhood and related of `recall` were chosen
    # leave-one-conversation-out on LoCoMo dev (`make bench-quality`, docs/performance.md).
    recall_weights: dict[str, dict[str, float]] = {
        "recall": {
            "vector": 0.40, "keyword": 0.15, "metadata": 0.01, "tag": 0.10, "exact": 0.02, "relation": 0.03,
            "importance": 0.02, "confidence": 0.0, "recency": 0.01, "trust": 0.01, "context": 0.10, "relevance": 0.0,
            "speaker": 0.20, "neighbourhood": 0.85, "related": 0.10,
        },
        "browse": {
            "vector": 0.30, "keyword": 0.10, "metadata": 0.03, "tag": 0.05, "exact": 0.02, "relation": 0.05,
            "importance": 0.15, "confidence": 0.02, "recency": 0.30, "trust": 0.03, "context": 0.10, "relevance": 0.0,
            "speaker": 0.0, "neighbourhood": 0.0, "related": 0.0,
        },
    }  # fmt: skip
    # The neighbourhood component (services/core/domain/recall_context.py): a
    # candidate gets the best first-pass score among the candidates written
    # within this many seconds of it (a stretch of conversation); 0 turns it off.
    recall_neighbourhood_seconds: float = Field(default=1800.0, ge=0)
    # ... and, of those, only the this-many written just before it and just
    # after it (in time, then in the order they were stored): the turns around
    # it, not the whole stretch; 0 takes every candidate within the seconds.
    recall_neighbourhood_adjacent: int = Field(default=2, ge=0)
    # The vector arm searches each query with the mean of its vector as asked
    # and the vector of its focus: its names replaced by a pronoun and its
    # framing words ("would", "likely") left out (services/core/domain/
    # query_focus.py); this is the second one's share: 0 searches the query
    # as asked only, 1 its focus only.
    recall_nameless_query_share: float = Field(default=0.5, ge=0, le=1)
    # The relevance component of a memory no decay pass has scored yet (new
    # since the last pass, or consolidation off): 1.0, the top of decay's
    # range, as nothing has faded yet.
    recall_relevance_unscored: float = Field(default=1.0, ge=0, le=1)
    # Source trust: metadata.source -> trust; anything else gets the default.
    source_trust: dict[str, float] = {
        "gmail": 0.95, "slack": 0.90, "photos": 0.85, "locations": 0.85, "whatsapp": 0.80, "imessage": 0.80,
        "manual": 0.70,
    }  # fmt: skip
    source_trust_default: float = 0.70  # the trust of any other source
    # Trust states (docs/trust.md): recall multiplies the final score of a
    # disputed memory (contradicted by a newer one) by this, 1 keeping it as it is ...
    recall_disputed_weight: float = Field(default=0.6, ge=0, le=1)
    # ... and of one whose factuality is FICTION by this.
    recall_fiction_weight: float = Field(default=0.7, ge=0, le=1)
    review_page_default: int = Field(default=20, ge=1)  # GET /review's limit by default ...
    review_page_max: int = Field(default=200, ge=1)  # ... and at most (GET /admin/tombstones too)
    by_tag_default_limit: int = 20  # GET /memory/by-tag's limit by default ...
    by_tag_max_limit: int = 200  # ... and at most
    startup_recall_default_limit: int = 10  # /startup-recall's results by default
    # /startup-recall's critical_lessons and system_rules (AutoMem's shape):
    # current memories with any of these tags, most important first, and
    # has_critical when a lesson has at least that importance.
    startup_lesson_tags: list[str] = ["critical", "lesson", "ai-assistant"]
    startup_lesson_limit: int = Field(default=10, ge=1)
    startup_system_tags: list[str] = ["system", "memory-recall"]
    startup_system_limit: int = Field(default=5, ge=1)
    startup_critical_importance: float = Field(default=0.9, ge=0, le=1)
    related_default_limit: int = 20  # GET /memories/{id}/related's limit by default
    reindex_batch_size: int = 1000  # points per upsert when the index is rebuilt from the graph
    # How often recall compares the vector index with the graph (a count per tenant on each side) and
    # re-projects a tenant whose counts differ; the first check runs at start-up. 0 turns it off.
    recall_index_check_seconds: float = Field(default=300.0, ge=0)
    # A count that differs is read again after this pause and repaired only when the difference is the same:
    # a write the projector is applying differs for a moment too.
    recall_index_check_settle_seconds: float = Field(default=2.0, ge=0)
    # Tenants one check compares at most (the vector engine's facet over `tenant` returns this many).
    recall_index_check_tenants: int = Field(default=100_000, ge=1)

    # Readiness of a starting recall.
    #
    # A starting recall answers NOT_SERVING for its service name (the readiness probe's) until the projection
    # consumer's backlog (undelivered + unacknowledged events) is at most this many, so a new replica joins
    # with a caught-up index; the overall health ("", liveness) is SERVING as soon as it started. The default
    # leaves room for a few batches in flight at the other replicas (acknowledged-pending counts them too).
    recall_ready_max_pending: int = Field(default=1000, ge=0)
    # ... or until this long after start-up, then it serves anyway (a warning): a vector arm a little behind
    # beats a replica that never takes traffic, and the current-state pass reads the graph in any case.
    recall_ready_timeout_seconds: float = Field(default=300.0, ge=0)
    recall_ready_poll_seconds: float = Field(default=1.0, gt=0)  # how often the backlog is read meanwhile

    # Graph views (/graph/*) and the analysis (/analyze), served by recall.
    graph_snapshot_default_limit: int = 200  # /graph/snapshot's nodes by default ...
    graph_snapshot_max_limit: int = 2000  # ... and at most
    graph_neighbors_default_limit: int = 50  # /graph/neighbors' nodes by default ...
    graph_neighbors_max_limit: int = 500  # ... and at most
    graph_max_depth: int = 3  # /graph/neighbors' deepest depth
    graph_max_edges: int = 5000  # edges in one snapshot or neighbourhood, strongest first
    analysis_top: int = 50  # tags and entities listed by /analyze

    # Exports (GET /memories/export).
    export_default_limit: int = Field(default=500, ge=1)  # memories a page of GET /memories/export gives by default ...
    export_max_limit: int = Field(default=2000, ge=1)  # ... and at most (the CLI's export asks for this many)

    # The audit log's reads (GET /audit, /memory/{id}/history, verify).
    audit_list_default_limit: int = Field(default=100, ge=1)  # GET /audit and /memory/{id}/history without limit
    audit_list_max_limit: int = Field(default=1000, ge=1)  # ... and their largest limit
    audit_verify_page: int = Field(default=2000, ge=1)  # entries verify reads per query

    # Event watches (/stream, served by recall).
    #
    # Recall serves each open /stream as a WatchMemoryEvents call on a JetStream
    # consumer of its own: at most this many at once per recall process (more
    # are refused, 429), so a crowd of streams cannot exhaust one replica.
    recall_max_watches: int = 256
    # ... and at most this many for one tenant (its 429 names RECALL_MAX_WATCHES_PER_TENANT), so one
    # tenant's streams leave room for everyone else's.
    recall_max_watches_per_tenant: int = Field(default=32, ge=1)
    # Events a watch fetches from JetStream at once, and how long one pull
    # waits (an idle watch checks its consumer still exists this often).
    recall_watch_batch_size: int = 256
    recall_watch_fetch_seconds: float = 5.0
    # JetStream removes a watch's consumer idle this long: a crashed replica's
    # consumers do not linger.
    recall_watch_inactive_seconds: float = 30.0
    # A watch with nothing to send says so this often; the gateway takes a
    # watch silent for three periods as a dead connection and calls again.
    recall_watch_heartbeat_seconds: float = 15.0

    @model_validator(mode="after")
    def _warmed_before_expiry(self) -> RecallSettings:
        if self.recall_df_warm_seconds and self.recall_df_warm_seconds >= self.recall_df_cache_seconds:
            raise ValueError(
                f"RECALL_DF_WARM_SECONDS ({self.recall_df_warm_seconds}) must be less than RECALL_DF_CACHE_SECONDS "
                f"({self.recall_df_cache_seconds}), or the counts expire before they are counted again"
            )
        return self

    def fresh_policy(self) -> FreshPolicy:
        """How long a recall waits for the vectors of what was stored before it."""
        return FreshPolicy(
            wait_seconds=self.recall_fresh_wait_seconds,
            stall_seconds=self.recall_fresh_stall_seconds,
            max_awaited=self.recall_fresh_max_awaited,
            capacity=self.recall_fresh_capacity,
            expire_seconds=self.recall_fresh_expire_seconds,
        )

    def policy(self, tag_limits: Limits) -> RecallPolicy:
        """The numbers behind ranked recall; `tag_limits` (MemorySettings.limits) bound the tags a recall names."""
        return RecallPolicy(
            default_limit=self.recall_default_limit,
            max_limit=self.recall_max_limit,
            candidate_multiplier=self.recall_candidate_multiplier,
            candidate_min=self.recall_candidate_min,
            candidate_cap=self.recall_candidate_cap,
            shortlist_min=self.recall_shortlist_min,
            relation_limit=self.recall_relation_limit,
            expansion_limit=self.recall_expansion_limit,
            expand_min_strength=self.recall_expand_min_strength,
            expand_min_importance=self.recall_expand_min_importance,
            max_hops=self.recall_state_max_hops,
            recency_decay_rate=self.recall_recency_decay_rate,
            diversity_factor=self.recall_diversity_factor,
            max_queries=self.recall_max_queries,
            max_query_words=self.recall_max_query_words,
            max_priority_ids=self.recall_max_priority_ids,
            adaptive_floor=self.recall_adaptive_floor,
            adaptive_floor_min_results=self.recall_adaptive_floor_min_results,
            adaptive_floor_gap=self.recall_adaptive_floor_gap,
            context_inject_limit=self.recall_context_inject_limit,
            context_keyword_score=self.recall_context_keyword_score,
            related_max_depth=self.recall_related_max_depth,
            relevance_unscored=self.recall_relevance_unscored,
            decompose=DecomposePolicy(
                max_entities=self.recall_decompose_entities,
                max_topics=self.recall_decompose_topics,
                topic_words=self.recall_decompose_topic_words,
                min_topic_length=self.recall_decompose_min_topic_length,
            ),
            weights=self.recall_weights,
            source_trust={k.lower(): v for k, v in self.source_trust.items()},
            default_trust=self.source_trust_default,
            keyword_max_df_ratio=self.recall_keyword_max_df_ratio,
            keyword_min_df=self.recall_keyword_min_df,
            keyword_max_df=self.recall_keyword_max_df,
            keyword_candidates=self.recall_keyword_candidates,
            keyword_scan=self.recall_keyword_scan,
            bm25_k1=self.recall_bm25_k1,
            bm25_b=self.recall_bm25_b,
            related_threshold=self.recall_related_threshold,
            related_per_word=self.recall_related_per_word,
            disputed_weight=self.recall_disputed_weight,
            fiction_weight=self.recall_fiction_weight,
            neighbourhood_seconds=self.recall_neighbourhood_seconds,
            neighbourhood_adjacent=self.recall_neighbourhood_adjacent,
            nameless_query_share=self.recall_nameless_query_share,
            tag_limits=tag_limits,
        )
