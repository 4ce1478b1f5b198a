"""The in-memory fake (tests/fakes.py) against FalkorDB: the same scripted
cases on both stores, and every observation must be equal, so the fast
handler tier (tests/unit/test_ingest_handlers.py, test_recall_handlers.py)
tests what ingest and recall do on the real store."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.idempotency import IdempotencyClaim
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.recall_request import Scope
from services.core.domain.tags import tag_prefixes
from services.core.domain.times import to_micros
from services.core.domain.timewindow import Window
from tests.factories import memory_at
from tests.fakes import InMemoryGraph, outbox_size

pytestmark = pytest.mark.integration

NOW = datetime(2026, 5, 1, 9, 30, 0, 123456, tzinfo=UTC)
NOW_US = to_micros(NOW)


def _memory(memory_id: str, tenant: str = "a", tags: tuple[str, ...] = (), **fields) -> Memory:
    return memory_at(
        memory_id, NOW, tenant=tenant, content=f"content of {memory_id}", tags=list(tags),
        tag_prefixes=tag_prefixes(list(tags)), metadata={"source": "test", "n": 1}, **fields,
    )  # fmt: skip


def _created(memory: Memory) -> MemoryEvent:
    return MemoryEvent.for_memory(EventKind.CREATED, memory, NOW)


def _claim(owner: str, key: str = "k", tenant: str = "a", expires: datetime = NOW + timedelta(minutes=1)):
    return IdempotencyClaim(tenant, key, owner, f"hash-{owner}", to_micros(expires))


def _relation(source: str, target: str, type: str = "RELATES_TO", strength: float = 0.5, **properties) -> Relation:
    return Relation(source, target, type, strength, NOW, properties)


async def _look(store, tenant: str, ids: list[str]) -> list:
    """What a lookup sees of these ids: each record's comparable fields."""
    found = await store.get_memories(tenant, ids)
    return [
        (i, m.content, m.version, m.tags, m.metadata, m.t_invalid, m.superseded_at) if (m := found.get(i)) else None
        for i in ids
    ]


