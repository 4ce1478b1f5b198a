"""The consolidation runner and scheduler (services/consolidate/scheduler.py)
over a real FalkorDB: two schedulers racing over one store run a task once,
a task that ran is not due again until its interval has passed, a manual run
while the task runs is refused, a dry run writes nothing, the decayed event
follows the last emitted score, and a run that died mid-way is marked abandoned."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from services.consolidate.scheduler import ABANDONED, ConsolidationRunner, ConsolidationScheduler
from services.consolidate.tasks import ConsolidationTasks, TaskPolicies
from services.core.domain.consolidation import RunRecord, Schedule, Task
from services.core.domain.decay import DecayPolicy
from services.core.domain.errors import Aborted
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=200)


def memory(memory_id: str, tenant: str) -> Memory:
    return Memory(
        id=memory_id,
        tenant=tenant,
        content=f"content of {memory_id}",
        type="Context",
        confidence=0.8,
        importance=0.4,
        timestamp=OLD,
        t_valid=OLD,
        updated_at=OLD,
        last_accessed=OLD,
        recorded_at=OLD,
    )


async def seed(graph, tenant: str, count: int) -> list[str]:
    memories = [memory(f"{tenant}-{i:03d}", tenant) for i in range(count)]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in memories]
    await graph.writer.create_memories(memories, events, now_us=to_micros(NOW))
    return [m.id for m in memories]


class SlowStore:
    """The real store, with each decay page held back a little, so two
    schedulers' ticks overlap for certain."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def decay_page(self, *args, **kwargs):
        await asyncio.sleep(0.05)
        return await self._store.decay_page(*args, **kwargs)


def runner(graph, *, store=None, submitted=None, owner=None, write_epsilon=0.0, **options) -> ConsolidationRunner:
    store = store or graph.consolidation

    async def submit(events):
        if submitted is not None:
            submitted.extend(events)

    tasks = ConsolidationTasks(
        store=store,
        writer=graph.writer,
        submit=submit,
        policies=TaskPolicies(),
        page_size=7,
        sample_size=5,
        write_epsilon=write_epsilon,
    )
    return ConsolidationRunner(
        store=store,
        tasks=tasks,
        schedule=Schedule({Task.DECAY.value: 3600}),
        lease_seconds=30,
        history_keep=50,
        owner=owner,
        **options,
    )


async def test_two_schedulers_racing_run_a_task_once_per_tenant(graph):
    await seed(graph, "alpha", 20)
    await seed(graph, "beta", 5)
    slow = SlowStore(graph.consolidation)
    first, second = runner(graph, store=slow, owner="replica-1"), runner(graph, store=slow, owner="replica-2")
    ticks = [ConsolidationScheduler(r, slow, tick_seconds=60) for r in (first, second)]
    reports = await asyncio.gather(*(t.tick() for t in ticks))
    ran = sorted((r.record.tenant, r.record.task) for found in reports for r in found)
    assert ran == [("alpha", "decay"), ("beta", "decay")]
    for tenant in ("alpha", "beta"):
        history = await graph.consolidation.run_history(tenant, 10)
        assert [(h.task, h.dry_run) for h in history] == [("decay", False)]
        assert history[0].finished_at is not None and not history[0].errors
    # Both again: nothing is due before the interval has passed.
    again = await asyncio.gather(*(t.tick() for t in ticks))
    assert again == [[], []]
    assert not await graph.consolidation.leases("alpha", now_us=to_micros(datetime.now(UTC)))


async def test_next_runs_count_from_the_last_recorded_run(graph):
    await seed(graph, "alpha", 3)
    one = runner(graph)
    [(name, interval, last, due), *_] = await one.next_runs("alpha")
    assert (name, interval, last) == ("decay", 3600, None) and due is not None
    report = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    # A new runner (a restarted service) reads the same schedule from the graph.
    [(_, _, last, due), *rest] = await runner(graph).next_runs("alpha")
    assert abs((last - report.record.started_at).total_seconds()) < 0.001
    assert abs((due - last).total_seconds() - 3600) < 0.001
    assert all(next_run is None for _, _, _, next_run in rest)  # creative, cluster, forget: not scheduled here


