"""Recall's use cases that need only MemoryReader (the listings, the read by
id, the current-state pass) on the in-memory fake, no servers. The fake's
reads are held equal to FalkorDB's in tests/integration/test_fake_congruence.py."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from services.core.domain.errors import InvalidArgument, NotFound
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import Scope
from services.core.domain.state import State
from services.core.domain.tags import tag_prefixes
from services.core.domain.times import to_micros
from services.core.settings import Settings
from services.recall.access import AccessRecorder
from services.recall.current_state import CurrentStatePass
from services.recall.listings import Listings, ReadLimits
from services.recall.reads import MemoryReads
from tests.factories import memory_at
from tests.fakes import InMemoryGraph

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def recall_policy():
    """The recall policy of the default settings."""
    settings = Settings(_env_file=None)
    return settings.recall.policy(settings.limits)


def uid(name: str) -> str:
    """A memory id (a UUID, as the reads validate) for a name a test uses."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


class CountingGraph(InMemoryGraph):
    """The fake, counting the batched reads the state pass makes."""

    candidate_reads: int = 0

    async def read_candidates(self, tenant, ids):
        self.candidate_reads += 1
        return await super().read_candidates(tenant, ids)


class Rig:
    """Recall's read use cases over one fake graph, as services/recall/bootstrap.py builds them."""

    def __init__(self, *, max_hops: int = 5, related_max_depth: int = 3, relation_limit: int = 2):
        self.graph = CountingGraph()
        self.now = NOW
        self.names: dict[str, str] = {}
        policy = replace(recall_policy(), max_hops=max_hops, related_max_depth=related_max_depth)
        self.state = CurrentStatePass(self.graph, policy.max_hops)
        self.access = AccessRecorder(
            self.graph.touch_memories, flush_seconds=60, batch_size=1000, clock_us=lambda: to_micros(self.now)
        )
        self.listings = Listings(
            reader=self.graph,
            state=self.state,
            policy=policy,
            limits=ReadLimits(by_tag_default=20, by_tag_max=200, startup_default=10, related_default=5),
            access=self.access,
            clock=lambda: self.now,
        )
        self.reads = MemoryReads(reader=self.graph, state=self.state, relation_limit=relation_limit, clock=self.clock)

    def clock(self) -> datetime:
        return self.now

    async def add(
        self, name: str, *tags: str, importance: float = 0.5, hours: float = 24, tenant: str = "acme", **fields
    ) -> Memory:
        """A memory written through the writer port, stamped `hours` before NOW."""
        self.names[uid(name)] = name
        at = NOW - hours * HOUR
        memory = memory_at(
            uid(name), at, tenant=tenant, content=name, importance=importance, tags=list(tags),
            tag_prefixes=tag_prefixes(list(tags)),
        )  # fmt: skip
        memory = replace(memory, **fields)
        await self.graph.create_memories([memory], [MemoryEvent.for_memory(EventKind.CREATED, memory, at)], now_us=0)
        return memory

    async def link(
        self, source: str, target: str, type: str = "RELATES_TO", strength: float = 0.5, *, hours: float = 2
    ) -> None:
        """An edge written `hours` before NOW (a supersession edge marks its source superseded then)."""
        at = NOW - hours * HOUR
        relation = Relation(uid(source), uid(target), type, strength, at)
        written = await self.graph.create_relations(
            "acme", [relation], [MemoryEvent.associated("acme", relation)], now_us=to_micros(at)
        )
        assert written == [0]

    async def replaced(self, old: str, new: str, *tags: str, hours: float = 2, **fields) -> Memory:
        """`new` supersedes `old` (INVALIDATED_BY), whose window the supersede flow closed then."""
        memory = await self.add(new, *tags, hours=hours, **fields)
        stored = self.graph.memories[("acme", uid(old))]
        self.graph.memories[("acme", uid(old))] = replace(stored, t_invalid=NOW - hours * HOUR)
        await self.link(old, new, "INVALIDATED_BY", 1.0, hours=hours)
        return memory

    def named(self, items) -> list[str]:
        """The names of memories (or candidates, or ids), in order."""
        return [self.names[getattr(i, "id", i)] for i in items]


# By tag ---------------------------------------------------------------------------------------------


async def by_tag_rig() -> Rig:
    rig = Rig()
    await rig.add("pinned", "Deploy", importance=0.9)
    await rig.add("old", "deploy", importance=0.8, hours=48)
    await rig.replaced("old", "new", "deploy", importance=0.3)
    await rig.add("expired", "deploy", importance=0.7, t_invalid=NOW - HOUR)
    await rig.add("archived", "deploy", importance=0.6, archived=True, archived_at=NOW - HOUR)
    await rig.add("future", "deploy", importance=0.5, t_valid=NOW + HOUR)
    await rig.add("prefixed", "deploy:prod", importance=0.95)  # exact matching only: not listed
    await rig.add("theirs", "deploy", importance=0.99, tenant="beta")
    return rig


