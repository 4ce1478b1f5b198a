"""The stores: FalkorDB (the graph), NATS JetStream (the events) and the vector index."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from services.core.settings.base import Group


class GraphSettings(Group):
    """The graph store: FalkorDB, how its queries are bounded and retried, the audit log."""

    # FalkorDB: every memory, edge and audit entry, and the outbox.
    #
    # FalkorDB's address, or a Redis Cluster's nodes: several `host[:port]`, comma-separated, each on
    # FALKORDB_PORT unless it names its own. They are tried in turn, so a process starts while one is down;
    # the cluster's client learns the others from the one that answers (docs/scaling.md, FalkorDB).
    falkordb_host: str = "127.0.0.1"
    falkordb_port: int = 6379  # FalkorDB's port (of each node FALKORDB_HOST names without one)
    falkordb_password: str | None = None  # unset: no AUTH
    falkordb_graph: str = "memories"  # the graph's name in FalkorDB (the layout's graphs' stem)
    # How tenants map to FalkorDB graphs (docs/scaling.md, FalkorDB). shared: every tenant in FALKORDB_GRAPH,
    # one node's layout; bucket: each tenant's id hashed into FALKORDB_GRAPH_BUCKETS graphs named
    # <FALKORDB_GRAPH>:b<n>, which a Redis Cluster spreads over its shards (a graph is one key). A tenant's
    # records, outbox events and idempotency keys are always in one graph, so a write and its events commit
    # together. Changing either moves no data: `python -m services.core.graph_migration` does.
    falkordb_graph_layout: Literal["shared", "bucket"] = "shared"
    falkordb_graph_buckets: int = Field(default=64, ge=1)
    # How many replicas must hold a write before it is acknowledged: each write is followed by Redis's WAIT on
    # its own connection (a Redis Cluster's master, or one server with replicas). Replication is asynchronous,
    # so without it a master killed after acknowledging a write may lose it to the replica promoted in its
    # place; with 1, a write no replica confirmed within FALKORDB_WRITE_REPLICAS_TIMEOUT_MS answers 503
    # FALKORDB_WRITE_UNREPLICATED (it may be on the master: retry with the same Idempotency-Key). 0: none.
    falkordb_write_replicas: int = Field(default=0, ge=0)
    falkordb_write_replicas_timeout_ms: int = Field(default=1000, ge=1)
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
    # Queries a process sends FalkorDB at once; the others wait in the process for a turn (within the
    # caller's deadline). Below the client's pool of 100 connections, which refuses the 101st at once: in a
    # soak, a burst while the server was slow failed recalls with "Too many connections" (docs/reliability.md).
    falkordb_max_in_flight: int = Field(default=64, ge=1, le=100)
    # How the FalkorDB server syncs its append-only file (Redis appendfsync); the devstack starts it with
    # appendonly yes and this, and every service logs the server's values at start-up. everysec: a host
    # crash (power, kernel) may lose up to ~1 s of acknowledged writes, a process crash none; always: none
    # on either, at the price of an fsync per write (docs/operations.md, Durability).
    falkordb_appendfsync: Literal["everysec", "always"] = "everysec"

    # The audit log.
    #
    # The audit log (docs/trust.md 'Audit log'): every write appends an entry in its own query; off, writes skip it.
    audit_log_enabled: bool = True


class BusSettings(Group):
    """The event bus: NATS JetStream's stream of memory events, and the outbox relay that publishes to it."""

    # NATS JetStream.
    #
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
    # nats-server sizes the stream's message blocks from max_bytes (its dynBlkSize: 32 kB at up to 128 kB,
    # 4 MiB up to 32 MiB, 8 MiB above) and holds the block being written in memory while consumers read
    # from it: 8 MiB of its RSS at this default, a saw as each block fills and the next begins. A smaller
    # block needs max_bytes under 32 MiB, about 90 minutes of the soak's events (15 operations a second):
    # far short of the resume window above, so the default keeps 8 MiB blocks (docs/reliability.md).
    nats_stream_max_bytes: int = Field(default=2 * 1024**3, ge=0)
    # JetStream's fsync of its store, for the devstack's nats-server (a deployment sets sync_interval in
    # its server config): "always" writes each message to disk before acknowledging it; an interval such
    # as "2m" (NATS's default) may lose that much of acknowledged messages on a host crash, none on a
    # process crash. The graph's outbox and the reconcilers re-drive what a lost event left behind.
    nats_sync_interval: str = Field(default="always", pattern=r"^(always|\d+(ms|s|m|h))$")
    # The devstack's nats-server runs with GOMEMLIMIT at this many MiB (0: Go's default, none). The limit is
    # soft: past it Go collects more often rather than failing. At Go's default GOGC (100) nats-server's RSS
    # climbed for as long as a probe ran without a limit (15 of the stream's 8 MiB blocks, 20 -> 57 MB), and
    # levelled at 41-47 MB after about six blocks with 64 (docs/reliability.md, make soak). A deployment sets
    # GOMEMLIMIT in the container's env (deploy/k8s: under its memory limit).
    nats_memory_limit_mb: int = Field(default=64, ge=0)
    # Go's GOGC for the devstack's nats-server: a collection once the heap has grown this many percent past
    # what the last one left live (Go's default 100: to twice it). At 25 its memory follows its live heap
    # (6-11 MB with the newest block's buffer): in the soak's hour 11-19 MiB held, level from the first block,
    # where at 100 it climbed about half a megabyte a block for hours. "off" collects only as the heap nears
    # NATS_MEMORY_LIMIT_MB (and needs one): nats-server then holds about that budget (53-58 MB at 64).
    nats_gogc: str = Field(default="25", pattern=r"^(off|[1-9]\d{0,3})$")
    # A port for nats-server's Go profiler (0: none), on 127.0.0.1: `make soak` reads its live heap there.
    nats_profile_port: int = Field(default=0, ge=0, le=65535)
    # Copies JetStream keeps of the stream (and its durable consumers): 3 on a 3-node cluster survives the
    # loss of one node; a single server takes only 1. Applied to an existing stream at start-up too.
    nats_stream_replicas: int = Field(default=1, ge=1, le=5)

    # The outbox relay: events recorded with each write, published, then cleared.
    outbox_sweep_seconds: float = 5.0  # how often the relay re-drives events NATS did not take ...
    outbox_grace_seconds: float = 10.0  # ... once they are this old
    outbox_batch_size: int = 500  # events a sweep publishes at once
    publish_concurrency: int = 64  # publish batches in flight at once

    @model_validator(mode="after")
    def _gogc_bounded(self) -> BusSettings:
        if self.nats_gogc == "off" and self.nats_memory_limit_mb == 0:
            raise ValueError(
                "NATS_GOGC=off needs NATS_MEMORY_LIMIT_MB above 0: without a limit nats-server would never collect"
            )
        return self


