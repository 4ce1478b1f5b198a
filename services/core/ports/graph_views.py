"""The graph views and the analysis (/graph/*, /analyze)."""

from __future__ import annotations

from typing import Protocol

from services.core.domain.analysis import AnalysisFigures
from services.core.domain.graph_views import GraphStats, PatternNode
from services.core.domain.model import Memory, Relation


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
