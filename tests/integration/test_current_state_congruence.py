"""Every place that decides what is current, held equal on one table of
cases: the graph's Cypher scope (scope_where, through list_memories and
search_text on FalkorDB), both vector engines' filters (EdgeVectorIndex and
QdrantClientIndex, through recall's own VectorQuery and the one neutral
filter of domain/vector_filter.py), the domain's in_scope and verdict
(services/core/domain/state.py judge, applied by
services/recall/current_state.py), a PATCH's "archived already"
(domain/updates.py), the analysis summary's state counts, and
consolidation's candidate reads (creative association's sample and
clustering's pages, on the graph scope too).

Each case is one tenant: a subject memory and, for the supersession cases,
its successor. The store filters keep a superseded memory as a candidate
(the pass replaces it by its head, or withholds it when no current memory
supersedes it); what recall finally shows of the subject is the same along
every path. The vector filters leave trust states to the pass (as recall
does with every vector hit). Consolidation has no pass: it reads what
current-mode recall at the same moment, unfiltered, shows as itself."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from services.core.adapters.edge_index import EdgeVectorIndex
from services.core.adapters.qdrant_index import QdrantClientIndex
from services.core.domain.drafts import Draft
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.projection import vector_payload
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import Scope, in_scope
from services.core.domain.state import State, Successor, judge, window_state
from services.core.domain.times import to_micros
from services.core.domain.timewindow import Window
from services.core.domain.updates import apply_update
from services.recall.current_state import CurrentStatePass
from services.recall.vector_arm import vector_query
from tests.factories import memory_at
from tests.fakes import nearest

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant"),
]

AT = datetime(2026, 6, 1, 12, tzinfo=UTC)
BORN = AT - timedelta(days=10)
HOUR = timedelta(hours=1)
MICRO = timedelta(microseconds=1)
START, END = AT - timedelta(days=20), AT - timedelta(days=5)
VECTOR = [1.0, 0.0, 0.0, 0.0]
WORD = "lantern"
MAX_HOPS = 5
#: The supersede flow closes the replaced memory's window and marks it.
REPLACED = {"t_invalid": AT - HOUR, "superseded_at": AT - HOUR}


@dataclass(frozen=True)
class Case:
    name: str
    #: The subject's fields (its times are BORN unless given).
    subject: dict = field(default_factory=dict)
    #: A successor (an INVALIDATED_BY edge from the subject), by its fields.
    successor: dict | None = None
    as_of: datetime | None = None
    window: Window = field(default_factory=Window)
    #: Expected: the subject is a candidate of the store filters in current mode.
    candidate: bool = True
    #: Expected: the subject's state at AT (as the analysis counts it).
    state: State = State.CURRENT
    #: Expected: what current-mode recall shows for the subject: "itself", "head" or None.
    shown: str | None = "itself"
    #: Expected: consolidation (association's sample, clustering's pages) reads the subject at AT.
    consolidated: bool = True


CASES = [
    Case("current"),
    Case("expired", {"t_invalid": AT - HOUR}, candidate=False, state=State.EXPIRED, shown=None, consolidated=False),
    Case(
        "expires_at_the_instant",
        {"t_invalid": AT},
        candidate=False,
        state=State.EXPIRED,
        shown=None,
        consolidated=False,
    ),
    Case("valid_from_the_instant", {"t_valid": AT}),
    Case(
        "not_yet_valid",
        {"t_valid": AT + timedelta(days=1)},
        candidate=False,
        state=State.NOT_YET_VALID,
        shown=None,
        consolidated=False,
    ),
    Case(
        "archived",
        {"archived": True, "archived_at": AT - HOUR},
        candidate=False,
        state=State.ARCHIVED,
        shown=None,
        consolidated=False,
    ),
    Case(
        "superseded_by_a_current_one",
        REPLACED,
        successor={},
        state=State.SUPERSEDED,
        shown="head",
        consolidated=False,
    ),
    Case(
        "superseded_by_an_expired_one",
        REPLACED,
        successor={"t_invalid": AT - HOUR / 2},
        state=State.EXPIRED,
        shown=None,
        consolidated=False,
    ),  # kept as a candidate for the pass, which finds no current successor
    # Trust states: withheld by default in every mode (the analysis counts them by their window alone).
    Case("pending_review", {"trust_state": "pending_review"}, candidate=False, shown=None, consolidated=False),
    Case("rejected", {"trust_state": "rejected"}, candidate=False, shown=None, consolidated=False),
    Case("deprecated", {"trust_state": "deprecated"}, candidate=False, shown=None, consolidated=False),
    Case("disputed", {"trust_state": "disputed"}),  # shown (down-weighted by the ranking)
    Case("verified", {"trust_state": "verified"}),
    Case(
        "as_of_before_recording",
        {"recorded_at": AT - timedelta(days=1)},
        as_of=AT - timedelta(days=2),
        candidate=False,
        shown=None,
    ),  # fmt: skip
    Case("as_of_after_recording", {"recorded_at": AT - timedelta(days=3)}, as_of=AT - timedelta(days=2)),
    Case("window_start_is_in", {"timestamp": START}, window=Window(START, END)),
    Case(
        "window_before_start_is_out",
        {"timestamp": START - MICRO},
        window=Window(START, END),
        candidate=False,
        shown=None,
    ),  # fmt: skip
    Case("window_last_microsecond_is_in", {"timestamp": END - MICRO}, window=Window(START, END)),
    Case("window_end_is_out", {"timestamp": END}, window=Window(START, END), candidate=False, shown=None),
]


def uid(case: Case, role: str) -> str:
    """Memory ids are UUIDs (vector points are keyed by them)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"state-congruence/{case.name}/{role}"))