class VectorSettings(Group):
    """The vector index: qdrant-edge in the process, or a Qdrant server (QDRANT_URL)."""

    # Where the index is, its vectors, and how it is kept.
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
    # Which payload indexes of the in-process index get HNSW links of their own (Qdrant's payload-aware
    # HNSW, built with the main graph, so that a filtered search stays connected): all (Qdrant's default),
    # selective (tenant, tag_prefixes and timestamp: what a search narrows to, each block once), window
    # (tenant and timestamp: each slice of time gets a small graph, so a time window's walk stays among
    # its own points; tags are scanned or left to ACORN below), tenant, or none. Fixed when the shard is
    # made (a rebuild makes it anew). Links are most of a build's time, and more of it as the index grows:
    # with all a 1M rebuild ran at 0.30x its 100k rate, with tenant at 0.58x-0.73x. At 300k (text-shaped
    # vectors, recall's 100 hits) window against tenant cost 5 % more build CPU a point and lifted a 30-day
    # window's walk from 0.48 to 0.83 of an exact search's hits (12 walks of 100 short, against none) and
    # a plain one's from 0.60 to 0.76 (docs/performance.md, issue 27).
    vector_payload_links: Literal["all", "selective", "window", "tenant", "none"] = "window"
    # Filtered searches use Qdrant's ACORN (a search also explores its neighbours' neighbours, so a filter to
    # a small part of the index, a tag or a time window, finds its nearest without payload links), on a
    # shard made without links for tag_prefixes or timestamp; on a shard with them it would only cost, so
    # it is not used there. Qdrant applies it to filters matching under 40 % of the points. At 300k it found
    # as many of a filtered search's true nearest as the links did, at recall's beam; on a rebuilt 100k
    # shard a 30-day window's searches gave the same hits with it as without (VECTOR_EXACT_BELOW holds
    # those; docs/performance.md).
    vector_search_acorn: bool = True
    # A search narrowed to a tag or a time window scans the points that pass exactly, rather than walking
    # the HNSW graph, when the index estimates them at this many or fewer (its estimate is an upper bound,
    # 1.2-2.7x the true count), and scans after all when a walk came back with fewer hits than asked
    # for. With links for the tenant only (VECTOR_PAYLOAD_LINKS=tenant), on a rebuilt 100k shard a walk
    # filtered to a 30-day window (8 % of the points) came back short in 9 searches of 100 (one with 12
    # hits of positive score where the scan found 116), and found 0.70 of the scan's 10 best; the scan
    # took 6.4 ms against the walk's 2.6 ms at the median. A scan costs in proportion to the points it
    # reads (docs/performance.md).
    vector_exact_below: int = Field(default=50_000, ge=0)
    # Searches compare the int8 copies (VECTOR_QUANTIZATION) for this many times the hits asked for and
    # rescore those with the float32 vectors. At 100k plain searches found 0.926 of an exact scan's 10 best
    # with 3 against 0.885 with Qdrant's default (1), in the same time (0.78 against 0.87 ms at the median).
    vector_oversampling: float = Field(default=3.0, ge=1.0)
    # The in-process index flushes its changes to its segments (and truncates its WAL) on a write this long
    # after its last flush. qdrant-edge never flushes by itself (Qdrant's server does every 5 s): unflushed,
    # its RAM and its WAL on disk grow with every write, and a restart replays all of it. A flush takes
    # tens of milliseconds (an fsync), during which the index's other calls wait.
    vector_flush_seconds: float = Field(default=5.0, gt=0)
    # The in-process index is closed and loaded again after this many changes (upserts and deletes; 0: never).
    # An open qdrant-edge shard keeps native memory for every change it has seen (about 0.5-1 KiB each,
    # not given back by its optimisations, given back when it closes): the cap on recall's RSS growth
    # beyond the index's data, about this many KiB. A reopen waits for a running optimisation and holds
    # the index's calls while the shard loads (docs/performance.md has the figures).
    vector_reopen_every: int = Field(default=20_000, ge=0)
    # The in-process index's mapped files (the float32 vectors a search rescores with, the HNSW graph, the
    # payload and its indexes; not the WAL) are locked in memory up to this many MiB, the most searched
    # first (0: left to the page cache). Locking reads them in when the shard opens or is rebuilt, so
    # searches do not start cold, and keeps them in: the kernel may otherwise drop a page left idle (on the
    # benchmark's machine, any page untouched for a minute) and the next search reads it from disk. A 100k
    # shard locked 6.4 KB a memory (610 MiB). Past the budget, or past RLIMIT_MEMLOCK without CAP_IPC_LOCK,
    # the rest stays mapped as before, reported in /health and memgrid_vector_index_resident_bytes
    # (docs/performance.md).
    vector_resident_mb: int = Field(default=4096, ge=0)
