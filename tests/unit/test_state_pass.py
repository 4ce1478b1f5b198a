"""The current-state pass, pure (services.core.domain.state; docs/recall.md):
the state_mode parameter, a memory's own window
state, the bounded, cycle-safe walk to the head of a supersession chain, and
the verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.errors import InvalidArgument
from services.core.domain.model import Memory
from services.core.domain.state import (
    State,
    Successor,
    Verdict,
    edges_at,
    find_head,
    judge,
    resolve_state_mode,
    to_load,
    window_state,
)

AT = datetime(2026, 3, 18, 15, 30, tzinfo=UTC)
EARLY = AT - timedelta(days=30)


def memory(memory_id: str = "m", **fields) -> Memory:
    """A memory valid since EARLY, current at AT unless `fields` say otherwise."""
    values = {
        "id": memory_id,
        "tenant": "acme",
        "content": f"content of {memory_id}",
        "type": "Context",
        "confidence": 0.9,
        "importance": 0.5,
        "timestamp": EARLY,
        "t_valid": EARLY,
        "updated_at": EARLY,
        "last_accessed": EARLY,
        "recorded_at": EARLY,
    }
    values.update(fields)
    return Memory(**values)


def edge(target: str, days_before_at: float | None = 1, kind: str = "INVALIDATED_BY") -> Successor:
    """A supersession edge created `days_before_at` days before AT (negative: after it; None: undated)."""
    created = None if days_before_at is None else AT - timedelta(days=days_before_at)
    return Successor(target, kind, created)


def load(start_ids, graph, records, max_hops=5):
    """Drive to_load as the recall handler does: the starts' edges first, then
    the records and edges of a whole frontier at once. Returns what was
    loaded and the batches read."""
    successors = {i: graph.get(i, []) for i in start_ids}
    loaded = {i: records[i] for i in start_ids if i in records}
    batches = [sorted(start_ids)]
    for _ in range(max_hops + 1):
        needed = to_load(list(start_ids), successors, AT, max_hops)
        if not needed:
            break
        batches.append(sorted(needed))
        successors.update({i: graph.get(i, []) for i in needed})
        loaded.update({i: records[i] for i in needed if i in records})
    return successors, loaded, batches


def verdict_of(start, graph, records, max_hops=5):
    successors, loaded, _ = load([start], graph, records, max_hops)
    return judge(records[start], successors, loaded, AT, max_hops)


DEAD = {
    "expired": {"t_invalid": AT - timedelta(days=1)},
    "archived": {"archived": True},
    "not_yet_valid": {"t_valid": AT + timedelta(days=1)},
}


# resolve_state_mode --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state_mode", "current_only", "history"),
    [
        (None, None, False),
        ("", "", False),
        ("   ", None, False),
        ("current", None, False),
        ("history", None, True),
        (" HISTORY ", None, True),
        ("Current", None, False),
        (None, "true", False),
        (None, "TRUE", False),
        (None, "1", False),
        (None, "yes", False),
        (None, "on", False),
        (None, "false", True),
        (None, " False ", True),
        (None, "0", True),
        (None, "no", True),
        (None, "off", True),
        # state_mode wins over the legacy parameter when both are sent.
        ("current", "false", False),
        ("history", "true", True),
    ],
)
def test_resolve_state_mode(state_mode, current_only, history):
    assert resolve_state_mode(state_mode, current_only) is history


@pytest.mark.parametrize("value", ["all", "currently", "historic", "true", "false"])
def test_resolve_state_mode_rejects_other_state_modes_naming_the_field(value):
    with pytest.raises(InvalidArgument) as caught:
        resolve_state_mode(value, "false")
    assert caught.value.field == "state_mode"
    assert caught.value.reason == "INVALID_STATE_MODE"
    assert caught.value.details["field"] == "state_mode"
    assert value in caught.value.message


@pytest.mark.parametrize("value", ["maybe", "history", "2", "tru"])
def test_resolve_state_mode_rejects_other_current_only_values_naming_the_field(value):
    with pytest.raises(InvalidArgument) as caught:
        resolve_state_mode(None, value)
    assert caught.value.field == "current_only"
    assert caught.value.reason == "INVALID_CURRENT_ONLY"


def test_resolve_state_mode_ignores_a_bad_current_only_when_state_mode_is_sent():
    assert resolve_state_mode("history", "maybe") is True


def test_a_read_whose_default_is_history_still_takes_current_when_sent():
    # by-tag lists every memory, flagged, unless state_mode=current.
    assert resolve_state_mode("", default_history=True) is True
    assert resolve_state_mode("current", default_history=True) is False
    assert resolve_state_mode(None, "true", default_history=True) is False
    assert resolve_state_mode("") is False  # every other read's default is unchanged


# window_state --------------------------------------------------------------------------------------------


def test_a_plain_memory_is_current():
    assert window_state(memory(), AT) is State.CURRENT


@pytest.mark.parametrize(
    ("fields", "state"),
    [
        ({"archived": True}, State.ARCHIVED),
        ({"archived": True, "archived_at": AT - timedelta(hours=1)}, State.ARCHIVED),
        ({"archived": True, "archived_at": AT}, State.ARCHIVED),
        # Archived after `at`: as of then it was not archived yet.
        ({"archived": True, "archived_at": AT + timedelta(hours=1)}, State.CURRENT),
        # archived_at alone (flag cleared) does not archive.
        ({"archived": False, "archived_at": AT - timedelta(hours=1)}, State.CURRENT),
        ({"t_valid": AT + timedelta(seconds=1)}, State.NOT_YET_VALID),
        ({"t_valid": AT}, State.CURRENT),
        ({"t_invalid": AT}, State.EXPIRED),
        ({"t_invalid": AT - timedelta(days=1)}, State.EXPIRED),
        ({"t_invalid": AT + timedelta(seconds=1)}, State.CURRENT),
        # Archived takes precedence over the validity window.
        ({"archived": True, "t_invalid": AT - timedelta(days=1)}, State.ARCHIVED),
        ({"archived": True, "t_valid": AT + timedelta(days=1)}, State.ARCHIVED),
        # A window that opens after `at` is not yet valid, even if it also closes later.
        ({"t_valid": AT + timedelta(days=1), "t_invalid": AT + timedelta(days=2)}, State.NOT_YET_VALID),
    ],
)
def test_window_state(fields, state):
    assert window_state(memory(**fields), AT) is state


def test_window_state_depends_on_the_moment_asked():
    expiring = memory(t_invalid=AT)
    assert window_state(expiring, AT - timedelta(microseconds=1)) is State.CURRENT
    assert window_state(expiring, AT) is State.EXPIRED


# edges_at ------------------------------------------------------------------------------------------------


def test_edges_at_of_a_head_or_an_unknown_node_are_none():
    assert edges_at("A", {"A": []}, AT) == []
    assert edges_at("A", {}, AT) == []


@pytest.mark.parametrize("reverse", [False, True])
def test_edges_are_most_recent_first_whatever_the_order(reverse):
    edges = [edge("OLD", 10), edge("NEW", 2), edge("MID", 5)]
    if reverse:
        edges.reverse()
    assert [e.target_id for e in edges_at("A", {"A": edges}, AT)] == ["NEW", "MID", "OLD"]


def test_edges_created_after_at_and_self_loops_are_left_out():
    edges = [edge("OLD", 10), edge("FUTURE", -1), edge("NOW", 0), edge("A", 1)]
    assert [e.target_id for e in edges_at("A", {"A": edges}, AT)] == ["NOW", "OLD"]


def test_dated_edges_come_before_undated_ones_and_ties_break_by_id():
    edges = [edge("UNDATED", None), edge("DATED", 100), edge("B", 1), edge("C", 1)]
    assert [e.target_id for e in edges_at("A", {"A": edges}, AT)] == ["C", "B", "DATED", "UNDATED"]


# to_load -------------------------------------------------------------------------------------------------


def test_to_load_asks_for_one_frontier_at_a_time():
    successors = {"A": [edge("B", 3)]}
    assert to_load(["A"], successors, AT, 5) == {"B"}
    successors["B"] = [edge("C", 2)]
    assert to_load(["A"], successors, AT, 5) == {"C"}
    successors["C"] = []
    assert to_load(["A"], successors, AT, 5) == set()


def test_to_load_reads_each_frontier_once_for_every_start():
    graph = {"A": [edge("B", 3)], "B": [edge("C", 2)], "C": [edge("D", 1)], "X": [edge("Y", 1)], "K": []}
    records = {i: memory(i) for i in ("A", "B", "C", "D", "X", "Y", "K")}
    _, loaded, batches = load(["A", "X", "K"], graph, records)
    # The starting ids, then each frontier once: B and Y, then C, then D.
    assert batches == [["A", "K", "X"], ["B", "Y"], ["C"], ["D"]]
    assert set(loaded) == set(records)


def test_to_load_stops_at_max_hops_but_reads_the_last_links_record():
    ids = [f"M{i}" for i in range(1, 8)]
    graph = {a: [edge(b, 10 - n)] for n, (a, b) in enumerate(zip(ids, ids[1:], strict=False))}
    _, _, batches = load(["M1"], graph, {i: memory(i) for i in ids}, max_hops=5)
    assert batches[-1] == ["M6"]  # M6 is five hops away: its record is read, its edges are not followed
    assert all("M7" not in batch for batch in batches)


def test_to_load_is_cycle_safe():
    successors = {"A": [edge("B", 2)], "B": [edge("A", 1)]}
    assert to_load(["A"], successors, AT, 5) == set()


def test_to_load_reads_every_branch_of_a_fork():
    assert to_load(["A"], {"A": [edge("B", 1), edge("C", 2)]}, AT, 5) == {"B", "C"}


def test_to_load_leaves_out_edges_created_after_at():
    assert to_load(["A"], {"A": [edge("B", 1), edge("LATER", -1)]}, AT, 5) == {"B"}


# find_head and judge -------------------------------------------------------------------------------------


def test_a_superseded_memory_with_a_current_successor_is_replaced():
    records = {"A": memory("A", importance=1.0), "B": memory("B", importance=0.1)}
    verdict = verdict_of("A", {"A": [edge("B")]}, records)
    assert verdict == Verdict(records["A"], State.SUPERSEDED, records["B"], 1)
    assert verdict.replaced
    assert not verdict.kept


@pytest.mark.parametrize("dead", DEAD.values(), ids=DEAD.keys())
def test_a_successor_that_is_not_current_supersedes_nothing(dead):
    records = {"A": memory("A"), "B": memory("B", **dead)}
    verdict = verdict_of("A", {"A": [edge("B")]}, records)
    assert verdict == Verdict(records["A"], State.CURRENT)
    assert verdict.kept
    assert not verdict.replaced


@pytest.mark.parametrize("dead", DEAD.values(), ids=DEAD.keys())
def test_an_expired_memory_whose_successor_is_not_current_stays_expired(dead):
    # The supersede flow closes the old memory's window: with no active successor it is just expired.
    records = {"A": memory("A", t_invalid=AT - timedelta(days=2)), "B": memory("B", **dead)}
    verdict = verdict_of("A", {"A": [edge("B")]}, records)
    assert (verdict.state, verdict.head) == (State.EXPIRED, None)


def test_a_successor_missing_from_the_graph_supersedes_nothing():
    verdict = verdict_of("A", {"A": [edge("GONE")]}, {"A": memory("A")})
    assert (verdict.state, verdict.head) == (State.CURRENT, None)


def test_a_superseded_memory_is_replaced_even_if_it_has_expired_itself():
    records = {"A": memory("A", t_invalid=AT - timedelta(days=1)), "B": memory("B")}
    assert verdict_of("A", {"A": [edge("B")]}, records).head is records["B"]


def test_a_chain_walks_through_closed_links_to_the_current_head():
    # What the supersede flow leaves: every replaced memory expired, the last one current.
    closed = {"t_invalid": AT - timedelta(days=1)}
    graph = {"A": [edge("B", 3)], "B": [edge("C", 2)], "C": [edge("D", 1)], "D": []}
    records = {"A": memory("A", **closed), "B": memory("B", **closed), "C": memory("C", **closed), "D": memory("D")}
    verdict = verdict_of("A", graph, records)
    assert (verdict.head.id, verdict.hops) == ("D", 3)


@pytest.mark.parametrize("dead", DEAD.values(), ids=DEAD.keys())
def test_a_chain_whose_last_link_is_dead_has_the_last_current_one_as_head(dead):
    graph = {"A": [edge("B", 3)], "B": [edge("C", 2)], "C": [edge("D", 1)], "D": []}
    records = {"A": memory("A"), "B": memory("B"), "C": memory("C"), "D": memory("D", **dead)}
    verdict = verdict_of("A", graph, records)
    assert (verdict.state, verdict.head.id, verdict.hops) == (State.SUPERSEDED, "C", 2)
    # C itself, asked about, stays current: its only successor is dead.
    assert verdict_of("C", graph, records).kept


def test_a_chain_whose_every_successor_is_dead_leaves_the_memory_its_own_state():
    expired = {"t_invalid": AT - timedelta(days=1)}
    graph = {"A": [edge("B", 2)], "B": [edge("C", 1)], "C": []}
    records = {"A": memory("A"), "B": memory("B", **expired), "C": memory("C", archived=True)}
    assert verdict_of("A", graph, records) == Verdict(records["A"], State.CURRENT)


def test_a_fork_follows_the_most_recent_edge_that_leads_to_a_current_memory():
    graph = {"A": [edge("OLD", 5), edge("NEW", 2, "EVOLVED_INTO")], "OLD": [], "NEW": []}
    live = {"A": memory("A"), "OLD": memory("OLD"), "NEW": memory("NEW")}
    assert verdict_of("A", graph, live).head.id == "NEW"
    # The newer branch is dead: the older, active one supersedes.
    dead_new = {**live, "NEW": memory("NEW", t_invalid=AT - timedelta(hours=1))}
    assert verdict_of("A", graph, dead_new).head.id == "OLD"
    # Both dead: nothing supersedes A.
    both = {**dead_new, "OLD": memory("OLD", archived=True)}
    assert verdict_of("A", graph, both).kept


def test_a_fork_prefers_the_deeper_current_memory_of_the_newer_branch():
    graph = {"A": [edge("B", 5), edge("C", 2)], "B": [], "C": [edge("D", 1)], "D": []}
    records = {i: memory(i) for i in "ABCD"}
    verdict = verdict_of("A", graph, records)
    assert (verdict.head.id, verdict.hops) == ("D", 2)


def test_successors_are_judged_at_the_moment_asked():
    graph = {"A": [edge("B")]}
    records = {"A": memory("A"), "B": memory("B", t_valid=AT + timedelta(hours=1))}
    successors, loaded, _ = load(["A"], graph, records)
    assert judge(records["A"], successors, loaded, AT, 5).kept
    later = judge(records["A"], successors, loaded, AT + timedelta(hours=2), 5)
    assert later.head is records["B"]


def test_edges_created_after_at_do_not_supersede():
    records = {"A": memory("A"), "B": memory("B")}
    assert verdict_of("A", {"A": [edge("B", -1)]}, records).kept


def test_max_hops_cuts_a_seven_long_chain_after_five_hops():
    ids = [f"M{i}" for i in range(1, 8)]
    graph = {a: [edge(b, 10 - n)] for n, (a, b) in enumerate(zip(ids, ids[1:], strict=False))}
    graph["M7"] = []
    records = {i: memory(i) for i in ids}
    verdict = verdict_of("M1", graph, records, max_hops=5)
    assert (verdict.head.id, verdict.hops) == ("M6", 5)
    assert verdict_of("M1", graph, records, max_hops=6).head.id == "M7"


@pytest.mark.parametrize(
    ("graph", "head"),
    [
        ({"A": [edge("B", 2)], "B": [edge("A", 1)]}, "B"),
        ({"A": [edge("B", 3)], "B": [edge("C", 2)], "C": [edge("A", 1)]}, "C"),
        ({"A": [edge("B", 4)], "B": [edge("C", 3)], "C": [edge("D", 2)], "D": [edge("B", 1)]}, "D"),
        # B's newest edge goes back to A; its older edge to C is the way on.
        ({"A": [edge("B", 3)], "B": [edge("A", 1), edge("C", 2)], "C": []}, "C"),
    ],
    ids=["two-cycle", "three-cycle", "back-to-the-middle", "older-edge-leaves-the-cycle"],
)
def test_cycles_are_safe(graph, head):
    records = {i: memory(i) for i in "ABCD"}
    assert verdict_of("A", graph, records).head.id == head


def test_each_member_of_a_two_cycle_is_replaced_by_the_other():
    graph = {"A": [edge("B", 2)], "B": [edge("A", 1)]}
    records = {"A": memory("A"), "B": memory("B")}
    successors, loaded, _ = load(["A", "B"], graph, records)
    assert judge(records["A"], successors, loaded, AT, 5).head.id == "B"
    assert judge(records["B"], successors, loaded, AT, 5).head.id == "A"


def test_find_head_is_none_without_edges():
    assert find_head("A", {"A": []}, {"A": memory("A")}, AT, 5) is None


@pytest.mark.parametrize(
    ("fields", "state"),
    [
        ({}, State.CURRENT),
        ({"t_invalid": AT - timedelta(days=1)}, State.EXPIRED),
        ({"t_valid": AT + timedelta(days=1)}, State.NOT_YET_VALID),
        ({"archived": True}, State.ARCHIVED),
    ],
)
def test_a_memory_that_is_not_superseded_gets_its_window_state(fields, state):
    verdict = judge(memory("A", **fields), {"A": []}, {}, AT, 5)
    assert verdict.state is state
    assert verdict.kept is (state is State.CURRENT)
    assert verdict.head is None
    assert verdict.hops == 0


def test_the_whole_pass_replaces_keeps_and_withholds():
    graph = {
        "OLD": [edge("MID", 3)],
        "MID": [edge("NEW", 1, "EVOLVED_INTO")],
        "NEW": [],
        "STALE": [edge("GONE", 1)],
        "GONE": [],
        "KEEP": [],
        "EXP": [edge("DEAD", 1)],
        "DEAD": [],
    }
    records = {
        "OLD": memory("OLD"),
        "MID": memory("MID"),
        "NEW": memory("NEW"),
        "STALE": memory("STALE"),
        "GONE": memory("GONE", t_invalid=AT - timedelta(hours=1)),
        "KEEP": memory("KEEP"),
        "EXP": memory("EXP", t_invalid=AT - timedelta(hours=2)),
        "DEAD": memory("DEAD", archived=True),
    }
    results = ["OLD", "STALE", "KEEP", "EXP"]
    successors, loaded, _ = load(results, graph, records)
    verdicts = {i: judge(records[i], successors, loaded, AT, 5) for i in results}
    assert (verdicts["OLD"].head, verdicts["OLD"].hops) == (records["NEW"], 2)
    assert verdicts["STALE"].kept  # its successor expired: it is still current
    assert verdicts["KEEP"].kept
    assert verdicts["EXP"].state is State.EXPIRED