def tenant_of(case: Case) -> str:
    return f"c-{case.name.replace('_', '-')}"


def record(case: Case, role: str, fields: dict) -> Memory:
    """A memory of the case's tenant, every time BORN but those in `fields`."""
    made = memory_at(uid(case, role), BORN, tenant=tenant_of(case), content=f"the {WORD} {role}", embedding=VECTOR)
    return replace(made, **fields)


def records(case: Case) -> tuple[Memory, Memory | None]:
    successor = None if case.successor is None else record(case, "successor", case.successor)
    return record(case, "subject", case.subject), successor


def scope_of(case: Case, *, history: bool = False) -> Scope:
    """The case's scope as build_request makes it: the state at as_of when given."""
    return Scope(tenant=tenant_of(case), at=case.as_of or AT, history=history, as_of=case.as_of, window=case.window)


@pytest.fixture
async def engines(tmp_path):
    edge = EdgeVectorIndex(path=tmp_path / "edge", collection="memories", vector_size=len(VECTOR))
    edge.open()
    client = QdrantClientIndex(location=":memory:", collection="memories", vector_size=len(VECTOR))
    await client.open()
    yield {"edge": edge, "qdrant": client}
    for index in (edge, client):
        await index.close()


@pytest.fixture
async def loaded(graph, engines):
    """Every case's memories in the graph (with their edges) and in both engines."""
    for case in CASES:
        subject, successor = records(case)
        memories = [m for m in (subject, successor) if m is not None]
        events = [MemoryEvent.for_memory(EventKind.CREATED, m, BORN) for m in memories]
        await graph.writer.create_memories(memories, events, now_us=1)
        if successor is not None:
            edge = Relation(subject.id, successor.id, "INVALIDATED_BY", 1.0, AT - HOUR, {})
            await graph.writer.create_relations(
                subject.tenant, [edge], [MemoryEvent.associated(subject.tenant, edge)], now_us=to_micros(AT - HOUR)
            )
        for index in engines.values():
            await index.upsert([(m.id, m.embedding, vector_payload(m)) for m in memories])
    return graph


async def shown_after_pass(state: CurrentStatePass, graph, case: Case, ids: list[str]) -> str | None:
    """What the state pass makes of the subject among candidates found by ids."""
    found = await graph.reader.read_candidates(tenant_of(case), ids)
    candidates = [Candidate(i, memory=found[i][0]) for i in ids if i in found]
    passed = await state.apply(tenant_of(case), candidates, scope_of(case), {})
    return shown_as(case, [(c.id, c.state_replaces) for c in passed])


def shown_as(case: Case, results: list[tuple[str, str | None]]) -> str | None:
    subject = uid(case, "subject")
    for memory_id, replaces in results:
        if memory_id == subject:
            return "itself"
        if replaces == subject:
            return "head"
    return None


async def trusted(graph, scope: Scope, ids: list[str]) -> list[str]:
    """The vector hits recall keeps before the state pass: those whose trust state the scope shows."""
    found = await graph.reader.read_candidates(scope.tenant, ids)
    candidates = [Candidate(i, memory=found[i][0]) for i in ids if i in found]
    return [c.id for c in CurrentStatePass.trusted(candidates, scope.trust_states)]


async def consolidation_reads(graph, tenant: str, at: datetime) -> tuple[list[str], list[str]]:
    """What creative association samples and clustering pages through, at `at`."""
    sample = await graph.consolidation.association_sample(tenant, 50, now_us=to_micros(at))
    pages, after = [], ""
    while page := await graph.consolidation.cluster_inputs(tenant, after, 1, now_us=to_micros(at)):
        pages += [s.id for s in page]
        after = page[-1].id
    return sorted(s.id for s in sample), sorted(pages)


def case_graph(case: Case) -> tuple[dict[str, Memory], dict[str, list[Successor]]]:
    """The case's records and supersession edges, as the state pass loads them."""
    subject, successor = records(case)
    found = {m.id: m for m in (subject, successor) if m is not None}
    edges: dict[str, list[Successor]] = {i: [] for i in found}
    if successor is not None:
        edges[subject.id] = [Successor(successor.id, "INVALIDATED_BY", AT - HOUR)]
    return found, edges


