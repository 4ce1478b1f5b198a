"""Recall's use cases over the test's graph and vector index, each given
the graph ports it uses, as services/recall/bootstrap.py hands them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from services.core.domain.recall_request import RecallPolicy
from services.recall.access import AccessRecorder
from services.recall.current_state import CurrentStatePass
from services.recall.fresh_reads import FreshReads
from services.recall.graph_views import GraphLimits, GraphViews
from services.recall.index_admin import IndexAdmin
from services.recall.listings import Listings, ReadLimits
from services.recall.ranked import RankedRecall
from services.recall.reads import MemoryReads
from services.recall.text_arms import TextArms
from services.recall.vector_arm import VectorArm

LIMITS = ReadLimits(by_tag_default=20, by_tag_max=200, startup_default=10, related_default=5)
GRAPH_LIMITS = GraphLimits(
    snapshot_default=20, snapshot_max=100, neighbors_default=20, neighbors_max=100, max_depth=3, max_edges=100,
    analysis_top=10,
)  # fmt: skip


def now() -> datetime:
    return datetime.now(UTC)


def text_arms(graph, policy: RecallPolicy) -> TextArms:
    return TextArms(text=graph.text, lookup=graph.reader, policy=policy)


def ranked(
    graph,
    vectors,
    policy: RecallPolicy,
    *,
    clock: Callable[[], datetime] = now,
    access: AccessRecorder | None = None,
    text: TextArms | None = None,
    vector: VectorArm | None = None,
    fresh: FreshReads | None = None,
) -> RankedRecall:
    """Ranked recall, by default without an embedder: the vector arm answers `embedding=` only."""
    return RankedRecall(
        reader=graph.reader,
        text=text or text_arms(graph, policy),
        vector=vector or VectorArm(vectors=vectors),
        state=CurrentStatePass(graph.reader, policy.max_hops),
        policy=policy,
        clock=clock,
        access=access,
        fresh=fresh,
    )


def listings(
    graph, policy: RecallPolicy, *, clock: Callable[[], datetime] = now, access: AccessRecorder | None = None
) -> Listings:
    return Listings(
        reader=graph.reader,
        state=CurrentStatePass(graph.reader, policy.max_hops),
        policy=policy,
        limits=LIMITS,
        access=access,
        clock=clock,
    )


def reads(graph, policy: RecallPolicy, *, clock: Callable[[], datetime] = now) -> MemoryReads:
    return MemoryReads(
        reader=graph.reader,
        state=CurrentStatePass(graph.reader, policy.max_hops),
        relation_limit=policy.relation_limit,
        clock=clock,
    )


def graph_views(graph, policy: RecallPolicy, *, clock: Callable[[], datetime] = now) -> GraphViews:
    return GraphViews(
        reader=graph.reader,
        views=graph.views,
        state=CurrentStatePass(graph.reader, policy.max_hops),
        limits=GRAPH_LIMITS,
        clock=clock,
    )


def index_admin(graph, vectors) -> IndexAdmin:
    return IndexAdmin(source=graph.index_source, vectors=vectors, lifecycle=graph.lifecycle, events=None)
