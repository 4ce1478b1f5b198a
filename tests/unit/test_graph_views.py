"""Which nodes a graph view shows (services/recall/graph_views.py `shown`),
pure: the current-state pass's verdicts, history mode, and the room left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.core.domain.model import Memory
from services.core.domain.state import State, Verdict
from services.recall.graph_views import Node, shown

AT = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)


def memory(memory_id: str) -> Memory:
    early = AT - timedelta(days=30)
    return Memory(
        id=memory_id, tenant="acme", content=memory_id, type="Context", confidence=0.9, importance=0.5,
        timestamp=early, t_valid=early, updated_at=early, last_accessed=early, recorded_at=early,
    )  # fmt: skip


A, B, OLD, HEAD, GONE, ORPHAN = (memory(i) for i in ("a", "b", "old", "head", "gone", "orphan"))
VERDICTS = {
    "a": Verdict(A, State.CURRENT),
    "b": Verdict(B, State.CURRENT),
    "old": Verdict(OLD, State.SUPERSEDED, HEAD, 1),
    "head": Verdict(HEAD, State.CURRENT),
    "gone": Verdict(GONE, State.EXPIRED),
    "orphan": Verdict(ORPHAN, State.SUPERSEDED, None, 2),  # its chain has no current head
}


def ids(nodes: list[Node]) -> list[str]:
    return [n.memory.id for n in nodes]


def test_current_mode_withholds_and_follows_a_superseded_node_with_its_head():
    taken: set[str] = set()
    nodes = shown([A, OLD, GONE, ORPHAN, B], VERDICTS, history=False, room=10, taken=taken)
    assert ids(nodes) == ["a", "old", "head", "b"]
    assert nodes[1] == Node(OLD, State.SUPERSEDED, "head") and nodes[2] == Node(HEAD, State.CURRENT)
    assert taken == {"a", "old", "head", "b"}


def test_a_head_already_shown_is_not_repeated():
    taken = {"head"}
    nodes = shown([OLD, HEAD, A], VERDICTS, history=False, room=10, taken=taken)
    assert ids(nodes) == ["old", "a"] and nodes[0].replaced_by == "head"


def test_a_superseded_node_without_room_for_its_head_is_left_out():
    assert ids(shown([OLD, A, B], VERDICTS, history=False, room=1, taken=set())) == ["a"]
    assert ids(shown([OLD, A, B], VERDICTS, history=False, room=2, taken=set())) == ["old", "head"]
    assert ids(shown([A, OLD, B], VERDICTS, history=False, room=2, taken=set())) == ["a", "b"]


def test_history_mode_shows_everything_as_found_flagged():
    nodes = shown([A, OLD, GONE, ORPHAN], VERDICTS, history=True, room=10, taken=set())
    assert ids(nodes) == ["a", "old", "gone", "orphan"]  # no head added
    assert [n.state for n in nodes] == [State.CURRENT, State.SUPERSEDED, State.EXPIRED, State.SUPERSEDED]
    assert nodes[1].replaced_by == "head" and nodes[3].replaced_by is None
    assert ids(shown([A, OLD, GONE], VERDICTS, history=True, room=2, taken={"a"})) == ["old", "gone"]