def domain_decision(case: Case) -> tuple[State, str | None]:
    """The domain's decision on the subject: its verdict at the scope's time
    (from the records and edges alone), shown only within in_scope."""
    found, edges = case_graph(case)
    subject = found[uid(case, "subject")]
    verdict = judge(subject, edges, found, scope_of(case).at, MAX_HOPS)
    if not in_scope(subject, scope_of(case)):
        return verdict.state, None
    return verdict.state, "head" if verdict.replaced else ("itself" if verdict.kept else None)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_every_place_decides_alike(loaded, engines, case):
    graph = loaded
    state = CurrentStatePass(graph.reader, MAX_HOPS)
    subject = uid(case, "subject")
    for history in (False, True):
        scope = scope_of(case, history=history)
        # The store filters: the graph's scope (a listing and a text arm) and both vector engines.
        listed = [m.id for m in await graph.reader.list_memories(scope, "importance", 50)]
        matched = [h.id for h in await graph.text.search_text(scope, "keyword", [WORD], 50, max_df=1000)]
        by_engine = {
            name: await trusted(graph, scope, [h.id for h in await nearest(index, vector_query(VECTOR, scope, 50))])
            for name, index in engines.items()
        }
        assert sorted(matched) == sorted(listed)
        assert {name: sorted(ids) for name, ids in by_engine.items()} == {
            "edge": sorted(listed),
            "qdrant": sorted(listed),
        }
        if history:
            # History mode filters by the scope alone: exactly the domain's in_scope.
            memory = records(case)[0]
            assert (subject in listed) == in_scope(memory, scope)
        else:
            assert (subject in listed) == case.candidate
    # What current-mode recall shows: by the domain alone, and along each store's path through the state pass.
    assert domain_decision(case) == (case.state, case.shown)
    listed = [m.id for m in await graph.reader.list_memories(scope_of(case), "importance", 50)]
    assert await shown_after_pass(state, graph, case, listed) == case.shown
    for index in engines.values():
        hits = [h.id for h in await nearest(index, vector_query(VECTOR, scope_of(case), 50))]
        assert await shown_after_pass(state, graph, case, hits) == case.shown
    # The analysis counts the subject (and its successor) in the state the domain gives each at AT.
    figures = await graph.views.analysis_figures(tenant_of(case), now_us=to_micros(AT), top=10, max_hops=MAX_HOPS)
    found, edges = case_graph(case)
    expected = Counter(judge(m, edges, found, AT, MAX_HOPS).state.value for m in found.values())
    assert {s: n for s, n in figures.states.items() if n} == dict(expected)
    # Consolidation reads at AT what recall at AT, with no as_of, window or tags, shows as itself.
    unfiltered = replace(case, as_of=None, window=Window())
    assert (domain_decision(unfiltered)[1] == "itself") == case.consolidated
    sample, pages = await consolidation_reads(graph, tenant_of(case), AT)
    assert (subject in sample, subject in pages) == (case.consolidated, case.consolidated)
    # A PATCH archiving the subject finds it archived already (its archived_at kept) where the domain does.
    subject_record = records(case)[0]
    patched, _ = apply_update(subject_record, Draft(archived=True), {"archived"}, now=AT, limits=Limits())
    kept = patched.archived_at == subject_record.archived_at
    assert kept == (window_state(subject_record, AT) is State.ARCHIVED) == (case.state is State.ARCHIVED)


async def test_consolidation_never_picks_a_not_yet_valid_or_withheld_memory(graph):
    """Creative association and clustering read only what recall shows by
    default: not a memory valid only from tomorrow, nor one under review,
    rejected or deprecated (the graph scope's terms, as every arm's)."""
    tenant = "c-consolidation"

    def made(name: str, **fields) -> Memory:
        return replace(memory_at(name, BORN, tenant=tenant, content=f"the {WORD} {name}", embedding=VECTOR), **fields)

    memories = [
        made("current"),
        made("disputed", trust_state="disputed"),
        made("not-yet-valid", t_valid=AT + timedelta(days=1)),
        made("pending", trust_state="pending_review"),
        made("rejected", trust_state="rejected"),
        made("deprecated", trust_state="deprecated"),
    ]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, BORN) for m in memories]
    await graph.writer.create_memories(memories, events, now_us=1)
    shown = ["current", "disputed"]
    assert await consolidation_reads(graph, tenant, AT) == (shown, shown)
    # Once its window opens, the memory valid from tomorrow is read too.
    shown_later = ["current", "disputed", "not-yet-valid"]
    assert await consolidation_reads(graph, tenant, AT + timedelta(days=2)) == (shown_later, shown_later)