async def test_a_manual_run_while_the_task_runs_is_refused(graph):
    await seed(graph, "alpha", 3)
    held = await graph.consolidation.acquire_lease(
        "decay", "alpha", "another-replica", now_us=to_micros(datetime.now(UTC)), ttl_us=30_000_000
    )
    assert held
    with pytest.raises(Aborted) as refused:
        await runner(graph).run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    assert refused.value.reason == "CONSOLIDATION_RUNNING"
    # A dry run changes nothing, so it needs no lease and goes ahead.
    report = await runner(graph).run(Task.DECAY, "alpha", mode="decay", dry_run=True)
    assert report.record.counts["updated"] == 3


async def test_decay_pages_through_the_tenant_and_a_dry_run_writes_nothing(graph):
    ids = await seed(graph, "alpha", 20)
    await seed(graph, "beta", 4)
    submitted: list[MemoryEvent] = []
    one = runner(graph, submitted=submitted)
    dry = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=True)
    # The first scores are baselines: written, but no event (nothing decayed yet).
    assert dry.record.counts == {"scanned": 20, "updated": 20, "events": 0}
    assert len(dry.sample) == 5 and all(c.before == "" and c.after for c in dry.sample)
    stored = await graph.writer.get_memories("alpha", ids)
    assert all(m.relevance_score is None for m in stored.values()) and not submitted
    real = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    assert real.record.counts == {"scanned": 20, "updated": 20, "events": 0}
    stored = await graph.writer.get_memories("alpha", ids)
    assert all(0.4 * 0.3 <= m.relevance_score <= 1.0 for m in stored.values())
    assert not submitted
    beta = await graph.writer.get_memories("beta", ["beta-000"])
    assert beta["beta-000"].relevance_score is None  # another tenant's run
    # A second pass over a stable store writes (nearly) nothing and emits nothing.
    submitted.clear()
    stable = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    assert stable.record.counts["events"] == 0 and not submitted
    # ... and with a write epsilon, no write at all for a score that moved by a hair.
    steady = await runner(graph, write_epsilon=0.001).run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    assert steady.record.counts == {"scanned": 20, "updated": 0, "events": 0}


class Judge:
    """A language model whose judgement of every pair is `answer` (creative association's judge)."""

    def __init__(self, answer: str | None):
        self.answer = answer
        self.pairs: list[tuple[str, str]] = []

    async def judge_association(self, first: str, second: str) -> str | None:
        self.pairs.append((first, second))
        return self.answer


async def similar_pair(graph, tenant: str) -> list[str]:
    pair = [
        memory(f"{tenant}-a", tenant),
        memory(f"{tenant}-b", tenant),
        memory(f"{tenant}-c", tenant),
    ]
    pair[0].embedding, pair[1].embedding, pair[2].embedding = [1.0, 0.0, 0.0], [0.99, 0.1, 0.0], [0.0, 0.0, 1.0]
    events = [MemoryEvent.for_memory(EventKind.CREATED, m, NOW) for m in pair]
    await graph.writer.create_memories(pair, events, now_us=to_micros(NOW))
    return [m.id for m in pair]


@pytest.mark.parametrize(
    ("answer", "made"), [("contradicts", "CONTRADICTS"), ("unrelated", None), (None, "DISCOVERED")]
)
async def test_creative_association_asks_the_judge_when_there_is_one(graph, answer, made):
    first, second, _ = await similar_pair(graph, "alpha")
    judge = Judge(answer)
    tasks = ConsolidationTasks(
        store=graph.consolidation,
        writer=graph.writer,
        submit=lambda events: asyncio.sleep(0),
        policies=TaskPolicies(),
        page_size=10,
        sample_size=5,
        llm=judge,
    )
    one = ConsolidationRunner(
        store=graph.consolidation, tasks=tasks, schedule=Schedule({}), lease_seconds=30, history_keep=10
    )
    report = await one.run(Task.CREATIVE, "alpha", mode="creative", dry_run=False)
    [asked] = judge.pairs  # the one similar pair, asked once
    assert set(asked) == {"content of alpha-a", "content of alpha-b"}
    relations = (await graph.reader.relations_of("alpha", [first], 10))[first]
    assert [(r.type, {r.source_id, r.target_id}) for r in relations] == ([(made, {first, second})] if made else [])
    assert report.record.counts["associated"] == (1 if made else 0)


