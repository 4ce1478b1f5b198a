"""Enrichment's reads and its writes of the fields and edges it owns: the
embedding stage, the enrichment pipeline and the reconciler each hold their own port."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.embedding_text import Neighbours, Preceding
from services.core.domain.model import Memory, MemoryEvent
from services.core.ports.graph import MemoryLookup


class PrecedingContents(Protocol):
    """What an embedding text reads besides the memory: the ones written around it."""

    async def neighbours(
        self, tenant: str, items: list[Preceding], window_us: int, *, following: bool
    ) -> dict[str, Neighbours]:
        """Per memory id, the memory written just before it and (with
        `following`) the one just after it (domain/embedding_text.py: same
        tenant, within window_us, sharing one of its tags when it has any);
        ids with neither are left out."""


class EmbeddingStore(MemoryLookup, PrecedingContents, Protocol):
    """The embedding stage's reads and its write of vectors."""

    async def embedding_models(self, tenant: str, memory_ids: list[str]) -> dict[str, str]:
        """The model the embedding stage recorded for each memory's vector
        (left out: a client-supplied vector, which is never replaced)."""

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


class EnrichmentStore(MemoryLookup, PrecedingContents, Protocol):
    """The pipeline's reads and its writes of the fields and edges enrichment owns."""

    async def embedding_models(self, tenant: str, memory_ids: list[str]) -> dict[str, str]:
        """The model the embedding stage recorded for each memory's vector."""

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


class EnrichmentBacklog(Protocol):
    """The reconciler's view: memories enrichment or the embedding stage has not finished."""

    async def find_unenriched(self, recorded_before_us: int, limit: int) -> list[tuple[str, str]]: ...

    async def count_unenriched(self, tenant: str) -> int:
        """The tenant's memories enrichment has not finished."""

    async def find_unembedded(self, changed_before_us: int, limit: int) -> list[tuple[str, str]]:
        """(tenant, id) of memories without a vector, last changed before the time."""

    async def count_unembedded(self, tenant: str) -> int:
        """The tenant's memories without a vector."""