async def scenario(writer, outbox) -> list:
    """Every rule of MemoryLookup, MemoryWriter and Outbox that ingest relies on, observed."""
    seen: list = []
    a1, a2, a3 = _memory("a1", tags=("Project:Alpha",)), _memory("a2", tags=("alpha",)), _memory("a3")
    b1 = _memory("b1", tenant="b", tags=("alpha",))
    seen.append(await writer.create_memories([a1, a2], [_created(a1), _created(a2)], now_us=NOW_US))
    seen.append(await writer.create_memories([b1], [_created(b1)], now_us=NOW_US))
    # Idempotency: the owner writes, another request with the key does not, an expired key is taken over.
    seen.append(await writer.create_memories([a3], [_created(a3)], now_us=NOW_US, claim=_claim("one")))
    seen.append(await writer.create_memories([a3], [_created(a3)], now_us=NOW_US, claim=_claim("two")))
    seen.append(await writer.get_idempotency("a", "k", NOW_US))
    seen.append(await writer.get_idempotency("b", "k", NOW_US))
    seen.append(await writer.get_idempotency("a", "k", NOW_US + 120_000_000))
    # A batch's item keys: each claim stands alone; one held by another request is reported, not taken.
    seen.append(await writer.claim_idempotency([(_claim("one", "i1"), ["m1"]), (_claim("one", "i2"), ["m2"])], NOW_US))
    seen.append(await writer.claim_idempotency([(_claim("two", "i2"), ["x"]), (_claim("two", "i3"), ["m3"])], NOW_US))
    seen.append(sorted((await writer.get_idempotency_many("a", ["i1", "i2", "i3", "k", "none"], NOW_US)).items()))
    seen.append(await writer.get_idempotency_many("b", ["i1"], NOW_US))
    later = NOW_US + 120_000_000  # past the claims' expiry: another request takes i1 over
    taking_over = _claim("three", "i1", expires=NOW + timedelta(hours=1))
    seen.append(await writer.claim_idempotency([(taking_over, ["n1"])], later))
    seen.append(await writer.get_idempotency_many("a", ["i1", "i2"], later))
    seen.append(await writer.count_memories("a"))
    seen.append(await writer.count_memories("b"))
    seen.append(await writer.count_memories())
    seen.append(await _look(writer, "a", ["a1", "a2", "a3", "b1", "zz"]))
    seen.append((await writer.get_memory("b", "a1")) is None)
    seen.append(sorted(await writer.find_ids_by_tags("a", ["alpha", "project:alpha"], 10)))
    seen.append(sorted(await writer.find_ids_by_tags("b", ["alpha"], 10)))
    # Compare-and-set: the right version writes once; a stale one, or another tenant, does not.
    changed = replace(a1, content="changed", version=2, updated_at=NOW + timedelta(seconds=1))
    event = MemoryEvent.for_memory(EventKind.UPDATED, changed, NOW, content_changed=True)
    seen.append(await writer.update_memory(changed, 1, event, now_us=NOW_US))
    seen.append(await writer.update_memory(replace(changed, content="again"), 1, event, now_us=NOW_US))
    seen.append(await writer.update_memory(replace(b1, tenant="a", version=2), 1, event, now_us=NOW_US))
    seen.append(await _look(writer, "a", ["a1"]))
    # Relations: both ends in the tenant; a repeat refreshes; a supersession edge dates its source.
    relations = [
        _relation("a1", "a2", strength=0.7, note="first"),
        _relation("a1", "b1"),
        _relation("a2", "a3", "INVALIDATED_BY", 1.0),
        _relation("a1", "a2", strength=0.9),
    ]
    events = [MemoryEvent.associated("a", r) for r in relations]
    seen.append(await writer.create_relations("a", relations, events, now_us=NOW_US + 5))
    seen.append(await _look(writer, "a", ["a2"]))
    # Supersede: a stale version writes nothing; the right one stores, closes and links.
    a4 = _memory("a4")
    closed = replace(a3, t_invalid=NOW, version=2)
    edge = _relation("a3", "a4", "EVOLVED_INTO", 1.0)
    evs = [_created(a4), MemoryEvent.for_memory(EventKind.SUPERSEDED, closed, NOW), MemoryEvent.associated("a", edge)]
    seen.append(await writer.supersede(closed, 7, a4, edge, evs, now_us=NOW_US))
    seen.append(await writer.supersede(closed, 1, a4, edge, evs, now_us=NOW_US))
    seen.append(await _look(writer, "a", ["a3", "a4"]))
    # Delete: only the tenant's; an edge to a deleted memory cannot be made again.
    gone = [MemoryEvent.deleted("a", i, NOW) for i in ("a2", "b1", "nope")]
    seen.append(sorted(await writer.delete_memories("a", gone, now_us=NOW_US + 10)))
    again = [_relation("a1", "a2")]
    seen.append(await writer.create_relations("a", again, [MemoryEvent.associated("a", again[0])], now_us=NOW_US))
    seen.append(await writer.count_memories())
    # The outbox: every write's events; older_than and limit hold (the order
    # of events written at the same time is the engine's).
    pending = await outbox.pending_outbox(NOW_US + 10, 100)
    seen.append(sorted((e.event.kind, e.event.memory_id, e.event_id) for e in pending))
    seen.append(len(await outbox.pending_outbox(NOW_US + 11, 100)))
    seen.append(len(await outbox.pending_outbox(NOW_US + 1, 100)))
    seen.append(len(await outbox.pending_outbox(NOW_US + 11, 3)))
    created = [e.event_id for e in pending if e.event.kind is EventKind.CREATED]
    await outbox.delete_outbox([*created, "unknown"])
    seen.append(await outbox_size(outbox))
    seen.append(await outbox.purge_idempotency(NOW_US + 120_000_000))
    seen.append(await writer.get_idempotency("a", "k", NOW_US))
    return seen


def _falkor_ports(graph):
    """The writer and outbox ports of the FalkorDB adapter (a bundle of
    per-port parts, or one store that is all of them)."""
    return getattr(graph, "writer", graph), getattr(graph, "outbox", graph)


async def test_the_fake_and_falkordb_observe_the_same(graph):
    fake = InMemoryGraph()
    expected = await scenario(fake, fake)
    observed = await scenario(*_falkor_ports(graph))
    for step, (want, got) in enumerate(zip(expected, observed, strict=True)):
        assert got == want, f"step {step}: FalkorDB {got!r}, fake {want!r}"


# The reader ----------------------------------------------------------------------------------------

