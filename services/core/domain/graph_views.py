"""What the graph views show besides memories: counts and MetaPatterns."""

from __future__ import annotations

from dataclasses import dataclass, field

from services.core.domain.model import Relation


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