async def test_by_tag_lists_every_tagged_memory_flagged_with_its_state_and_head():
    rig = await by_tag_rig()
    listed, has_more, limit, offset = await rig.listings.list_by_tag("acme", ["DEPLOY"], limit=0, offset=0)
    assert (has_more, limit, offset) == (False, 20, 0)
    assert rig.named(t.candidate for t in listed) == ["pinned", "old", "expired", "archived", "future", "new"]
    flags = {rig.names[t.candidate.id]: (t.state, t.replaced_by and rig.names[t.replaced_by]) for t in listed}
    assert flags == {
        "pinned": (State.CURRENT, None),
        "old": (State.SUPERSEDED, "new"),
        "expired": (State.EXPIRED, None),
        "archived": (State.ARCHIVED, None),
        "future": (State.NOT_YET_VALID, None),
        "new": (State.CURRENT, None),
    }


async def test_by_tag_in_current_mode_withholds_what_is_not_current_and_puts_heads_in_place():
    rig = await by_tag_rig()
    listed, has_more, *_ = await rig.listings.list_by_tag("acme", ["deploy"], limit=10, offset=0, state_mode="current")
    # "old" is replaced by "new" in its place, and "new" is not listed twice.
    assert rig.named(t.candidate for t in listed) == ["pinned", "new"]
    assert all(t.state is State.CURRENT and t.replaced_by is None for t in listed)
    assert listed[1].candidate.state_replaces == uid("old")
    assert not has_more


async def test_by_tag_pages_with_has_more():
    rig = await by_tag_rig()
    first, more, *_ = await rig.listings.list_by_tag("acme", ["deploy"], limit=2, offset=0)
    last, done, *_ = await rig.listings.list_by_tag("acme", ["deploy"], limit=2, offset=4)
    assert rig.named(t.candidate for t in first) == ["pinned", "old"] and more
    assert rig.named(t.candidate for t in last) == ["future", "new"] and not done


async def test_by_tag_refuses_bad_parameters_naming_the_field():
    rig = await by_tag_rig()
    cases = [
        ({"tags": [" ", ""]}, "TAGS_REQUIRED", "tags"),
        ({"tags": ["deploy"], "offset": -1}, "INVALID_ARGUMENT", "offset"),
        ({"tags": ["deploy"], "state_mode": "latest"}, "INVALID_STATE_MODE", "state_mode"),
    ]
    for given, reason, name in cases:
        arguments = {"limit": 10, "offset": 0, **given}
        with pytest.raises(InvalidArgument) as refused:
            await rig.listings.list_by_tag("acme", arguments.pop("tags"), **arguments)
        assert (refused.value.reason, refused.value.field) == (reason, name)


# Startup recall -------------------------------------------------------------------------------------


async def test_startup_gathers_current_listing_lessons_and_rules_and_records_the_access():
    rig = Rig()
    await rig.add("api", "project:api", importance=0.8)
    await rig.add("web", "project:web", importance=0.6)
    await rig.add("elsewhere", "other", importance=1.0)
    await rig.add("gone", "project:api", importance=0.9, t_invalid=NOW - HOUR)
    await rig.add("lesson", "Lesson", importance=0.5)
    await rig.add("old-lesson", "critical", importance=0.95, hours=48)
    await rig.replaced("old-lesson", "new-lesson", "critical", importance=0.92)
    await rig.add("rule", "system", importance=0.4)
    await rig.add("near-rule", "system:x", importance=0.9)  # the rules' tags match exactly
    await rig.add("their-lesson", "lesson", importance=1.0, tenant="beta")

    found = await rig.listings.startup("acme", ["project"], limit=5)
    assert rig.named(found.results) == ["api", "web"]
    assert rig.named(found.lessons) == ["new-lesson", "lesson"]  # the head in the old one's place, once
    assert rig.named(found.system_rules) == ["rule"]
    assert found.has_critical

    # What it returned counts as accessed; nothing else is touched.
    rig.now = NOW + HOUR
    await rig.access.flush()
    touched = {rig.names[i] for (_, i), m in rig.graph.memories.items() if m.last_accessed == NOW}
    assert touched == {"api", "web", "new-lesson", "lesson", "rule"}


