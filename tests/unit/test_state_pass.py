"""The current-state pass, pure (services.core.domain.state; spec 000 and
spec 002 sections 2 and 6): the state_mode parameter, a memory's own window
state, the bounded, cycle-safe walk to the head of a supersession chain, and
the verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.errors import InvalidArgument
from services.core.domain.model import Memory
from services.core.domain.state import (
    Chain,
    State,
    Successor,
    Verdict,
    advance,
    judge,
    next_in_chain,
    resolve_state_mode,
    start_chains,
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


def walk(start_ids, graph, max_hops=5):
    """Drive start_chains/advance as the recall handler does: the edges of a
    whole frontier are loaded at once. Returns the chains and the batches read."""
    successors = {i: graph.get(i, []) for i in start_ids}
    batches = [sorted(start_ids)]
    chains = start_chains(list(start_ids), successors, AT)
    for _ in range(max_hops + 1):
        needed = advance(chains, successors, AT, max_hops)
        if not needed:
            break
        batches.append(sorted(needed))
        successors.update({i: graph.get(i, []) for i in needed})
    return chains, batches


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


# next_in_chain -------------------------------------------------------------------------------------------


def test_next_in_chain_is_none_at_a_head_or_an_unknown_node():
    assert next_in_chain("A", {"A": []}, {"A"}, AT) is None
    assert next_in_chain("A", {}, {"A"}, AT) is None


def test_next_in_chain_follows_the_single_edge():
    assert next_in_chain("A", {"A": [edge("B")]}, {"A"}, AT) == "B"


@pytest.mark.parametrize("reverse", [False, True])
def test_the_most_recent_edge_wins_whatever_the_order(reverse):
    edges = [edge("OLD", 10), edge("NEW", 2), edge("MID", 5)]
    if reverse:
        edges.reverse()
    assert next_in_chain("A", {"A": edges}, {"A"}, AT) == "NEW"


def test_edges_created_after_at_are_ignored():
    edges = [edge("OLD", 10), edge("FUTURE", -1)]
    assert next_in_chain("A", {"A": edges}, {"A"}, AT) == "OLD"
    assert next_in_chain("A", {"A": [edge("FUTURE", -1)]}, {"A"}, AT) is None
    # An edge created exactly at `at` counts.
    assert next_in_chain("A", {"A": [edge("NOW", 0)]}, {"A"}, AT) == "NOW"


def test_a_dated_edge_beats_an_undated_one():
    edges = [edge("UNDATED", None), edge("DATED", 100)]
    assert next_in_chain("A", {"A": edges}, {"A"}, AT) == "DATED"
    assert next_in_chain("A", {"A": [edge("UNDATED", None)]}, {"A"}, AT) == "UNDATED"


def test_equal_times_break_ties_by_id_deterministically():
    assert next_in_chain("A", {"A": [edge("B", 1), edge("C", 1)]}, {"A"}, AT) == "C"
    assert next_in_chain("A", {"A": [edge("C", 1), edge("B", 1)]}, {"A"}, AT) == "C"


def test_visited_targets_are_skipped_for_the_next_best_edge():
    edges = [edge("B", 1), edge("C", 5)]
    assert next_in_chain("A", {"A": edges}, {"A", "B"}, AT) == "C"
    assert next_in_chain("A", {"A": edges}, {"A", "B", "C"}, AT) is None


# start_chains and advance --------------------------------------------------------------------------------


def test_start_chains_only_for_memories_superseded_as_of_at():
    successors = {
        "A": [edge("B")],
        "H": [],
        "F": [edge("G", -1)],  # superseded only after `at`
        "S": [edge("S")],  # a self-loop supersedes nothing
    }
    chains = start_chains(["A", "H", "F", "S", "UNKNOWN"], successors, AT)
    assert set(chains) == {"A"}
    assert chains["A"].path == ["A"]
    assert chains["A"].tip == "A"
    assert chains["A"].hops == 0
    assert not chains["A"].done


def test_a_chain_a_b_c_d_walks_to_d_when_every_edge_is_known():
    successors = {"A": [edge("B", 3)], "B": [edge("C", 2)], "C": [edge("D", 1)], "D": []}
    chains = start_chains(["A"], successors, AT)
    assert advance(chains, successors, AT, max_hops=5) == set()
    chain = chains["A"]
    assert chain.path == ["A", "B", "C", "D"]
    assert (chain.tip, chain.hops, chain.done) == ("D", 3, True)


def test_advance_asks_for_missing_successors_one_frontier_at_a_time():
    successors = {"A": [edge("B", 3)]}
    chains = start_chains(["A"], successors, AT)

    assert advance(chains, successors, AT, 5) == {"B"}
    assert chains["A"].path == ["A", "B"]
    assert not chains["A"].done

    successors["B"] = [edge("C", 2)]
    assert advance(chains, successors, AT, 5) == {"C"}
    assert chains["A"].path == ["A", "B", "C"]

    successors["C"] = []  # loaded: C has no successor, so it is the head
    assert advance(chains, successors, AT, 5) == set()
    assert chains["A"].done
    assert chains["A"].tip == "C"

    # A finished chain does not move again.
    successors["C"] = [edge("D", 1)]
    assert advance(chains, successors, AT, 5) == set()
    assert chains["A"].path == ["A", "B", "C"]


def test_chains_sharing_a_tip_ask_for_it_once():
    successors = {"A": [edge("C")], "B": [edge("C")]}
    chains = start_chains(["A", "B"], successors, AT)
    assert advance(chains, successors, AT, 5) == {"C"}


def test_batched_walk_reads_one_frontier_per_hop():
    graph = {
        "A": [edge("B", 3)],
        "B": [edge("C", 2)],
        "C": [edge("D", 1)],
        "X": [edge("Y", 1)],
        "K": [],
    }
    chains, batches = walk(["A", "X", "K"], graph)
    assert chains["A"].tip == "D"
    assert chains["X"].tip == "Y"
    assert "K" not in chains
    # The starting ids, then each frontier once: B and Y, then C, then D.
    assert batches == [["A", "K", "X"], ["B", "Y"], ["C"], ["D"]]
    assert all(c.done for c in chains.values())


def test_a_two_cycle_is_safe_and_stops_at_the_other_memory():
    chains, _ = walk(["A"], {"A": [edge("B", 2)], "B": [edge("A", 1)]})
    assert chains["A"].path == ["A", "B"]
    assert chains["A"].done


def test_each_member_of_a_two_cycle_walks_to_the_other():
    chains, _ = walk(["A", "B"], {"A": [edge("B", 2)], "B": [edge("A", 1)]})
    assert (chains["A"].tip, chains["B"].tip) == ("B", "A")


def test_a_longer_cycle_stops_before_repeating_a_memory():
    chains, batches = walk(["A"], {"A": [edge("B", 3)], "B": [edge("C", 2)], "C": [edge("A", 1)]})
    assert chains["A"].path == ["A", "B", "C"]
    assert chains["A"].done
    assert len(batches) == 3  # A, B, C: A is never asked for again


def test_a_cycle_back_to_the_middle_of_the_path_is_safe():
    graph = {"A": [edge("B", 4)], "B": [edge("C", 3)], "C": [edge("D", 2)], "D": [edge("B", 1)]}
    chains, _ = walk(["A"], graph)
    assert chains["A"].path == ["A", "B", "C", "D"]


def test_a_cycle_falls_back_to_an_older_edge_that_leaves_the_path():
    # B's newest edge goes back to A; its older edge to C is the way on.
    graph = {"A": [edge("B", 3)], "B": [edge("A", 1), edge("C", 2)], "C": []}
    chains, _ = walk(["A"], graph)
    assert chains["A"].path == ["A", "B", "C"]


def test_branching_follows_the_most_recent_edge_at_each_step():
    graph = {
        "A": [edge("B", 5), edge("C", 2)],
        "B": [edge("B2", 1)],
        "C": [edge("D", 1, "EVOLVED_INTO"), edge("E", 1.5)],
        "D": [],
        "E": [],
    }
    chains, batches = walk(["A"], graph)
    assert chains["A"].path == ["A", "C", "D"]
    assert all("B" not in batch for batch in batches)  # the older branch is never read


def test_branches_created_after_at_are_not_followed():
    graph = {"A": [edge("B", 2), edge("LATER", -3)], "B": [edge("C", -1)], "C": []}
    chains, _ = walk(["A"], graph)
    assert chains["A"].path == ["A", "B"]


def test_max_hops_cuts_a_seven_long_chain_after_five_hops():
    ids = [f"M{i}" for i in range(1, 8)]
    graph = {a: [edge(b, 10 - n)] for n, (a, b) in enumerate(zip(ids, ids[1:], strict=False))}
    graph["M7"] = []
    chains, batches = walk(["M1"], graph, max_hops=5)
    chain = chains["M1"]
    assert chain.path == ids[:6]
    assert (chain.tip, chain.hops, chain.done) == ("M6", 5, True)
    # M6's edges are never read: the walk stops at the bound.
    assert all("M6" not in batch for batch in batches)

    chains, _ = walk(["M1"], graph, max_hops=6)
    assert chains["M1"].tip == "M7"


def test_max_hops_stops_even_when_the_tip_edges_are_known():
    successors = {"A": [edge("B", 2)], "B": [edge("C", 1)], "C": []}
    chains = start_chains(["A"], successors, AT)
    assert advance(chains, successors, AT, max_hops=1) == set()
    assert chains["A"].path == ["A", "B"]
    assert chains["A"].done


def test_chain_properties():
    chain = Chain("A", ["A", "B", "C"])
    assert (chain.tip, chain.hops) == ("C", 2)


# judge ---------------------------------------------------------------------------------------------------


def test_a_superseded_memory_with_a_current_head_is_replaced():
    old, head = memory("A", importance=1.0), memory("C", importance=0.1)
    verdict = judge(old, Chain("A", ["A", "B", "C"], done=True), {"C": head}, AT)
    assert verdict == Verdict(old, State.SUPERSEDED, head, 2)
    assert verdict.replaced
    assert not verdict.kept


@pytest.mark.parametrize(
    "head_fields",
    [
        {"t_invalid": AT - timedelta(days=1)},
        {"t_valid": AT + timedelta(days=1)},
        {"archived": True},
    ],
    ids=["expired", "not_yet_valid", "archived"],
)
def test_a_superseded_memory_whose_head_is_not_current_is_withheld(head_fields):
    old = memory("A")
    verdict = judge(old, Chain("A", ["A", "B"], done=True), {"B": memory("B", **head_fields)}, AT)
    assert verdict.state is State.SUPERSEDED
    assert verdict.head is None
    assert verdict.hops == 1
    assert not verdict.replaced
    assert not verdict.kept


def test_a_superseded_memory_whose_head_record_is_missing_is_withheld():
    verdict = judge(memory("A"), Chain("A", ["A", "B"], done=True), {}, AT)
    assert (verdict.state, verdict.head, verdict.kept, verdict.replaced) == (State.SUPERSEDED, None, False, False)


def test_the_head_is_judged_at_the_moment_asked():
    old = memory("A")
    head = memory("B", t_valid=AT + timedelta(hours=1))
    chain = Chain("A", ["A", "B"], done=True)
    assert judge(old, chain, {"B": head}, AT).head is None
    assert judge(old, chain, {"B": head}, AT + timedelta(hours=2)).head is head


def test_a_superseded_memory_is_replaced_even_if_it_has_expired_itself():
    old = memory("A", t_invalid=AT - timedelta(days=1))
    head = memory("B")
    verdict = judge(old, Chain("A", ["A", "B"], done=True), {"B": head}, AT)
    assert verdict.head is head


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
    verdict = judge(memory("A", **fields), None, {}, AT)
    assert verdict.state is state
    assert verdict.kept is (state is State.CURRENT)
    assert verdict.head is None
    assert verdict.hops == 0


def test_a_chain_that_never_moved_counts_as_not_superseded():
    verdict = judge(memory("A"), Chain("A", ["A"], done=True), {"A": memory("A")}, AT)
    assert verdict.state is State.CURRENT
    assert verdict.kept


def test_the_whole_pass_replaces_withholds_and_keeps():
    graph = {
        "OLD": [edge("MID", 3)],
        "MID": [edge("NEW", 1, "EVOLVED_INTO")],
        "NEW": [],
        "STALE": [edge("GONE", 1)],
        "GONE": [],
        "KEEP": [],
    }
    records = {
        "OLD": memory("OLD"),
        "MID": memory("MID"),
        "NEW": memory("NEW"),
        "STALE": memory("STALE"),
        "GONE": memory("GONE", t_invalid=AT - timedelta(hours=1)),
        "KEEP": memory("KEEP"),
    }
    results = ["OLD", "STALE", "KEEP"]
    chains, _ = walk(results, graph)
    heads = {c.tip: records[c.tip] for c in chains.values() if c.hops > 0}
    verdicts = {i: judge(records[i], chains.get(i), heads, AT) for i in results}
    assert verdicts["OLD"].head is records["NEW"]
    assert verdicts["OLD"].hops == 2
    assert verdicts["STALE"].state is State.SUPERSEDED
    assert verdicts["STALE"].head is None
    assert verdicts["KEEP"].kept
