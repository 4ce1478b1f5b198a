"""Ranked recall over the real graph and the in-process vector index (no
embedder: the vector arm answers `embedding=` only, so each arm is tested
alone): the time window bounds every arm, and only a current successor
supersedes a memory (docs/recall.md)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.projection import vector_payload
from services.recall.ranked import RankedRecall
from tests.factories import memory_at
from tests.integration import recall_parts

pytestmark = pytest.mark.integration

NOW = datetime(2026, 6, 1, tzinfo=UTC)
YEARS = (2020, 2021, 2022)
WINDOW = {"start": "2021-01-01T00:00:00Z", "end": "2021-12-31T23:59:59Z"}
AXIS = [1.0, 0.0, 0.0, 0.0]
AWAY = [0.0, 0.0, 0.0, 1.0]


def uid(name: str) -> str:
    """Memory ids are UUIDs (vector points are keyed by them)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"recall-scope/{name}"))


def at_year(name: str, year: int, **fields) -> Memory:
    fields.setdefault("embedding", AWAY)
    return memory_at(uid(f"{name}{year}"), datetime(year, 6, 1, tzinfo=UTC), tenant="acme", **fields)


async def put(graph, index, memories: list[Memory]) -> None:
    await graph.writer.create_memories(
        memories, [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories], now_us=1
    )
    await index.upsert([(m.id, m.embedding, vector_payload(m)) for m in memories])


def handlers_on(graph, index, settings) -> RankedRecall:
    return recall_parts.ranked(graph, index, settings.recall.policy(settings.limits), clock=lambda: NOW)


@pytest.fixture
async def years(graph, index, settings):
    """For each arm, a 2020, a 2021 and a 2022 memory it finds; a seed in 2021
    with relations and shared entities to one memory of each year."""
    memories = []
    for year in YEARS:
        memories += [
            at_year("vector", year, embedding=AXIS, content=f"plain note {year}"),
            at_year("keyword", year, content=f"The kumquat harvest of {year}"),
            at_year("metadata", year, content=f"meeting {year}", metadata={"project": "quasar"}),
            at_year("tag", year, content=f"ticket {year}", tags=["nebula"]),
            at_year("related", year, content=f"linked record {year}"),
            at_year("entity", year, content=f"entity record {year}"),
        ]
    seed = at_year("seed", 2021, content="The zeppelin hangar plan")
    await put(graph, index, [*memories, seed])
    relations = [Relation(seed.id, uid(f"related{y}"), "RELATES_TO", 0.9, NOW, {}) for y in YEARS]
    await graph.writer.create_relations(
        "acme", relations, [MemoryEvent.associated("acme", r) for r in relations], now_us=1
    )
    await graph.enrichment.link_entities_and_patterns(
        "acme",
        [(seed.id, "Context", ["entity:place:hangar"])]
        + [(uid(f"entity{y}"), "Context", ["entity:place:hangar"]) for y in YEARS],
        min_members=100,
        max_members=100,
        now_us=1,
    )
    return handlers_on(graph, index, settings)


async def found(handlers: RankedRecall, **params) -> set[str]:
    outcome = await handlers.search(handlers.request("acme", limit=50, diversity_factor=0.0, **params))
    return {c.id for c in outcome.results}


def of_years(name: str, *years: int) -> set[str]:
    return {uid(f"{name}{y}") for y in years}


@pytest.mark.parametrize(
    ("arm", "params"),
    [
        ("vector", {"embedding": AXIS}),
        ("keyword", {"queries": ["kumquat"]}),
        ("metadata", {"queries": ["quasar"]}),
        ("tag", {"queries": ["nebula"]}),
    ],
)
async def test_the_window_bounds_each_arm(years, arm, params):
    every = await found(years, **params)
    assert of_years(arm, *YEARS) <= every  # the arm finds all three without a window
    assert await found(years, **params, **WINDOW) & of_years(arm, *YEARS) == of_years(arm, 2021)
    assert await found(years, **params, time_query="2021") & of_years(arm, *YEARS) == of_years(arm, 2021)
    # The vector arm's hits are all in the window (no other arm brings them).
    if arm == "vector":
        assert await found(years, **params, **WINDOW) <= of_years("vector", 2021) | of_years("seed", 2021) | {
            uid(f"{n}2021") for n in ("keyword", "metadata", "tag", "related", "entity")
        }


@pytest.mark.parametrize(
    ("name", "expand"), [("related", {"expand_relations": True}), ("entity", {"expand_entities": True})]
)
async def test_the_window_bounds_expansion(years, name, expand):
    every = await found(years, queries=["zeppelin"], **expand)
    assert uid("seed2021") in every
    assert of_years(name, *YEARS) <= every
    assert await found(years, queries=["zeppelin"], **expand, **WINDOW) == {uid("seed2021"), uid(f"{name}2021")}


async def test_only_a_current_successor_supersedes_through_recall(graph, index, settings):
    handlers = handlers_on(graph, index, settings)
    t0 = NOW - timedelta(days=10)
    dead = {"t_invalid": NOW - timedelta(days=1)}
    records = {
        name: memory_at(uid(name), t0, tenant="acme", content=content, embedding=AWAY, **fields)
        for name, content, fields in [
            ("kept", "The gazebo is painted green", {}),
            ("gone", "The gazebo was painted blue", dead),
            ("old", "The pergola is painted red", {}),
            ("closed", "The pergola was painted white", dead),
            ("head", "The pergola is painted black", {}),
        ]
    }
    await put(graph, index, list(records.values()))
    edges = [("kept", "gone"), ("old", "closed"), ("closed", "head")]
    relations = [Relation(uid(a), uid(b), "INVALIDATED_BY", 1.0, t0, {}) for a, b in edges]
    await graph.writer.create_relations(
        "acme", relations, [MemoryEvent.associated("acme", r) for r in relations], now_us=1
    )

    # kept's only successor has expired: kept is current, shown as itself.
    outcome = await handlers.search(handlers.request("acme", queries=["gazebo"], limit=10))
    assert [(c.id, c.state_replaces) for c in outcome.results] == [(uid("kept"), None)]
    reads = recall_parts.reads(graph, settings.recall.policy(settings.limits), clock=lambda: NOW)
    read = await reads.get_memory("acme", uid("kept"))
    assert (read.state.value, read.replaced_by) == ("current", None)
    # old -> closed (expired) -> head: the chain walks through the closed link.
    outcome = await handlers.search(handlers.request("acme", queries=["pergola"], limit=10))
    [result] = outcome.results  # old and closed both stand in as head, merged into one
    assert (result.id, result.state_replaces in (uid("old"), uid("closed"))) == (uid("head"), True)
    read = await reads.get_memory("acme", uid("old"))
    assert (read.state.value, read.replaced_by) == ("superseded", uid("head"))
    # The graph views flag their nodes by the same pass.
    views = recall_parts.graph_views(graph, settings.recall.policy(settings.limits), clock=lambda: NOW)
    snapshot = await views.snapshot("acme", limit=20)
    states = {n.memory.id: (n.state.value, n.replaced_by) for n in snapshot.nodes}
    assert states == {
        uid("kept"): ("current", None),
        uid("old"): ("superseded", uid("head")),
        uid("closed"): ("superseded", uid("head")),
        uid("head"): ("current", None),
    }  # gone (expired, superseding nothing) is left out
    history = await views.snapshot("acme", limit=20, state_mode="history")
    flagged = {n.memory.id: n.state.value for n in history.nodes}
    assert (flagged[uid("gone")], flagged[uid("closed")], flagged[uid("kept")]) == ("expired", "superseded", "current")