HOUR = timedelta(hours=1)


def _at(memory_id: str, tags: tuple[str, ...] = (), *, hours: float = 0, tenant: str = "r", **fields) -> Memory:
    """A memory of the reader scenario, stamped and valid from `hours` before
    NOW, updated at a time of its own (another order than the timestamps')."""
    at = NOW - hours * HOUR
    times = {"timestamp": at, "t_valid": at, "updated_at": NOW - (hours % 4) * HOUR}
    return replace(_memory(memory_id, tenant, tags), **{**times, **fields})


def _ids(memories: list[Memory]) -> list[str]:
    return [m.id for m in memories]


def _edges(relations: list[Relation]) -> list[tuple]:
    return [(r.source_id, r.type, r.target_id, r.strength, r.created_at, r.properties) for r in relations]


async def _seed(writer, mention) -> None:
    """One tenant's records and edges, written through the writer port: a
    supersession chain (old -> mid by supersede, mid -> head by an edge), an
    expired, an archived, a not-yet-valid and a later-recorded memory, tags
    for every tag rule, spread-out timestamps; a second tenant alike; and
    the entities they mention (enrichment's MENTIONS edges)."""
    memories = [
        _at("c1", ("Project:Alpha:API", "db"), importance=0.9, embedding=[0.5, -0.25, 1.0, 0.0]),
        _at("c2", ("project:beta",), hours=3),
        _at("c3", ("Alpha",), hours=3),
        _at("exp", ("db",), hours=5, importance=0.8, t_invalid=NOW - HOUR),
        _at("arch", ("project:alpha",), hours=6, archived=True, archived_at=NOW - HOUR),
        _at("future", ("db",), hours=1, t_valid=NOW + 24 * HOUR),
        _at("late", ("alpha",), hours=2, recorded_at=NOW + HOUR),
        _at("old", ("chain",), hours=30, importance=0.3),
        _at("head", ("chain",), hours=10, importance=0.4),
        _at("q1", ("alpha", "db"), tenant="q"),
        _at("q2", ("alpha",), tenant="q", hours=1),
    ]
    by_tenant: dict[str, list[Memory]] = {}
    for memory in memories:
        by_tenant.setdefault(memory.tenant, []).append(memory)
    for group in by_tenant.values():
        assert await writer.create_memories(group, [_created(m) for m in group], now_us=NOW_US)
    # old -> mid by the supersede flow (closing old two hours ago), mid ->
    # head by an edge written an hour ago (which marks mid superseded).
    old = memories[7]
    closed = replace(old, t_invalid=NOW - 2 * HOUR, superseded_at=NOW - 2 * HOUR, version=2)
    mid = _at("mid", ("chain",), hours=20, importance=0.35)
    link = Relation("old", "mid", "INVALIDATED_BY", 1.0, NOW - 2 * HOUR, {"reason": "moved"})
    events = [_created(mid), MemoryEvent.for_memory(EventKind.SUPERSEDED, closed, NOW)]
    assert await writer.supersede(closed, 1, mid, link, [*events, MemoryEvent.associated("r", link)], now_us=NOW_US)
    relations = [
        Relation("mid", "head", "EVOLVED_INTO", 0.95, NOW - HOUR, {"confidence": 0.8}),
        _relation("c1", "c2", strength=0.9),
        _relation("c3", "c1", "LEADS_TO", 0.4),
        _relation("c1", "arch", strength=0.3),
        _relation("c1", "exp", "SIMILAR_TO", 0.2),
        _relation("c2", "c3", strength=0.6, note="both ways"),
        _relation("c3", "c2", "PREFERS_OVER", 0.55, context="tests"),
        _relation("exp", "future", strength=0.7),
        # Temporal adjacency at full strength: listed after every other kind all the same.
        _relation("c1", "c3", "PRECEDED_BY", 1.0),
        _relation("q1", "q2", strength=0.95),  # another tenant's: never seen from r
    ]
    events = [MemoryEvent.associated("r", r) for r in relations]
    assert await writer.create_relations("r", relations[:-1], events[:-1], now_us=to_micros(NOW - HOUR)) == [*range(9)]
    assert await writer.create_relations("q", relations[-1:], events[-1:], now_us=to_micros(NOW - HOUR)) == [0]
    await mention("r", [
        ("c1", ["postgres", "redis", "solo", "common"]), ("c2", ["postgres", "redis", "common"]),
        ("c3", ["postgres", "common"]), ("exp", ["common"]), ("head", ["postgres"]),
    ])  # fmt: skip
    await mention("q", [("q1", ["postgres", "redis"]), ("q2", ["postgres", "common"])])