async def test_each_run_gives_its_memory_back_when_it_ends_failed_or_not(graph):
    await seed(graph, "alpha", 3)
    released: list[str] = []
    one = runner(graph, after_pass=lambda: released.append("released"))
    report = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    assert report.record.counts["scanned"] == 3 and not report.record.errors
    assert released == ["released"]
    broken = ConsolidationRunner(
        store=graph.consolidation,
        tasks=BrokenTasks(),
        schedule=Schedule({}),
        lease_seconds=30,
        history_keep=10,
        after_pass=lambda: released.append("released"),
    )
    failed = await broken.run(Task.DECAY, "alpha", mode="decay", dry_run=True)
    assert failed.record.errors == ["RuntimeError: the pass broke"]
    assert released == ["released", "released"]


class BrokenTasks:
    async def run(self, *args, **kwargs):
        raise RuntimeError("the pass broke")


async def test_the_decayed_event_compares_with_the_last_emitted_score(graph):
    # No access term (rate 0): the score is 0.5076 x exp(-0.01 x age days), about 0.0046 less a day at day 10.
    [only] = await seed(graph, "alpha", 1)
    days = [10.0]
    tasks = ConsolidationTasks(
        store=graph.consolidation,
        writer=graph.writer,
        submit=lambda events: asyncio.sleep(0),
        policies=TaskPolicies(decay=DecayPolicy(access_rate=0.0, event_epsilon=0.01)),
        page_size=10,
        sample_size=5,
        clock=lambda: OLD + timedelta(days=days[0]),
    )
    one = ConsolidationRunner(
        store=graph.consolidation, tasks=tasks, schedule=Schedule({}), lease_seconds=30, history_keep=10
    )
    emitted = []
    for day in (10.0, 11.0, 12.0, 13.0):
        days[0] = day
        report = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=False)
        assert report.record.counts["updated"] == 1  # every pass writes the score
        emitted.append(report.record.counts["events"])
    # Day 10's first score is the baseline (no event). Day 13 is 0.0045 from day 12's written
    # score but 0.0137 from that baseline: it emits.
    assert emitted == [0, 0, 0, 1]
    [row] = (await graph.consolidation.decay_page("alpha", -1, 10))[1]
    assert row.id == only and row.emitted_score == row.relevance_score


async def test_a_run_that_died_mid_way_is_marked_abandoned_once_its_lease_is_gone(graph):
    await seed(graph, "alpha", 3)
    store = graph.consolidation
    started = datetime.now(UTC) - timedelta(minutes=10)

    def unfinished(task: str, dry_run: bool = False) -> RunRecord:
        return RunRecord(uuid.uuid4().hex, "alpha", task, task, dry_run, started)

    dead, live, dry = unfinished("decay"), unfinished("creative"), unfinished("cluster", True)
    # The dead run's replica took its lease, recorded progress, and stopped renewing: it lapsed.
    dead_from = to_micros(started)
    assert await store.acquire_lease("decay", "alpha", "dead-replica", now_us=dead_from, ttl_us=1_000_000)
    progress = {"processed": 2, "total": 3, "scanned": 2, "updated": 2, "events": 2}
    await store.renew_lease("decay", "alpha", "dead-replica", now_us=dead_from, ttl_us=1_000_000, progress=progress)
    # The live one's lease is held and current.
    assert await store.acquire_lease("creative", "alpha", "live-replica", now_us=dead_from, ttl_us=3_600_000_000)
    for record in (dead, live, dry):
        await store.record_run(record, keep=50)
    one = runner(graph)
    assert await one.abandon_stale("alpha") == [dead.id]
    runs = {r.id: r for r in await store.run_history("alpha", 10)}
    assert runs[dead.id].finished_at == started + timedelta(seconds=1)  # when its lease lapsed
    assert runs[dead.id].errors == [ABANDONED] and runs[dead.id].counts == progress
    assert runs[live.id].finished_at is None and runs[dry.id].finished_at is None  # running; a dry run has no lease
    # A later run marks one with no lease at all, and one whose lease a newer run took.
    leaseless = unfinished("forget")
    await store.record_run(leaseless, keep=50)
    await store.release_lease("creative", "alpha", "live-replica")
    report = await one.run(Task.DECAY, "alpha", mode="decay", dry_run=False)
    runs = {r.id: r for r in await store.run_history("alpha", 10)}
    assert runs[leaseless.id].errors == [ABANDONED] and runs[live.id].errors == [ABANDONED]
    assert runs[leaseless.id].finished_at >= report.record.started_at - timedelta(seconds=1)
    assert not runs[report.record.id].errors and runs[report.record.id].finished_at is not None
    assert await one.abandon_stale("alpha") == []  # nothing left to mark
