"""Which recall replica this process is, and so which durable consumer feeds
its vector index.

Replicas with the embedded index (qdrant-edge, no QDRANT_URL) each hold a
full index of their own, so each reads every event through a durable of its
own, `<PROJECTOR_DURABLE>-<replica id>`: sharing one would split the events
between them, each index missing the other's half. Replicas with a Qdrant
server write one shared index and share the one durable, PROJECTOR_DURABLE,
so each event is projected once."""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path
from typing import Protocol

from services.core.settings import ConsumerSettings, ProcessSettings, VectorSettings

#: What a JetStream durable name may hold (no ., *, >, whitespace or path separators).
_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class ReplicaGroups(Protocol):
    """The settings groups that say which replica a process is (a loaded Settings has them)."""

    @property
    def consumers(self) -> ConsumerSettings: ...
    @property
    def vectors(self) -> VectorSettings: ...
    @property
    def process(self) -> ProcessSettings: ...


def index_path(vectors: VectorSettings, process: ProcessSettings) -> Path:
    """Where the embedded index of this process lives (services.core.wiring.vector_index)."""
    return process.memgrid_data_dir / "vectors" / vectors.qdrant_collection


def replica_id(settings: ReplicaGroups) -> str:
    """RECALL_REPLICA_ID, else the host name and a digest of the index's
    absolute path: the index is what the durable feeds, so two replicas on
    one host (each with its own data directory) never share one, and a
    replica keeps its durable across restarts on the same host and disk."""
    if settings.consumers.recall_replica_id:
        return _NOT_IN_A_NAME.sub("-", settings.consumers.recall_replica_id)
    digest = hashlib.sha256(str(index_path(settings.vectors, settings.process).resolve()).encode()).hexdigest()[:8]
    return f"{_NOT_IN_A_NAME.sub('-', socket.gethostname())}-{digest}"


def projector_durable(settings: ReplicaGroups) -> str:
    """The durable that feeds this process's vector index: one per replica
    with the embedded index, the shared PROJECTOR_DURABLE with a Qdrant server."""
    if settings.vectors.qdrant_url:
        return settings.consumers.projector_durable
    return f"{settings.consumers.projector_durable}-{replica_id(settings)}"


def projector_inactive_seconds(settings: ReplicaGroups) -> float | None:
    """How long JetStream keeps a replica's own durable with nobody reading it
    (a replica gone for good: its host renamed, its disk lost); None for the
    shared durable, which outlives any one replica."""
    inactive = settings.consumers.recall_projector_inactive_seconds
    if settings.vectors.qdrant_url or inactive == 0:
        return None
    return inactive


def stream_durables(settings: ReplicaGroups) -> tuple[str, ...]:
    """The durables whose retention lag a bus's status reports (docs/operations.md, Retention): this
    process's projector's, embed's and enrich's."""
    return (projector_durable(settings), settings.consumers.embed_durable, settings.consumers.enrich_durable)
