"""The graph as exports, backups and restores see it."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from services.core.domain.archive import ArchiveEdge, ArchiveNode


class GraphExport(Protocol):
    """A tenant's memory ids, page by page (the export listing, re-embedding)."""

    async def memory_ids(self, tenant: str, after_id: str, limit: int) -> list[str]:
        """A page of the tenant's memory ids, in id order after `after_id`."""


class GraphSnapshot(Protocol):
    """One point in time of the graph, read by node id windows (a backup's source)."""

    async def max_node_id(self) -> int:
        """The highest node id (-1: no nodes)."""

    async def id_ranges(self, tenant: str | None) -> list[tuple[int, int]]:
        """The [start, stop) node id ranges to walk for the tenant's (None: every tenant's) nodes."""

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