#: (scope, order, limit, offset, with_archived) of each listing the scenario observes.
LISTINGS = [
    (Scope("r", NOW), "importance", 50, 0, False),
    (Scope("r", NOW), "importance", 50, 0, True),
    (Scope("r", NOW, history=True), "importance", 50, 0, False),
    (Scope("r", NOW, history=True), "importance", 50, 0, True),
    (Scope("r", NOW, as_of=NOW), "importance", 50, 0, False),
    (Scope("r", NOW + 2 * HOUR, history=True, as_of=NOW + 2 * HOUR), "time_desc", 50, 0, False),
    (Scope("r", NOW - 3 * HOUR), "time_asc", 50, 0, False),
    (Scope("r", NOW - 1.5 * HOUR), "time_asc", 50, 0, False),
    (Scope("r", NOW, tags=("project",)), "importance", 50, 0, True),
    (Scope("r", NOW, tags=("project", "project:alpha"), tag_mode="all"), "importance", 50, 0, True),
    (Scope("r", NOW, tags=("alpha", "db"), tag_match="exact"), "importance", 50, 0, True),
    (Scope("r", NOW, tags=("project:alpha:api", "db"), tag_mode="all", tag_match="exact"), "importance", 50, 0, False),
    (Scope("r", NOW, tags=("project:alpha",), tag_match="exact"), "importance", 50, 0, True),
    (Scope("r", NOW, history=True, exclude_tags=("project", "chain")), "time_desc", 50, 0, False),
    (Scope("r", NOW, history=True, exclude_tags=("alpha",), tag_match="exact"), "time_desc", 50, 0, False),
    (Scope("r", NOW, history=True, window=Window(NOW - 20 * HOUR, NOW - 3 * HOUR)), "time_desc", 50, 0, True),
    (Scope("r", NOW, history=True, window=Window(start=NOW - 3 * HOUR)), "updated_desc", 50, 0, False),
    (Scope("r", NOW, history=True, window=Window(end=NOW - 3 * HOUR)), "updated_asc", 50, 0, False),
    (Scope("r", NOW, history=True), "time_desc", 3, 2, True),
    (Scope("r", NOW, history=True), "importance", 3, 20, True),
    (Scope("q", NOW, tags=("alpha",)), "importance", 50, 0, False),
]


