"""Ports: what the handlers need from the outside world, as Protocols.

Adapters in services.core.adapters implement them, one per technology; tests
inject the same adapters against real servers, or fakes proved equal to them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any, Protocol

from services.core.domain.analysis import AnalysisFigures
from services.core.domain.archive import ArchiveEdge, ArchiveNode
from services.core.domain.association import Discovery
from services.core.domain.audit import AuditEntry, Seal
from services.core.domain.classification import Classification
from services.core.domain.clustering import Cluster
from services.core.domain.consolidation import MemorySample, RunRecord
from services.core.domain.embedding_text import Preceding
from services.core.domain.factuality import Factuality
from services.core.domain.model import ComponentStatus, Memory, MemoryEvent, Relation
from services.core.domain.projection import VectorHit, VectorQuery
from services.core.domain.recall_request import Scope
from services.core.domain.recall_text import TextHit
from services.core.domain.state import Successor
from services.core.domain.tombstones import Tombstone, TombstoneGuard


@dataclass(frozen=True, slots=True)
class IdempotencyClaim:
    """A request's claim on an idempotency key: the write happens only if
    this request (owner) holds the key, which expires at expires_us."""

    tenant: str
    key: str
    owner: str
    request_hash: str
    expires_us: int


@dataclass(frozen=True, slots=True)
class OutboxEntry:
    """An event recorded with its write and not yet acknowledged by the bus."""

    event_id: str
    event: MemoryEvent


@dataclass(frozen=True, slots=True)
class GraphStats:
    """Counts of one tenant's graph: memories by type, and edges between two
    memories by relation type."""

    memories: int
    relations: int
    memories_by_type: dict[str, int] = field(default_factory=dict)
    relations_by_type: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PatternNode:
    """A MetaPattern as a graph view shows it: never a memory; `edges` are
    its member edges (as stored) to the memories shown."""

    id: str
    summary: str
    size: int
    edges: list[Relation] = field(default_factory=list)


class GraphLifecycle(Protocol):
    """The graph store's own upkeep: schema at start-up, health, shutdown.
    Every service that holds a graph port also holds this one."""

    async def ensure_schema(self) -> None: ...

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class MemoryLookup(Protocol):
    """Records by id, and how many a tenant holds: what every consumer of the graph reads."""

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None: ...

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]: ...

    async def count_memories(self, tenant: str | None = None) -> int: ...


class MemoryWriter(MemoryLookup, Protocol):
    """Ingest's writes. Every write records its events in the same query
    (the outbox), so an acknowledged write is never without its events."""

    async def create_memories(
        self,
        memories: list[Memory],
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        """Write new Memory nodes in one query; False when another request
        holds the idempotency key. With a guard, that same query refuses
        content a tombstone holds (unless passed): TombstoneHeld, nothing written."""

    async def get_idempotency(self, tenant: str, key: str, now_us: int) -> tuple[str, list[str]] | None: ...

    async def get_idempotency_many(self, tenant: str, keys: list[str], now_us: int) -> dict[str, tuple[str, list[str]]]:
        """(request hash, memory ids) by key, for the keys held and not expired (a batch's item keys)."""

    async def claim_idempotency(self, claims: list[tuple[IdempotencyClaim, list[str]]], now_us: int) -> set[str]:
        """Claim each key for its memory ids, each on its own (an expired key
        is taken over); returns the keys another request holds."""

    async def update_memory(
        self, memory: Memory, expected_version: int, event: MemoryEvent, *, now_us: int, before: Memory | None = None
    ) -> bool:
        """Compare-and-set on the version; `before` (the record as read) gives the audit entry its diff."""

    async def delete_memories(self, tenant: str, events: list[MemoryEvent], *, now_us: int) -> list[str]: ...

    async def find_ids_by_tags(self, tenant: str, tags_lower: list[str], limit: int) -> list[str]: ...

    async def create_relations(
        self, tenant: str, relations: list[Relation], events: list[MemoryEvent], *, now_us: int
    ) -> list[int]: ...

    async def supersede(
        self,
        old: Memory,
        expected_version: int,
        replacement: Memory,
        relation: Relation,
        events: list[MemoryEvent],
        *,
        now_us: int,
        claim: IdempotencyClaim | None = None,
        before: Memory | None = None,
        guard: TombstoneGuard | None = None,
    ) -> bool:
        """Replacement, closed old memory and edge in one query; `guard` of the replacement, as create_memories'."""


class Outbox(Protocol):
    """The relay's view: events written with their records and not yet on
    the bus, and the expired idempotency keys it sweeps."""

    async def pending_outbox(self, older_than_us: int, limit: int) -> list[OutboxEntry]: ...

    async def delete_outbox(self, event_ids: list[str]) -> None: ...

    async def count_outbox(self) -> int:
        """Events recorded and not yet acknowledged by the bus."""

    async def purge_idempotency(self, now_us: int) -> int: ...


class MemoryReader(MemoryLookup, Protocol):
    """Recall's reads of records and their edges (each scoped to a tenant),
    and the one write a read causes: the access time."""

    async def read_memory(
        self, tenant: str, memory_id: str, *, accessed_us: int, relation_limit: int
    ) -> tuple[Memory, list[Relation]] | None:
        """A read by id in one query: record (access time bumped) and relations."""

    async def read_candidates(self, tenant: str, ids: list[str]) -> dict[str, tuple[Memory, list[Successor]]]:
        """Records without embeddings, with their outgoing supersession edges."""

    async def successors(self, tenant: str, ids: list[str]) -> dict[str, list[Successor]]: ...

    async def relations_of(self, tenant: str, ids: list[str], limit: int) -> dict[str, list[Relation]]: ...

    async def neighbours(
        self,
        tenant: str,
        ids: list[str],
        *,
        types: list[str] | None,
        per_memory: int,
        min_strength: float,
        min_importance: float,
    ) -> list[tuple[Relation, Memory]]: ...

    async def entity_neighbours(
        self,
        tenant: str,
        ids: list[str],
        limit: int,
        *,
        per_seed: int | None = None,
        max_mentions: int | None = None,
        max_reads: int | None = None,
    ) -> list[tuple[str, int]]:
        """Memories sharing entities with these, most shared first, within
        bounds (each None: the store's, from settings)."""

    async def list_memories(
        self, scope: Scope, order_by: str, limit: int, offset: int = 0, *, with_archived: bool = False
    ) -> list[Memory]:
        """Memories within the scope in a fixed order (importance or a recall
        sort); archived ones too when with_archived."""

    async def touch_memories(self, tenant: str, ids: list[str], accessed_us: int) -> None:
        """Record an access of many memories in one query: last_accessed
        only (never backwards), no version, no event."""


class TextSearch(Protocol):
    """The full-text arms of ranked recall and the word statistics behind
    them, per tenant."""

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
        """A full-text arm (keyword, tag, metadata) within the scope, best
        first, with the text matched; words in more than max_df memories are
        left out (when all are, the rarest is searched), and about scan
        matches at most are read."""

    async def document_frequencies(
        self, tenant: str, field: str, words: list[str], *, cap: int | None = None, recount: bool = False
    ) -> dict[str, int]:
        """How many of the tenant's memories hold each word in a full-text
        field (cached per tenant; recount: counted again and cached)."""

    async def arm_frequencies(self, tenant: str, arms: list[str], words: list[str], *, cap: int) -> None:
        """Count and cache, in one query, the tenant's frequencies search_text reads first for these arms."""

    async def sample_texts(self, tenant: str, field: str, size: int) -> list[str]:
        """A random sample of the tenant's memories' texts in a full-text field."""


class IndexSource(MemoryLookup, Protocol):
    """What a rebuild of the vector index reads: the graph alone reproduces it."""

    async def scan_memories(self, cursor: int, limit: int, tenant: str | None = None) -> tuple[int, list[Memory]]:
        """A page of the tenant's (with None, every tenant's) memories with
        embeddings after a cursor (-1 to start), and the next cursor (index rebuilds)."""

    async def embedded_counts(self) -> dict[str, int]:
        """Per tenant, the memories with an embedding: the points the vector
        index should hold, but for vectors of another dimension (its convergence check)."""


class GraphViews(Protocol):
    """The graph views and the analysis (/graph/*, /analyze)."""

    async def graph_stats(self, tenant: str) -> GraphStats: ...

    async def frontier(self, tenant: str, ids: list[str], exclude: list[str], limit: int) -> list[tuple[Memory, float]]:
        """Memories one edge from any of `ids` (not in `exclude`), with the
        strongest such edge's strength; strongest first, at most `limit`."""

    async def edges_among(self, tenant: str, ids: list[str], limit: int) -> list[Relation]:
        """Edges whose both ends are among `ids`, strongest first."""

    async def patterns_among(self, tenant: str, ids: list[str], limit: int) -> list[PatternNode]:
        """The tenant's MetaPatterns with a member among `ids`, largest first,
        at most `limit`, each with its edges to those members."""

    async def analysis_figures(self, tenant: str, *, now_us: int, top: int, max_hops: int = 5) -> AnalysisFigures:
        """The counts behind the analysis of a tenant's memories."""


class EnrichmentStore(MemoryLookup, Protocol):
    """Enrichment's reads and its writes of the fields and edges it owns."""

    async def find_unenriched(self, recorded_before_us: int, limit: int) -> list[tuple[str, str]]: ...

    async def count_unenriched(self, tenant: str) -> int:
        """The tenant's memories enrichment has not finished."""

    async def record_embeddings(
        self,
        tenant: str,
        items: list[tuple[Memory, list[float] | None, str]],
        events: list[MemoryEvent],
        *,
        now_us: int,
    ) -> list[str]:
        """The embedding stage's write: per (memory as read, vector or None,
        model), the vector and its model (or, with None, only the event),
        where version and content are still the ones read; the ids written."""

    async def preceding_contents(self, tenant: str, items: list[Preceding], window_us: int) -> dict[str, str]:
        """Per memory id, the content of the memory written just before it
        (domain/embedding_text.py: same tenant, within window_us, sharing one
        of its tags when it has any); ids with none are left out."""

    async def embedding_models(self, tenant: str, memory_ids: list[str]) -> dict[str, str]:
        """The model the embedding stage recorded for each memory's vector."""

    async def count_unembedded(self, tenant: str) -> int:
        """The tenant's memories without a vector."""

    async def find_unembedded(self, changed_before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of memories without a vector, last changed before the time."""

    async def apply_enrichment(
        self, tenant: str, updates: list[tuple[Memory, int]], events: list[MemoryEvent], *, now_us: int
    ) -> list[str]:
        """Write the fields enrichment owns, each where the version is still
        the one read (a concurrent edit wins); the ids written."""

    async def link_preceding(
        self, tenant: str, items: list[tuple[str, int]], *, window_us: int, limit: int, now_us: int
    ) -> dict[str, int]:
        """PRECEDED_BY edges from each (id, timestamp) to recent memories within the window."""

    async def link_similar(
        self, tenant: str, pairs: list[tuple[str, str, float]], *, now_us: int, replace_for: list[str] | None = None
    ) -> int:
        """SIMILAR_TO edges for (id, neighbour, score) pairs; the edges made.
        The outgoing SIMILAR_TO of `replace_for` not among the pairs are removed."""

    async def link_entities_and_patterns(
        self,
        tenant: str,
        mentions: list[tuple[str, str, list[str]]],
        *,
        min_members: int,
        max_members: int,
        now_us: int,
        replace: bool = False,
    ) -> dict[str, int]:
        """MENTIONS edges to Entity nodes, and EXEMPLIFIES edges to a Pattern
        once enough memories of one type share an entity; with `replace`, a
        memory's edges to what `mentions` no longer names are removed."""


class GraphExport(Protocol):
    """A tenant's memory ids, page by page (the export listing, re-embedding)."""

    async def memory_ids(self, tenant: str, after_id: str, limit: int) -> list[str]:
        """A page of the tenant's memory ids, in id order after `after_id`."""


class GraphSnapshot(Protocol):
    """One point in time of the graph, read by node id windows (a backup's source)."""

    async def max_node_id(self) -> int:
        """The highest node id (-1: no nodes)."""

    async def tenants(self) -> list[str]:
        """The tenants holding memories."""

    async def nodes(self, tenant: str | None, start: int, stop: int) -> list[ArchiveNode]:
        """Exported nodes with ids in [start, stop) of the tenant (None: every tenant's), properties as stored."""

    async def edges(self, tenant: str | None, start: int, stop: int) -> list[ArchiveEdge]:
        """Edges leaving those nodes to a node of the same tenant."""


class GraphBackup(Protocol):
    """What a backup asks of the graph: a consistent snapshot to export."""

    def snapshot(self) -> AbstractAsyncContextManager[GraphSnapshot]:
        """A point-in-time copy, released on leaving."""


class GraphRestore(Protocol):
    """What a restore asks of the graph: counts, lookups by identity, and raw writes."""

    async def count_memories(self, tenant: str) -> int: ...

    async def count_label(self, label: str, tenant: str) -> int: ...

    async def find(
        self, label: str, prop: str | None, keys: list[tuple[str, Any]]
    ) -> list[tuple[int, dict[str, Any]] | None]:
        """Per (tenant, value): the stored node (id, properties) of `label` named so, or None."""

    async def create_nodes(self, labels: tuple[str, ...], rows: list[dict[str, Any]]) -> list[int]:
        """Nodes with exactly these properties; their ids in order."""

    async def replace_nodes(self, rows: list[tuple[int, dict[str, Any]]]) -> None:
        """Stored nodes (by id) given exactly these properties."""

    async def create_edges(self, kind: str, rows: list[tuple[int, int, dict[str, Any]]], *, merge: bool) -> int:
        """Edges of one type between stored nodes (by id); merge: none where one already joins them."""


@dataclass(frozen=True, slots=True)
class DecayRow:
    """What decay and forgetting read of one memory (a page of decay_page).

    `edges` counts the memory's edges to other memories of the tenant, both
    directions (Entity, Pattern and MetaPattern links are not relationships
    between memories and are left out)."""

    id: str
    version: int
    type: str
    importance: float
    confidence: float
    timestamp: datetime
    last_accessed: datetime
    edges: int
    relevance_score: float | None
    archived: bool
    has_embedding: bool
    #: The score the last DECAYED event carried (the event threshold compares
    #: with it, so a drift of many small writes still emits once it adds up).
    emitted_score: float | None = None
    #: Why the store could not read this record ('' when it could): the pass
    #: skips and counts it, and `id` names it (the node id when it has none).
    unreadable: str = ""


@dataclass(frozen=True, slots=True)
class RelevanceUpdate:
    """A score decay writes: where the version is still `version`; with
    `emit`, a DECAYED event too (the score moved by more than the epsilon)."""

    id: str
    version: int
    score: float
    emit: bool


@dataclass(frozen=True, slots=True)
class LeaseInfo:
    """A task's lease on a tenant: who holds it, until when, and how far it got."""

    task: str
    tenant: str
    owner: str
    acquired_at: datetime
    expires_at: datetime
    progress: dict[str, Any] = field(default_factory=dict)


class ConsolidationStore(Protocol):
    """Consolidation's reads and writes over the graph: per tenant, in pages,
    each write with its events in one query (the outbox). Deletes go through
    MemoryWriter.delete_memories."""

    async def tenants(self) -> list[str]:
        """The tenants that hold at least one memory, sorted."""

    async def decay_page(self, tenant: str, cursor: int, limit: int) -> tuple[int, list[DecayRow]]:
        """Up to `limit` of the tenant's memories (archived ones too) after a
        cursor (-1 to start), and the next cursor."""

    async def write_relevance(self, tenant: str, updates: list[RelevanceUpdate], *, now_us: int) -> list[str]:
        """Set relevance_score (no version bump) where the version is still
        the one read, with a DECAYED event for each written update that
        emits, in one query; the ids written."""

    async def archive(self, tenant: str, rows: list[DecayRow], *, now_us: int) -> list[str]:
        """Archive each memory whose version is still the row's (archived,
        archived_at, version + 1) with its ARCHIVED event, in one query; the ids archived."""

    async def association_sample(self, tenant: str, limit: int, *, now_us: int | None = None) -> list[MemorySample]:
        """A random sample of at most `limit` of the tenant's current memories
        with vectors (not archived, superseded or invalid at now_us, default now)."""

    async def connected_pairs(self, tenant: str, ids: list[str]) -> set[tuple[str, str]]:
        """The pairs among `ids` joined by any edge, either direction, each as (smaller id, larger id)."""

    async def link_discovered(self, tenant: str, links: list[Discovery], *, now_us: int) -> list[Discovery]:
        """Create each link's edge (its type, similarity, confidence, reason,
        created_at) with an ASSOCIATED event, only where both ends are the
        tenant's and no edge joins the pair in either direction; the links made."""

    async def cluster_inputs(
        self, tenant: str, after_id: str, limit: int, *, now_us: int | None = None
    ) -> list[MemorySample]:
        """A page of the tenant's current memories with vectors, in id order after `after_id`."""

    async def write_clusters(self, tenant: str, task: str, clusters: list[Cluster], *, now_us: int) -> list[str]:
        """Replace the tenant's MetaPatterns from `task` with these (each
        linked to its members, a CLUSTERED event per member); the new ids."""

    async def meta_patterns(self, tenant: str, limit: int) -> list[dict[str, Any]]:
        """The tenant's MetaPatterns, newest first: id, tenant, task, summary,
        size, cohesion, dominant_type, created_at (us), member_ids (closest to the centre first)."""

    async def record_run(self, record: RunRecord, *, keep: int) -> None:
        """Store (or replace, by id) a run's record; the tenant's oldest beyond `keep` go."""

    async def run_history(self, tenant: str, limit: int, task: str | None = None) -> list[RunRecord]:
        """The tenant's runs (of one task, or all), newest start first."""

    async def last_runs(self, tenant: str) -> dict[str, RunRecord]:
        """The tenant's latest run of each task (dry runs left out), by task."""

    async def abandon_stale_runs(self, tenant: str, *, now_us: int, reason: str) -> list[str]:
        """Finish the tenant's unfinished real runs whose lease is gone, lapsed
        or another run's (their process died mid-way), with `reason` as an
        error; the run ids so marked."""

    async def acquire_lease(self, task: str, tenant: str, owner: str, *, now_us: int, ttl_us: int) -> bool:
        """Take the (task, tenant) lease when it is free or expired, or extend
        it when `owner` holds it, in one query; whether `owner` holds it now."""

    async def renew_lease(
        self, task: str, tenant: str, owner: str, *, now_us: int, ttl_us: int, progress: dict[str, Any] | None = None
    ) -> bool:
        """Extend the lease `owner` holds (and record progress); False when it lost it."""

    async def release_lease(self, task: str, tenant: str, owner: str) -> bool:
        """Drop the lease if `owner` holds it; whether it did."""

    async def leases(self, tenant: str, *, now_us: int) -> list[LeaseInfo]:
        """The tenant's unexpired leases (the tasks running now)."""


class EventPublisher(Protocol):
    """Publishes memory events durably (JetStream)."""

    async def publish(self, event: MemoryEvent) -> None:
        """Publish one event; raises when the bus did not acknowledge it."""

    @property
    def connected(self) -> bool:
        """Whether publishing can succeed right now."""

    async def publish_many(self, events: list[MemoryEvent]) -> list[bool]:
        """Publish a batch; per event, whether the bus acknowledged it. Never raises."""

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class WatchOpened:
    """A watch is open: it delivers the events after `after_sequence`; the
    stream holds `first_sequence`..`last_sequence` (0 and 0 when empty)."""

    after_sequence: int
    first_sequence: int
    last_sequence: int


@dataclass(frozen=True, slots=True)
class WatchGap:
    """Events a watch cannot deliver: `expired` (older than the stream's
    retention) or `reset` (beyond the stream's end: it was recreated)."""

    requested_after: int
    resumed_after: int
    reason: str


@dataclass(frozen=True, slots=True)
class SequencedEvent:
    """A memory event with its stream sequence (increasing within the stream)."""

    sequence: int
    event: MemoryEvent


@dataclass(frozen=True, slots=True)
class WatchHeartbeat:
    """A watch had nothing to send for a while: it is alive, the tenant quiet."""


class EventWatchSource(Protocol):
    """One tenant's memory events in stream order, from a stream sequence on."""

    def watch(
        self, tenant: str, after_sequence: int | None, kinds: list[str]
    ) -> AsyncIterator[WatchOpened | WatchGap | SequencedEvent]:
        """`WatchOpened` first (once the watch is in place), then events and
        gaps until the caller stops iterating; None: only events from now on."""


class VectorIndex(Protocol):
    """Recall's projection of the graph into vectors."""

    dimension: int
    #: Vectors turned away because their dimension is not the index's.
    refused: int

    def open(self) -> Awaitable[None] | None:
        """Open or create the index (a service start-up step, sync or async).
        An existing index keeps its dimension: adopted with autodetection,
        else the index stays closed and status() says `dimension_mismatch`."""

    async def upsert(self, points: list[tuple[str, list[float], dict]]) -> None:
        """Insert or replace points (id, vector, payload from vector_payload)."""

    async def delete(self, ids: list[str], *, tenant: str) -> None:
        """Remove the tenant's points of these memories. A point's id is derived from its tenant
        and memory id (projection.point_id): no tenant's ids name another tenant's point."""

    async def search(self, query: VectorQuery, *, with_payload: bool = False) -> list[VectorHit]: ...

    async def search_many(self, queries: list[VectorQuery], *, with_payload: bool = False) -> list[list[VectorHit]]: ...

    async def count(self) -> int: ...

    async def count_by_tenant(self, limit: int) -> dict[str, int]:
        """Points per tenant (at most `limit` tenants), exact: the convergence
        check's side of the comparison with the graph."""

    async def clear(self, tenant: str | None = None) -> None:
        """Remove the tenant's points, or with None every point (a rebuild
        from the graph starts here); the index keeps its dimension and payload
        indexes and stays usable."""

    async def optimize(self) -> None:
        """Index what was written since the last optimisation (HNSW), now.
        An engine that optimises on its own (a Qdrant server) does nothing."""

    async def status(self) -> ComponentStatus: ...

    async def close(self) -> None: ...


class LanguageModel(Protocol):
    """The LLM steps of the write path: classification and summaries."""

    async def classify(self, content: str) -> Classification:
        """A type and confidence for content no regex matched; never raises:
        an empty, invalid or failed answer is the fallback (Memory, 0.3)."""

    async def summarize(self, content: str, target_length: int) -> str | None:
        """About `target_length` characters of summary, or None when the
        model is unavailable or its answer is unusable."""

    async def assess_factuality(self, content: str, source: str | None) -> Factuality | None:
        """A factuality label from the model, or None (the rules then decide)."""

    async def judge_association(self, first: str, second: str) -> str | None:
        """How two similar memories relate: "contradicts", "related" or
        "unrelated", or None when the model is unavailable or its answer
        unusable (creative association's rule then decides)."""


class Embedder(Protocol):
    """Turns text into vectors of a fixed dimension."""

    #: Length of every vector this embedder returns.
    dimension: int
    #: Provider and model, e.g. "local:all-MiniLM-L6-v2" (recorded with each vector).
    name: str

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order. Raises on failure."""


class EntityExtractor(Protocol):
    """Entities by category ({tools, projects, people, concepts, organizations})."""

    def extract_many(self, texts: list[str]) -> list[dict[str, list[str]]]:
        """One entity map per text, in order (CPU-bound: call it off the loop)."""


class NeighbourFinder(Protocol):
    """Nearest current memories of a tenant to vectors (recall's vector arm)."""

    async def neighbours(
        self, tenant: str, queries: list[tuple[str, list[float]]], *, limit: int, min_score: float
    ) -> list[list[VectorHit]]:
        """Per (memory id, vector): its neighbours (itself left out), with
        their payloads (source for corroboration)."""


class Outcome(Enum):
    """What a consumer's handler made of one delivered event."""

    DONE = "done"  # ack
    RETRY = "retry"  # nak with backoff; dead-lettered after the last attempt
    SKIP = "skip"  # ack without work (not for this consumer)


@dataclass(frozen=True, slots=True)
class Delivery:
    """An event as a durable consumer hands it to its handler: the attempt counts from 1."""

    event: MemoryEvent
    attempt: int


class EventBacklog(Protocol):
    """A durable consumer, as a status report sees it."""

    async def pending(self) -> int:
        """Events on the stream the consumer has not handled yet."""


class TrustStore(Protocol):
    """Trust states, the review queue and tombstones (services/core/domain/trust.py, tombstones.py).
    Ingest writes through it; recall lists the queue and the tombstones."""

    async def get_memory(self, tenant: str, memory_id: str) -> Memory | None: ...

    async def get_memories(self, tenant: str, memory_ids: list[str]) -> dict[str, Memory]: ...

    async def set_trust(
        self,
        memory: Memory,
        expected_version: int,
        events: list[MemoryEvent],
        *,
        now_us: int,
        tombstone: Tombstone | None = None,
        before: Memory | None = None,
    ) -> bool:
        """Compare-and-set the memory's trust state with its events (and a
        rejection's tombstone); `before` (the record as read) gives the audit entry its diff."""

    async def delete_with_tombstone(
        self, tenant: str, memory_id: str, tombstone: Tombstone, events: list[MemoryEvent], *, now_us: int
    ) -> bool:
        """Delete the memory and leave its tombstone, in one write; False when it is not there."""

    async def set_tombstone(self, tombstone: Tombstone, event: MemoryEvent, *, now_us: int) -> None:
        """Leave a tombstone with its event."""

    async def find_tombstones(self, tenant: str, hashes: list[str]) -> dict[str, Tombstone]:
        """The tenant's tombstones among these content hashes, by hash."""

    async def get_tombstone(self, tenant: str, tombstone_id: str) -> Tombstone | None: ...

    async def list_tombstones(self, tenant: str, limit: int, offset: int) -> list[Tombstone]:
        """Newest first."""

    async def remove_tombstone(self, tenant: str, tombstone_id: str, event: MemoryEvent, *, now_us: int) -> bool:
        """Remove a tombstone with its event; False when it is not there."""

    async def review_queue(self, tenant: str, limit: int, offset: int) -> list[Memory]:
        """The tenant's pending_review memories, oldest first."""


class AuditLog(Protocol):
    """The audit log (services/core/domain/audit.py): entries the writes
    appended in their own queries, read in sequence order; and the sealer's
    head per tenant and its writes."""

    async def history(self, tenant: str, memory_id: str, limit: int) -> list[AuditEntry]:
        """One memory's entries, oldest first."""

    async def list_entries(
        self,
        tenant: str,
        *,
        after_seq: int,
        limit: int,
        since_us: int | None = None,
        until_us: int | None = None,
        kind: str = "",
        memory_id: str = "",
        within: int | None = None,
    ) -> list[AuditEntry]:
        """The tenant's entries after `after_seq`, in sequence order, filtered;
        with `within`, only those numbered up to `after_seq + within`."""

    async def last_seq(self, tenant: str) -> int:
        """The sequence number of the tenant's latest entry (0: none)."""

    async def unsealed_heads(self, limit: int) -> list[tuple[str, int, str]]:
        """(tenant, last sealed sequence, its chain hash) of tenants with entries to seal."""

    async def seal(self, tenant: str, seals: list[Seal], *, expected_sealed_seq: int) -> bool:
        """Write the seals if the tenant's sealed head is still `expected_sealed_seq`."""
