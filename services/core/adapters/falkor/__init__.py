"""The graph, source of truth, on FalkorDB: one class per port over one shared connection.

Times are stored as epoch microseconds (exact and sortable), metadata as JSON
text (FalkorDB refuses map properties), the embedding as base64 float32 so the
vector index can be rebuilt from the graph without re-embedding. Every query
filters on the tenant; each write and the events it causes are one query (a
transactional outbox).

`FalkorGraph` is what a composition root builds (services/core/wiring.py
graph_store); a service's bootstrap hands each consumer the parts it may use.
"""

from __future__ import annotations

from typing import Any

from services.core.adapters.falkor.audit import AuditTail, FalkorAuditLog
from services.core.adapters.falkor.backups import FalkorGraphBackup, FalkorGraphRestore
from services.core.adapters.falkor.connection import FalkorConnection
from services.core.adapters.falkor.consolidation import FalkorConsolidationStore
from services.core.adapters.falkor.enrichment import FalkorEnrichmentStore
from services.core.adapters.falkor.failures import timed_out
from services.core.adapters.falkor.fulltext import DF_CACHE_SECONDS, FalkorTextSearch
from services.core.adapters.falkor.outbox import FalkorOutbox
from services.core.adapters.falkor.reads import EntityBounds, FalkorIndexSource, FalkorMemoryReader
from services.core.adapters.falkor.rows import memory_to_row, row_to_memory
from services.core.adapters.falkor.schema import FalkorLifecycle
from services.core.adapters.falkor.scratch_replica import ScratchSpec
from services.core.adapters.falkor.trust import FalkorTrustStore
from services.core.adapters.falkor.views import FalkorGraphExport, FalkorGraphViews
from services.core.adapters.falkor.writes import FalkorMemoryWriter

__all__ = [
    "DF_CACHE_SECONDS",
    "EntityBounds",
    "FalkorConnection",
    "FalkorGraph",
    "ScratchSpec",
    "memory_to_row",
    "row_to_memory",
    "timed_out",
]


class FalkorGraph:
    """One FalkorDB connection and an implementation of each graph port over it.

    Attributes (stable: bootstraps pass them to the consumers):
    `lifecycle` (GraphLifecycle), `writer` (MemoryWriter), `outbox` (Outbox),
    `reader` (MemoryReader), `text` (TextSearch), `index_source` (IndexSource),
    `views` (GraphViews), `export` (GraphExport), `enrichment` (EnrichmentStore),
    `consolidation` (ConsolidationPasses, the run ledger and leases: ports/runs.py, leases.py),
    `trust` (TrustWriter, ReviewReads), `backups` (GraphBackup), `restore` (GraphRestore),
    `audit` (AuditReader, AuditSealing);
    `connection` is the FalkorConnection they share.
    """

    def __init__(
        self,
        *,
        df_cache_seconds: float = DF_CACHE_SECONDS,
        entity_bounds: EntityBounds | None = None,
        audit_log: bool = True,
        backup_scratch: ScratchSpec | None = None,
        **connection: Any,
    ):
        """`connection`: FalkorConnection's keyword arguments (host, port, graph, retries, query timeout);
        `audit_log`: whether writes append audit entries (AUDIT_LOG_ENABLED)."""
        self.connection = FalkorConnection(**connection)
        self.lifecycle = FalkorLifecycle(self.connection)
        self.writer = FalkorMemoryWriter(self.connection)
        self.outbox = FalkorOutbox(self.connection)
        self.reader = FalkorMemoryReader(self.connection, entity_bounds or EntityBounds())
        self.text = FalkorTextSearch(self.connection, df_cache_seconds=df_cache_seconds)
        self.index_source = FalkorIndexSource(self.connection)
        self.views = FalkorGraphViews(self.connection)
        self.export = FalkorGraphExport(self.connection)
        self.enrichment = FalkorEnrichmentStore(self.connection)
        self.consolidation = FalkorConsolidationStore(self.connection)
        self.trust = FalkorTrustStore(self.connection)
        self.backups = FalkorGraphBackup(self.connection, backup_scratch)
        self.restore = FalkorGraphRestore(self.connection)
        self.audit = FalkorAuditLog(self.connection)
        if not audit_log:
            tail = AuditTail(enabled=False)
            for store in (self.writer, self.enrichment, self.consolidation, self.trust):
                store._audit = tail
