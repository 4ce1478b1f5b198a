"""The graph views (/graph/*) and the analysis (/analyze): reads of the
tenant's graph shaped for a viewer, each through the current-state pass.

Every node is flagged with its state, by the current-state pass. In current
mode (the default) a node that is archived, expired or not yet valid is left
out, with its edges; a superseded node (one a current memory replaces: a
node whose successors are all dead is current) is kept, flagged
`superseded` with `replaced_by` (the last current memory of its chain), and
the head is shown beside it. A viewer needs the old node to draw the chain,
and the flag means it is never taken for current (a client that
drops the state is how a superseded memory reads as current). Neighbourhoods
do not walk through withheld nodes. state_mode=history shows every node as
stored, flagged, with nothing withheld and no head added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from services.core.domain.analysis import analysis_document
from services.core.domain.errors import InvalidArgument, NotFound
from services.core.domain.graph_views import GraphStats, PatternNode
from services.core.domain.ids import validate_memory_id
from services.core.domain.model import (
    AUTHORABLE_RELATIONS,
    FALLBACK_TYPE,
    MEMORY_TYPES,
    SYSTEM_RELATIONS,
    Memory,
    Relation,
)
from services.core.domain.recall_request import Scope, clamp_limit
from services.core.domain.state import State, Verdict, resolve_state_mode
from services.core.domain.times import to_micros
from services.core.ports.graph_views import GraphViews as GraphViewStore
from services.core.ports.reads import ViewReads
from services.recall.current_state import CurrentStatePass


@dataclass(frozen=True, slots=True)
class GraphLimits:
    """Bounds of the graph views, from settings."""

    snapshot_default: int
    snapshot_max: int
    neighbors_default: int
    neighbors_max: int
    max_depth: int
    max_edges: int
    analysis_top: int


@dataclass(frozen=True, slots=True)
class Node:
    memory: Memory
    state: State
    replaced_by: str | None = None


@dataclass(slots=True)
class GraphView:
    """Nodes (in order) and the edges between them."""

    nodes: list[Node]
    edges: list[Relation]
    limit: int
    depth: int = 0
    stats: GraphStats | None = None
    #: MetaPatterns with a member among the nodes (snapshot, include_patterns).
    patterns: list[PatternNode] = field(default_factory=list)


@dataclass(slots=True)
class RelationTypes:
    authorable: list[str] = field(default_factory=lambda: list(AUTHORABLE_RELATIONS))
    system: list[str] = field(default_factory=lambda: list(SYSTEM_RELATIONS))


def shown(
    found: list[Memory], verdicts: dict[str, Verdict], *, history: bool, room: int, taken: set[str]
) -> list[Node]:
    """The nodes to show of `found`, in order, at most `room`, skipping (and
    then adding to) `taken`. History mode: every memory, flagged. Current
    mode: current memories, and superseded ones with a current head, each
    followed by its head unless already shown; a superseded memory is left
    out rather than shown without room for its head."""
    nodes: list[Node] = []
    for memory in found:
        if len(nodes) >= room:
            break
        if memory.id in taken:
            continue
        verdict = verdicts[memory.id]
        head = verdict.head
        if history:
            nodes.append(Node(memory, verdict.state, head.id if head else None))
            taken.add(memory.id)
        elif head is not None:
            with_head = head.id not in taken
            if len(nodes) + 1 + with_head > room:
                continue
            nodes.append(Node(memory, State.SUPERSEDED, head.id))
            taken.add(memory.id)
            if with_head:
                nodes.append(Node(head, State.CURRENT))
                taken.add(head.id)
        elif verdict.kept:
            nodes.append(Node(memory, State.CURRENT))
            taken.add(memory.id)
    return nodes


class GraphViews:
    """Snapshot, neighbours, stats, vocabularies and the analysis of a tenant's graph."""

    def __init__(
        self,
        *,
        reader: ViewReads,
        views: GraphViewStore,
        state: CurrentStatePass,
        limits: GraphLimits,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ):
        self._reader = reader
        self._views = views
        self._state = state
        self._limits = limits
        self._clock = clock

    @staticmethod
    def memory_types() -> tuple[list[str], str]:
        """The seven classifier types and the fallback type."""
        return list(MEMORY_TYPES), FALLBACK_TYPE

    @staticmethod
    def relation_types() -> RelationTypes:
        """Relation types clients may author (/associate), and those only the system writes."""
        return RelationTypes()

    async def stats(self, tenant: str) -> GraphStats:
        return await self._views.graph_stats(tenant)

    async def snapshot(
        self, tenant: str, *, limit: int, state_mode: str = "", include_patterns: bool = False
    ) -> GraphView:
        """The most important memories of the tenant (archived ones are never
        candidates) and the edges between them; with include_patterns, the
        MetaPatterns with a member among them (at most `limit`) and their
        edges to those members. A MetaPattern is never a memory node: no
        memory read reaches its label."""
        history = resolve_state_mode(state_mode)
        limit = clamp_limit(limit, self._limits.snapshot_default, self._limits.snapshot_max)
        now = self._clock()
        # A superseded memory shown takes its head's place too: read some spare.
        found = await self._reader.list_memories(Scope(tenant=tenant, at=now, history=history), "importance", 2 * limit)
        verdicts = await self._state.verdicts(tenant, found, now)
        nodes = shown(found, verdicts, history=history, room=limit, taken=set())
        ids = [n.memory.id for n in nodes]
        edges = await self._views.edges_among(tenant, ids, self._limits.max_edges)
        patterns = await self._views.patterns_among(tenant, ids, limit) if include_patterns else []
        return GraphView(nodes, edges, limit, stats=await self._views.graph_stats(tenant), patterns=patterns)

    async def neighbors(
        self, tenant: str, memory_id: str, *, depth: int, limit: int, state_mode: str = ""
    ) -> GraphView:
        """The memory (first, shown in every mode and flagged, as a read by id
        is) and the memories up to `depth` hops from it, nearest first, at
        most `limit` besides it; every edge between the nodes."""
        history = resolve_state_mode(state_mode)
        memory_id = validate_memory_id(memory_id)
        depth = depth or 1
        if not 1 <= depth <= self._limits.max_depth:
            raise InvalidArgument(
                "INVALID_DEPTH",
                f"depth must be between 1 and {self._limits.max_depth}, not {depth}",
                field="depth",
                maximum=self._limits.max_depth,
            )
        limit = clamp_limit(limit, self._limits.neighbors_default, self._limits.neighbors_max)
        centre = await self._reader.get_memory(tenant, memory_id)
        if centre is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        now = self._clock()
        verdicts = await self._state.verdicts(tenant, [centre], now)
        taken: set[str] = set()
        nodes = shown([centre], verdicts, history=history, room=2, taken=taken) or [
            Node(centre, verdicts[centre.id].state)
        ]
        taken.add(centre.id)
        frontier = [centre.id]
        for _ in range(depth):
            room = limit + 1 - len(nodes)
            if room <= 0 or not frontier:
                break
            # Withheld memories take no room: read some spare.
            found = [m for m, _ in await self._views.frontier(tenant, frontier, sorted(taken), 2 * room)]
            found = self._state.trusted_memories(found)  # a memory under review or rejected is no neighbour
            verdicts = await self._state.verdicts(tenant, found, now)
            added = shown(found, verdicts, history=history, room=room, taken=taken)
            nodes += added
            frontier = [n.memory.id for n in added]
        edges = await self._views.edges_among(tenant, [n.memory.id for n in nodes], self._limits.max_edges)
        return GraphView(nodes, edges, limit, depth)

    async def analyze(self, tenant: str) -> dict:
        """The analysis document of the tenant's memories (counts over all of them)."""
        now = self._clock()
        figures = await self._views.analysis_figures(
            tenant, now_us=to_micros(now), top=self._limits.analysis_top, max_hops=self._state.max_hops
        )
        return analysis_document(figures, at=now)
