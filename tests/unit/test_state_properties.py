"""The current-state pass against a pure model, on random supersession graphs.

Hypothesis draws graphs of a few memories (chains, forks, cycles, self
loops, edges to memories gone from the graph, edges dated after the read)
whose memories are current, expired, not yet valid or archived. The model
is the rule of docs/recall.md written the plain way: a memory is
superseded exactly when a current memory lies within max_hops supersession
edges of it (breadth-first, every path); its head is then such a memory.
The pass (services/recall/current_state.py, through domain/state.py) runs
over an in-memory reader that loads only what to_load asks for, so the
batched, hop-by-hop loading is checked too.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import example, given, settings
from hypothesis import strategies as st

from services.core.domain.model import Memory
from services.core.domain.state import State, Successor, judge, window_state
from services.recall.current_state import CurrentStatePass
from tests.factories import memory_at

NOW = datetime(2026, 6, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
WINDOWS = ("current", "expired", "not_yet_valid", "archived", "archived_later")


def record(memory_id: str, window: str) -> Memory:
    base = memory_at(memory_id, NOW - 10 * HOUR)
    if window == "expired":
        return _with(base, t_invalid=NOW - HOUR)
    if window == "not_yet_valid":
        return _with(base, t_valid=NOW + HOUR)
    if window == "archived":
        return _with(base, archived=True, archived_at=NOW - HOUR)
    if window == "archived_later":  # archived after the read's time: still current at NOW
        return _with(base, archived=True, archived_at=NOW + HOUR)
    return base


def _with(memory: Memory, **fields) -> Memory:
    return replace(memory, **fields)


@st.composite
def graphs(draw):
    """(records, edges, max_hops): up to 8 memories, some gone from the graph, and random supersession edges."""
    n = draw(st.integers(1, 8))
    ids = [f"m{i}" for i in range(n)]
    gone = {i for i in ids if draw(st.booleans()) and draw(st.booleans()) and i != "m0"}
    records = {i: record(i, draw(st.sampled_from(WINDOWS))) for i in ids if i not in gone}
    edges: dict[str, list[Successor]] = {i: [] for i in ids}
    shape = draw(st.sampled_from(("chain", "fork", "dag", "random")))
    if shape == "chain":  # m0 -> m1 -> ... , maybe closed into a cycle
        pairs = [(ids[k], ids[k + 1]) for k in range(n - 1)]
        if n > 1 and draw(st.booleans()):
            pairs.append((ids[-1], ids[draw(st.integers(0, n - 2))]))
    elif shape == "fork":  # m0 -> several, each a short chain
        pairs = [(ids[0], i) for i in ids[1:] if draw(st.booleans())] + [
            (ids[k], ids[k + 1]) for k in range(1, n - 1) if draw(st.booleans())
        ]
    elif shape == "dag":  # forks that meet again further on: one memory reached by paths of different lengths
        pairs = [(ids[a], ids[b]) for a in range(n) for b in range(a + 1, n) if draw(st.booleans())]
        if draw(st.booleans()):  # towards the lower ids: the walk, trying greater ids first, takes the long way
            pairs = [(b, a) for a, b in pairs]
    else:
        pairs = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=14))
    for source, target in pairs:
        if source in gone:  # a deleted memory has no edges of its own
            continue
        # Dated before the read, undated, or dated after it (not yet there at NOW).
        when = draw(st.sampled_from((NOW - 5 * HOUR, NOW - 2 * HOUR, None, NOW + HOUR)))
        kind = draw(st.sampled_from(("INVALIDATED_BY", "EVOLVED_INTO")))
        edges[source].append(Successor(target, kind, when))
    return records, edges, draw(st.integers(1, 6))


def current(records: dict[str, Memory], memory_id: str) -> bool:
    memory = records.get(memory_id)
    return memory is not None and window_state(memory, NOW) is State.CURRENT


def model_reachable_current(records, edges, start: str, max_hops: int) -> dict[str, int]:
    """Every current memory within max_hops edges (existing at NOW, no self
    loops) of `start`, at its shortest distance."""
    distance = {start: 0}
    frontier = [start]
    for hops in range(1, max_hops + 1):
        following = []
        for node in frontier:
            for edge in edges.get(node, ()):
                if edge.target_id == node or (edge.created_at is not None and edge.created_at > NOW):
                    continue
                if edge.target_id not in distance:
                    distance[edge.target_id] = hops
                    following.append(edge.target_id)
        frontier = following
    return {node: d for node, d in distance.items() if node != start and current(records, node)}


class DictReader:
    """The two reads of MemoryReader the pass uses, over dicts; counts the memories it is asked for."""

    def __init__(self, records, edges):
        self.records, self.edges, self.asked = records, edges, 0

    async def successors(self, tenant, ids):
        self.asked += len(ids)
        return {i: list(self.edges.get(i, [])) for i in ids if i in self.records}

    async def read_candidates(self, tenant, ids):
        self.asked += len(ids)
        return {i: (self.records[i], list(self.edges.get(i, []))) for i in ids if i in self.records}


def run_pass(records, edges, max_hops, starts):
    return asyncio.run(
        CurrentStatePass(DictReader(records, edges), max_hops).verdicts("default", [records[s] for s in starts], NOW)
    )


def fork_that_meets_again():
    """m3 -> m2 -> m1 -> m0 and m3 -> m1, m1 and m2 expired, max_hops 2: the
    walk tries m2 first (the greater id) and reaches m1 at the bound; m0 is
    still within 2 hops through m3 -> m1 (once missed: found by the model)."""
    at = NOW - HOUR
    records = {"m3": record("m3", "current"), "m2": record("m2", "expired")}
    records |= {"m1": record("m1", "expired"), "m0": record("m0", "current")}
    edges = {
        "m3": [Successor("m2", "EVOLVED_INTO", at), Successor("m1", "EVOLVED_INTO", at)],
        "m2": [Successor("m1", "EVOLVED_INTO", at)],
        "m1": [Successor("m0", "EVOLVED_INTO", at)],
        "m0": [],
    }
    return records, edges, 2


@settings(max_examples=400, deadline=None)
@given(graphs())
@example(fork_that_meets_again())
def test_a_memory_is_superseded_exactly_when_a_current_memory_is_within_reach(graph):
    records, edges, max_hops = graph
    starts = sorted(records)
    verdicts = run_pass(records, edges, max_hops, starts)
    for start in starts:
        verdict = verdicts[start]
        reachable = model_reachable_current(records, edges, start, max_hops)
        if reachable:
            assert verdict.state is State.SUPERSEDED, (start, reachable, verdict)
            # The head is current, reachable, and the hops walked fit the bound.
            assert verdict.head.id in reachable and 1 <= verdict.hops <= max_hops, (start, reachable, verdict)
            assert verdict.hops >= reachable[verdict.head.id]
        else:
            # No active replacement: its own window decides.
            assert verdict.head is None and verdict.state is window_state(records[start], NOW), (start, verdict)


@settings(max_examples=200, deadline=None)
@given(graphs(), st.randoms(use_true_random=False))
def test_the_verdicts_do_not_depend_on_how_the_graph_lists_the_edges(graph, rng: random.Random):
    records, edges, max_hops = graph
    shuffled = {k: rng.sample(v, len(v)) for k, v in edges.items()}
    starts = sorted(records)
    first = run_pass(records, edges, max_hops, starts)
    again = run_pass(records, shuffled, max_hops, starts)
    for start in starts:
        a, b = first[start], again[start]
        assert (a.state, a.head and a.head.id, a.hops) == (b.state, b.head and b.head.id, b.hops)


@settings(max_examples=200, deadline=None)
@given(graphs())
def test_the_hop_by_hop_loading_gives_what_the_whole_graph_gives(graph):
    records, edges, max_hops = graph
    starts = sorted(records)
    loaded = run_pass(records, edges, max_hops, starts)
    # judge with every record and edge at hand (ids gone from the graph: no record, no edges).
    whole = {s: judge(records[s], edges, records, NOW, max_hops) for s in starts}
    for start in starts:
        a, b = loaded[start], whole[start]
        assert (a.state, a.head and a.head.id, a.hops) == (b.state, b.head and b.head.id, b.hops)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(WINDOWS), min_size=1, max_size=7))
def test_on_a_chain_the_head_is_the_last_current_memory_within_reach(windows):
    ids = [f"c{i}" for i in range(len(windows))]
    records = {i: record(i, w) for i, w in zip(ids, windows, strict=True)}
    edges = {ids[k]: [Successor(ids[k + 1], "EVOLVED_INTO", NOW - HOUR)] for k in range(len(ids) - 1)}
    max_hops = 5
    verdict = run_pass(records, edges, max_hops, [ids[0]])[ids[0]]
    within = [i for i in ids[1 : max_hops + 1] if current(records, i)]
    if within:
        assert verdict.head.id == within[-1] and verdict.hops == ids.index(within[-1])
    else:
        assert verdict.head is None and verdict.state is window_state(records[ids[0]], NOW)