async def reader_scenario(writer, reader, mention) -> list:
    """Every MemoryReader method on the seeded tenant, observed."""
    await _seed(writer, mention)
    seen: list = []
    everyone = ["c1", "c2", "c3", "exp", "arch", "future", "late", "old", "mid", "head", "q1", "nope"]
    seen.append(await _look(reader, "r", everyone))
    seen.append(sorted((await reader.get_memories("r", ["c1"]))["c1"].embedding or []))
    seen.append(await reader.count_memories("r"))
    # A read by id: the record with its strongest relations, its access time set (even backwards).
    for limit in (2, 10):
        memory, relations = await reader.read_memory("r", "c1", accessed_us=NOW_US + 7, relation_limit=limit)
        seen.append((memory.id, memory.last_accessed, memory.embedding, _edges(relations)))
    seen.append(await reader.read_memory("r", "q1", accessed_us=NOW_US, relation_limit=5))
    seen.append(await reader.read_memory("r", "nope", accessed_us=NOW_US, relation_limit=5))
    await reader.read_memory("r", "c2", accessed_us=NOW_US - 1_000_000, relation_limit=0)
    seen.append([(m.id, m.last_accessed) for m in (await reader.get_memories("r", ["c1", "c2"])).values()])
    # Candidates: records without embeddings; supersession edges of the superseded only.
    candidates = await reader.read_candidates("r", ["old", "mid", "head", "c1", "q1", "nope"])
    seen.append(sorted((i, m, sorted(s, key=repr)) for i, (m, s) in candidates.items()))
    seen.append(await reader.read_candidates("r", []))
    found = await reader.successors("r", ["old", "mid", "head", "c1", "q1", "nope"])
    seen.append({i: sorted(s, key=repr) for i, s in found.items()})
    # Relations, both directions, strongest first, per memory.
    for limit in (2, 10, 0):
        found = await reader.relations_of("r", ["c1", "c2", "q1", "nope"], limit)
        seen.append({i: _edges(r) for i, r in found.items()})
    seen.append(await reader.relations_of("r", [], 5))
    # Neighbours: per seed, strongest first, within the bounds.
    for types, per, strength, importance in [
        (None, 10, 0.0, 0.0),
        (None, 2, 0.0, 0.0),
        (["RELATES_TO", "LEADS_TO"], 10, 0.0, 0.0),
        (None, 10, 0.5, 0.0),
        (None, 10, 0.0, 0.6),
    ]:
        found = await reader.neighbours(
            "r", ["c1", "c3", "exp", "q1", "nope"], types=types, per_memory=per, min_strength=strength,
            min_importance=importance,
        )  # fmt: skip
        seen.append([(_edges([relation]), memory) for relation, memory in found])
    # Entities: shared mentions, rarest entities of each seed, within the bounds.
    for ids, limit, bounds in [
        (["c1"], 10, {}),
        (["c1"], 2, {}),
        (["c1"], 10, {"per_seed": 1}),
        (["c1"], 10, {"per_seed": 2}),
        (["c1"], 10, {"max_mentions": 4}),
        (["c1"], 10, {"max_mentions": 3}),
        (["c1"], 10, {"max_mentions": 2}),
        (["c1", "c2"], 10, {}),
        (["exp", "head"], 10, {}),
        (["q1"], 10, {}),
        (["nope"], 10, {}),
    ]:
        seen.append(await reader.entity_neighbours("r", ids, limit, **bounds))
    seen.append(await reader.entity_neighbours("q", ["q1"], 10))
    # Listings: the scope's state, as_of, tag, window and archive rules; each order and page.
    for scope, order, limit, offset, with_archived in LISTINGS:
        listed = await reader.list_memories(scope, order, limit, offset, with_archived=with_archived)
        seen.append((scope, order, _ids(listed)))
    [c1] = [m for m in await reader.list_memories(Scope("r", NOW), "importance", 1)]
    seen.append(c1)
    # An access recorded: only the tenant's, never backwards.
    await reader.touch_memories("r", ["c3", "exp", "q1", "nope"], NOW_US + 3_600_000_000)
    await reader.touch_memories("r", ["c3", "head"], NOW_US + 60_000_000)
    await reader.touch_memories("r", [], NOW_US)
    seen.append([(m.id, m.last_accessed) for m in (await reader.get_memories("r", ["c3", "exp", "head"])).values()])
    seen.append((await reader.get_memory("q", "q1")).last_accessed)
    seen.append({i: _edges(r) for i, r in (await reader.relations_of("q", ["q1", "q2"], 10)).items()})
    # A deleted memory takes its edges and its mentions along.
    await writer.delete_memories("r", [MemoryEvent.deleted("r", "c2", NOW)], now_us=NOW_US)
    seen.append(await reader.entity_neighbours("r", ["c1"], 10))
    seen.append({i: _edges(r) for i, r in (await reader.relations_of("r", ["c1", "c2", "c3"], 10)).items()})
    return seen


async def test_the_fake_and_falkordb_read_the_same(graph):
    fake = InMemoryGraph()

    async def fake_mentions(tenant: str, items: list[tuple[str, list[str]]]) -> None:
        for memory_id, tags in items:
            fake.mention(tenant, memory_id, *tags)

    async def falkor_mentions(tenant: str, items: list[tuple[str, list[str]]]) -> None:
        # Enrichment's link, with no pattern possible: only the MENTIONS edges.
        mentions = [(memory_id, "Context", tags) for memory_id, tags in items]
        await graph.enrichment.link_entities_and_patterns(
            tenant, mentions, min_members=10_000, max_members=10_000, now_us=NOW_US
        )

    expected = await reader_scenario(fake, fake, fake_mentions)
    observed = await reader_scenario(graph.writer, graph.reader, falkor_mentions)
    for step, (want, got) in enumerate(zip(expected, observed, strict=True)):
        assert got == want, f"step {step}: FalkorDB {got!r}, fake {want!r}"