async def test_startup_without_a_critical_lesson_and_in_history_mode():
    rig = Rig()
    await rig.add("lesson", "lesson", importance=0.5)
    await rig.add("expired-lesson", "lesson", importance=0.95, t_invalid=NOW - HOUR)
    current = await rig.listings.startup("acme", [], limit=0)
    assert rig.named(current.lessons) == ["lesson"] and not current.has_critical
    history = await rig.listings.startup("acme", [], limit=0, state_mode="history")
    assert rig.named(history.lessons) == ["expired-lesson", "lesson"] and history.has_critical
    assert rig.named(history.results) == ["expired-lesson", "lesson"]


# Related ----------------------------------------------------------------------------------------------


async def related_rig() -> Rig:
    """A line start - one - two - three - four, with a side branch of
    start: an expired neighbour, a superseded one, and a weak one."""
    rig = Rig()
    for name in ("start", "one", "two", "three", "four", "expired", "weak", "old", "head"):
        await rig.add(name, t_invalid=NOW - HOUR if name == "expired" else None)
    await rig.link("start", "one", strength=0.9)
    await rig.link("two", "one", "LEADS_TO", strength=0.8)  # walked against its direction too
    await rig.link("two", "three", strength=0.7)
    await rig.link("three", "four", strength=0.6)
    await rig.link("start", "expired", strength=0.85)
    await rig.link("start", "weak", "SIMILAR_TO", strength=0.1)
    await rig.link("start", "old", strength=0.5)
    await rig.replaced("old", "head")
    return rig


async def test_related_walks_max_depth_edges_within_the_setting():
    rig = await related_rig()

    async def names(max_depth: int, **options) -> list[str]:
        found = await rig.listings.related(
            "acme", uid("start"), relation_types=options.pop("types", []), limit=options.pop("limit", 20),
            min_strength=options.pop("min_strength", None), max_depth=max_depth, **options,
        )  # fmt: skip
        return [rig.names[memory.id] for _, memory, _ in found]

    assert await names(0) == ["one", "head", "weak"]
    assert await names(2) == ["one", "head", "weak", "two"]
    assert await names(9) == ["one", "head", "weak", "two", "three"]  # RECALL_RELATED_MAX_DEPTH is 3
    assert await names(9, limit=3) == ["one", "head"]  # the limit counts the edges walked (expired's too)
    assert await names(9, types=["relates_to"]) == ["one", "head"]  # "two" is across a LEADS_TO
    assert await names(1, min_strength=0.6) == ["one"]
    assert await names(1, state_mode="history") == ["one", "expired", "old", "weak"]


async def test_related_replaces_a_superseded_neighbour_and_names_it():
    rig = await related_rig()
    found = await rig.listings.related(
        "acme", uid("start"), relation_types=[], limit=10, min_strength=None, max_depth=1
    )
    [(relation, memory, replaces)] = [item for item in found if item[2] is not None]
    assert (rig.names[memory.id], rig.names[replaces]) == ("head", "old")
    assert (relation.source_id, relation.target_id) == (uid("start"), uid("old"))  # the edge that was walked


async def test_related_refuses_bad_parameters_and_an_unknown_memory():
    rig = await related_rig()
    cases = [
        ({"memory_id": "not-a-uuid"}, InvalidArgument, "INVALID_ID", "id"),
        ({"relation_types": ["LIKES"]}, InvalidArgument, "INVALID_RELATION_TYPE", "relation_types"),
        ({"min_strength": 1.5}, InvalidArgument, "INVALID_ARGUMENT", "min_strength"),
        ({"memory_id": uid("nowhere")}, NotFound, "MEMORY_NOT_FOUND", "id"),
        ({"state_mode": "now"}, InvalidArgument, "INVALID_STATE_MODE", "state_mode"),
    ]
    for given, error, reason, name in cases:
        arguments = {"memory_id": uid("start"), "relation_types": [], "limit": 5, "min_strength": None, **given}
        with pytest.raises(error) as refused:
            await rig.listings.related("acme", arguments.pop("memory_id"), **arguments)
        assert (refused.value.reason, refused.value.field) == (reason, name)
    with pytest.raises(NotFound):  # another tenant's memory is not there
        await rig.listings.related("beta", uid("start"), relation_types=[], limit=5, min_strength=None)


# The read by id ----------------------------------------------------------------------------------------


async def test_get_memory_flags_the_state_bumps_the_access_and_keeps_the_strongest_relations():
    rig = Rig(relation_limit=2)
    await rig.add("a")
    for name, strength in (("b", 0.2), ("c", 0.9), ("d", 0.5)):
        await rig.add(name)
        await rig.link("a", name, strength=strength)
    await rig.replaced("a", "a2")
    rig.now = NOW + HOUR

    read = await rig.reads.get_memory("acme", uid("a"), state_mode="history")
    assert (read.state, rig.names[read.replaced_by]) == (State.SUPERSEDED, "a2")
    assert [(rig.names[r.target_id], r.strength) for r in read.relations] == [("a2", 1.0), ("c", 0.9)]
    assert rig.graph.memories[("acme", uid("a"))].last_accessed == NOW + HOUR
    assert read.memory.last_accessed == NOW + HOUR

    head = await rig.reads.get_memory("acme", uid("a2"))
    assert (head.state, head.replaced_by) == (State.CURRENT, None)
    assert [rig.names[r.source_id] for r in head.relations] == ["a"]  # incoming edges count too


async def test_get_memory_of_another_tenant_or_a_bad_id_is_refused():
    rig = Rig()
    await rig.add("mine")
    with pytest.raises(NotFound) as missing:
        await rig.reads.get_memory("beta", uid("mine"))
    assert missing.value.field == "id"
    with pytest.raises(InvalidArgument) as bad:
        await rig.reads.get_memory("acme", "mine")
    assert bad.value.reason == "INVALID_ID"
    with pytest.raises(InvalidArgument) as mode:
        await rig.reads.get_memory("acme", uid("mine"), state_mode="sometimes")
    assert mode.value.field == "state_mode"
    assert rig.graph.memories[("acme", uid("mine"))].last_accessed == NOW - 24 * HOUR  # a refused read touches nothing


# The current-state pass ---------------------------------------------------------------------------------


async def test_the_pass_walks_a_chain_through_closed_links_one_read_per_hop():
    rig = Rig()
    await rig.add("v1", hours=40)
    await rig.replaced("v1", "v2", hours=30)
    await rig.replaced("v2", "v3", hours=20)
    await rig.replaced("v3", "v4", hours=10)
    v1 = rig.graph.memories[("acme", uid("v1"))]
    verdicts = await rig.state.verdicts("acme", [v1], NOW)
    verdict = verdicts[uid("v1")]
    assert (verdict.state, rig.names[verdict.head.id], verdict.hops) == (State.SUPERSEDED, "v4", 3)
    assert rig.graph.candidate_reads == 3

    # As of before the last link, the head is the one before it.
    earlier = await rig.state.verdicts("acme", [v1], NOW - 15 * HOUR)
    assert rig.names[earlier[uid("v1")].head.id] == "v3"


async def test_the_pass_gives_up_past_max_hops_and_ignores_a_successor_that_is_not_current():
    rig = Rig(max_hops=2)
    await rig.add("v1", hours=40)
    await rig.replaced("v1", "v2", hours=30)
    await rig.replaced("v2", "v3", hours=20)
    await rig.replaced("v3", "v4", hours=10)
    await rig.add("kept")
    await rig.add("stale-successor", t_invalid=NOW - HOUR)
    await rig.link("kept", "stale-successor", "EVOLVED_INTO", 1.0)
    memories = [rig.graph.memories[("acme", uid(n))] for n in ("v1", "v3", "kept")]
    verdicts = await rig.state.verdicts("acme", memories, NOW)
    # v4 is three hops from v1: v1 is judged by its own (closed) window.
    assert verdicts[uid("v1")].state is State.EXPIRED and verdicts[uid("v1")].head is None
    assert rig.names[verdicts[uid("v3")].head.id] == "v4"
    assert verdicts[uid("kept")].kept  # its successor expired: it supersedes nothing


async def test_the_pass_over_candidates_replaces_withholds_and_reports_and_a_cycle_ends():
    rig = Rig()
    await rig.add("cur")
    await rig.add("old")
    await rig.replaced("old", "new")
    await rig.add("gone", t_invalid=NOW - HOUR)
    await rig.add("x", t_invalid=NOW - HOUR)
    await rig.add("y", t_invalid=NOW - HOUR)
    await rig.link("x", "y", "INVALIDATED_BY", 1.0)
    await rig.link("y", "x", "INVALIDATED_BY", 1.0)
    candidates = [
        Candidate(uid(n), memory=rig.graph.memories[("acme", uid(n))], via="test")
        for n in ("cur", "old", "gone", "x", "new")
    ]
    debug: dict = {}
    scope = Scope("acme", NOW)
    kept = await rig.state.apply("acme", candidates, scope, debug)
    assert rig.named(kept) == ["cur", "new", "new"]
    assert kept[1].state_replaces == uid("old")
    assert debug["replaced"] == [{"id": uid("old"), "head": uid("new"), "hops": 1}]
    assert {(rig.names[w["id"]], w["state"]) for w in debug["withheld"]} == {("gone", "expired"), ("x", "expired")}
    # A listing shows the head once; history mode keeps everything as found.
    page = await rig.state.page("acme", [c.memory for c in candidates], scope, "tag")
    assert rig.named(page) == ["cur", "new"]
    history = await rig.state.apply("acme", candidates, replace(scope, history=True), {})
    assert rig.named(history) == ["cur", "old", "gone", "x", "new"]
