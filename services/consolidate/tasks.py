"""The consolidation tasks as passes over the graph (ConsolidationPasses), one tenant
at a time: decay, creative association, clustering, forgetting.

Each pass reads the tenant's memories a page at a time (never all at once;
clustering keeps at most its cap of vectors), decides with the domain's rules
(services/core/domain/decay, association, clustering, forgetting) and writes
in one batched query per page, each write with its events in the outbox; the
events are then handed to the relay so the bus (and recall's projection, SSE)
follows at once. A dry run reads and decides the same way and writes
nothing: its report says what would change.

A pass reports counts, errors and a bounded sample of the changes with
before/after (pass_report.py), and updates a Progress the status reads; it logs a
line per page.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from services.consolidate.pass_report import Heartbeat, PassResult, RunProgress, Sampler, Skips, no_heartbeat, readable
from services.core.disputes import Disputes
from services.core.domain import association, clustering
from services.core.domain.association import AssociationPolicy
from services.core.domain.clustering import ClusterPolicy
from services.core.domain.consolidation import MemorySample, Task, page_pause
from services.core.domain.decay import DecayPolicy, DecayRow, RelevanceUpdate, emits, relevance
from services.core.domain.forgetting import ForgetPolicy, Verdict, verdict
from services.core.domain.model import EventKind, MemoryEvent
from services.core.domain.times import from_micros, to_micros
from services.core.ports.consolidation import ConsolidationPasses
from services.core.ports.models import LanguageModel
from services.core.ports.writes import MemoryDeletes

log = structlog.get_logger()


@dataclass(frozen=True, slots=True)
class TaskPolicies:
    """The rules of the four passes (from ConsolidationSettings.decay_policy and the others)."""

    decay: DecayPolicy = DecayPolicy()
    forget: ForgetPolicy = ForgetPolicy()
    creative: AssociationPolicy = AssociationPolicy()
    cluster: ClusterPolicy = ClusterPolicy()
    #: Memories (with their vectors, in memory) one clustering run reads at most.
    cluster_max_memories: int = 5000


class ConsolidationTasks:
    """The four passes, over one store (reads and its own writes), the writer
    (deletes, with their outbox events) and the relay (publishes what the
    writes recorded)."""

    def __init__(
        self,
        *,
        store: ConsolidationPasses,
        writer: MemoryDeletes,
        submit: Callable[[list[MemoryEvent]], Awaitable[object]],
        policies: TaskPolicies,
        page_size: int,
        sample_size: int,
        page_pause_seconds: float = 0.0,
        page_pause_ratio: float = 0.0,
        write_epsilon: float = 0.0,
        llm: LanguageModel | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        disputes: Disputes | None = None,
    ):
        # A CONTRADICTS link disputes the older memory (services/core/disputes.py).
        self._disputes = disputes
        self._store = store
        self._writer = writer
        self._submit = submit
        self._policies = policies
        self._page = page_size
        self._sample = sample_size
        self._pause = page_pause_seconds
        self._pause_ratio = page_pause_ratio
        self._write_epsilon = write_epsilon
        self._llm = llm
        self._clock = clock

    async def run(
        self,
        task: Task,
        tenant: str,
        *,
        dry_run: bool,
        progress: RunProgress,
        heartbeat: Heartbeat = no_heartbeat,
        after_dry_decay: bool = False,
    ) -> PassResult:
        """One pass of `task` over the tenant's memories. `after_dry_decay`:
        this forget pass follows a dry decay pass of the same run (a dry
        `full`), so it judges the scores that decay would have written."""
        if Task(task) is Task.FORGET:
            return await self.forget(
                tenant, dry_run=dry_run, progress=progress, heartbeat=heartbeat, rescore=after_dry_decay
            )
        passes = {Task.DECAY: self.decay, Task.CREATIVE: self.creative, Task.CLUSTER: self.cluster}
        return await passes[Task(task)](tenant, dry_run=dry_run, progress=progress, heartbeat=heartbeat)

    def _score(self, row: DecayRow, now: datetime) -> float:
        return relevance(
            timestamp=row.timestamp,
            last_accessed=row.last_accessed,
            edges=row.edges,
            importance=row.importance,
            confidence=row.confidence,
            now=now,
            policy=self._policies.decay,
        )

    def _scored(self, row: DecayRow, now: datetime, skips: Skips) -> float | None:
        """The row's score, or None (skipped and counted) for one that did not read or does not score."""
        if row.unreadable:
            skips.add(row.id, row.unreadable)
            return None
        try:
            return self._score(row, now)
        except (TypeError, ValueError, OverflowError, ArithmeticError) as exc:
            skips.add(row.id, f"{type(exc).__name__}: {exc}")
            return None

    async def _pages(self, tenant: str, progress: RunProgress, heartbeat: Heartbeat):
        """The tenant's decay rows a page at a time, with progress and a log line per page."""
        progress.total = await self._writer.count_memories(tenant)
        cursor = -1
        while True:
            # The page's time is its read, the caller's decisions and writes (between the yield and the
            # resumption) and the relay: what the pass took of the store, which sets the pause after it.
            started = time.perf_counter()
            cursor, rows = await self._store.decay_page(tenant, cursor, self._page)
            if not rows:
                return
            yield rows
            took = time.perf_counter() - started
            progress.processed += len(rows)
            log.info(
                "consolidation progress",
                task=progress.task,
                tenant=tenant,
                dry_run=progress.dry_run,
                processed=progress.processed,
                total=progress.total,
                **progress.counts,
            )
            await heartbeat(progress)
            # A duty cycle, so recall's queries are not queued behind a long pass (a write holds the graph).
            pause = page_pause(took, floor_seconds=self._pause, ratio=self._pause_ratio)
            if pause:
                await asyncio.sleep(pause)

    async def decay(self, tenant: str, *, dry_run: bool, progress: RunProgress, heartbeat: Heartbeat) -> PassResult:
        """Write each memory's relevance score where it moved by more than the
        write epsilon (or is the first); a DECAYED event where it moved by
        more than the event epsilon from the score the last event carried
        (or is the first)."""
        result = PassResult(counts=progress.counts)
        counts = result.counts
        counts.update(scanned=0, updated=0, events=0)
        sampler = Sampler(result, self._sample)
        skips = Skips(result, progress.task, tenant)
        epsilon = self._policies.decay.event_epsilon
        async for rows in self._pages(tenant, progress, heartbeat):
            now = self._clock()
            updates, before = [], {}
            for row in rows:
                score = self._scored(row, now, skips)
                if score is None:
                    continue
                if row.relevance_score is not None and abs(score - row.relevance_score) <= self._write_epsilon:
                    continue
                emit = emits(row.relevance_score, row.emitted_score, score, epsilon)
                update = RelevanceUpdate(row.id, row.version, score, emit)
                updates.append(update)
                before[row.id] = row
            counts["scanned"] += len(rows)
            if not updates:
                continue
            if dry_run:
                written = [u.id for u in updates]
            else:
                now_us = to_micros(now)
                written = await self._store.write_relevance(tenant, updates, now_us=now_us)
                await self._relay_decayed(tenant, updates, set(written), now_us, before)
            wrote = set(written)
            for update in updates:
                if update.id in wrote:
                    counts["updated"] += 1
                    counts["events"] += update.emit
                    sampler.add(update.id, "decayed", before[update.id].relevance_score, update.score)
        skips.close()
        return result

    async def _relay_decayed(
        self, tenant: str, updates: list[RelevanceUpdate], written: set[str], now_us: int, rows: dict[str, DecayRow]
    ) -> None:
        # The store recorded these events with its write (the outbox); the same
        # ids here, so the relay's acknowledgement clears those entries.
        at = from_micros(now_us)
        events = [
            MemoryEvent.consolidated(
                EventKind.DECAYED, tenant, u.id, u.version, at, has_embedding=rows[u.id].has_embedding
            )
            for u in updates
            if u.emit and u.id in written
        ]
        if events:
            await self._submit(events)

    async def forget(
        self, tenant: str, *, dry_run: bool, progress: RunProgress, heartbeat: Heartbeat, rescore: bool = False
    ) -> PassResult:
        """Archive and delete by the forgetting rules (off while both thresholds
        are 0), judging each memory by the score decay last wrote (a memory
        decay never scored is kept); with `rescore`, by the score decay would
        write now (a dry `full` run, whose decay wrote nothing, reports what
        the real one would do)."""
        result = PassResult(counts=progress.counts)
        counts = result.counts
        counts.update(scanned=0, archived=0, deleted=0, protected=0)
        policy = self._policies.forget
        if not policy.enabled:
            return result
        sampler = Sampler(result, self._sample)
        skips = Skips(result, progress.task, tenant)
        async for rows in self._pages(tenant, progress, heartbeat):
            now = self._clock()
            to_archive, to_delete, scores = [], [], {}
            for row in rows:
                if rescore:
                    score = self._scored(row, now, skips)
                    if score is None:
                        continue
                elif row.unreadable:
                    skips.add(row.id, row.unreadable)
                    continue
                else:
                    score = row.relevance_score
                try:
                    decision = verdict(
                        type=row.type,
                        importance=row.importance,
                        timestamp=row.timestamp,
                        relevance_score=score,
                        archived=row.archived,
                        now=now,
                        policy=policy,
                    )
                except (TypeError, ValueError, OverflowError, ArithmeticError) as exc:
                    skips.add(row.id, f"{type(exc).__name__}: {exc}")
                    continue
                scores[row.id] = score
                if decision is Verdict.DELETE:
                    to_delete.append(row)
                elif decision is Verdict.ARCHIVE:
                    to_archive.append(row)
            counts["scanned"] += len(rows)
            if dry_run:
                archived = [r.id for r in to_archive]
                deleted = [r.id for r in to_delete]
            else:
                archived, deleted = await self._forget_page(tenant, to_archive, to_delete, now)
            rows_by_id = {r.id: r for r in rows}
            for memory_id in archived:
                counts["archived"] += 1
                sampler.add(memory_id, "archived", f"active, score {scores[memory_id]:.6f}", "archived")
            for memory_id in deleted:
                counts["deleted"] += 1
                state = "archived" if rows_by_id[memory_id].archived else "active"
                sampler.add(memory_id, "deleted", f"{state}, score {scores[memory_id]:.6f}", "deleted")
        skips.close()
        return result

    async def _forget_page(
        self, tenant: str, to_archive: list[DecayRow], to_delete: list[DecayRow], now: datetime
    ) -> tuple[list[str], list[str]]:
        now_us = to_micros(now)
        archived: list[str] = []
        if to_archive:
            archived = await self._store.archive(tenant, to_archive, now_us=now_us)
            done = set(archived)
            at = from_micros(now_us)
            # The same events the store recorded in the outbox (same ids), so the relay's ack clears them.
            events = [
                MemoryEvent.archived(tenant, r.id, r.version, at, has_embedding=r.has_embedding)
                for r in to_archive
                if r.id in done
            ]
            if events:
                await self._submit(events)
        deleted: list[str] = []
        if to_delete:
            events = [MemoryEvent.deleted(tenant, r.id, now) for r in to_delete]
            deleted = await self._writer.delete_memories(tenant, events, now_us=now_us)
            gone = set(deleted)
            if gone:
                await self._submit([e for e in events if e.memory_id in gone])
        return archived, deleted

    async def creative(self, tenant: str, *, dry_run: bool, progress: RunProgress, heartbeat: Heartbeat) -> PassResult:
        """Link related but unconnected pairs of a random sample (DISCOVERED,
        or CONTRADICTS by the domain's rule, or the language model's judgement
        when one is set), at most the rules' bound per run, never where an
        edge already joins the pair."""
        result = PassResult(counts=progress.counts)
        counts = result.counts
        policy = self._policies.creative
        skips = Skips(result, progress.task, tenant)
        sample = readable(await self._store.association_sample(tenant, policy.sample_size), skips)
        counts.update(sampled=len(sample), associated=0, contradicts=0)
        progress.processed = len(sample)
        if len(sample) >= 2:
            connected = await self._store.connected_pairs(tenant, [m.id for m in sample])
            links = await self._links(sample, connected, policy)
            if links and not dry_run:
                links = await self._store.link_discovered(tenant, links, now_us=to_micros(self._clock()))
                contradicting = [(k.source_id, k.target_id) for k in links if k.type == association.CONTRADICTS]
                if contradicting and self._disputes is not None:
                    await self._disputes.contradicted(tenant, contradicting)
            sampler = Sampler(result, self._sample)
            for link in links:
                counts["associated"] += 1
                counts["contradicts"] += link.type == association.CONTRADICTS
                sampler.add(
                    link.source_id, link.type.lower(), "", f"{link.target_id} (similarity {link.similarity:.3f})"
                )
        log.info("consolidation progress", task=progress.task, tenant=tenant, dry_run=dry_run, **counts)
        await heartbeat(progress)
        skips.close()
        return result

    async def _links(
        self, sample: list[MemorySample], connected: set[tuple[str, str]], policy: AssociationPolicy
    ) -> list[association.Discovery]:
        """The rule's links, or with a language model, the model's judgement of
        each candidate pair (the rule where it gives no usable answer)."""
        if self._llm is None:
            return association.discover(sample, connected, policy)
        links = []
        for first, second, similarity in association.candidate_pairs(sample, connected, policy):
            answer = await self._llm.judge_association(first.content, second.content)
            link = association.judged(first, second, similarity, answer, policy)
            if link is not None:
                links.append(link)
        return links

    async def cluster(self, tenant: str, *, dry_run: bool, progress: RunProgress, heartbeat: Heartbeat) -> PassResult:
        """Group similar memories into MetaPatterns (replacing the previous
        run's), reading the tenant's vectors a page at a time up to a cap."""
        result = PassResult(counts=progress.counts)
        counts = result.counts
        policy = self._policies.cluster
        members: list[MemorySample] = []
        after = ""
        cap = self._policies.cluster_max_memories
        skips = Skips(result, progress.task, tenant)
        while len(members) < cap:
            page = await self._store.cluster_inputs(tenant, after, min(self._page, cap - len(members)))
            if not page:
                break
            members.extend(readable(page, skips))
            after = page[-1].id
            progress.processed = len(members)
            log.info("consolidation progress", task=progress.task, tenant=tenant, read=len(members))
            await heartbeat(progress)
        clusters = clustering.cluster(members, policy)
        counts.update(read=len(members), clusters=len(clusters), clustered=sum(c.size for c in clusters))
        if not dry_run:
            await self._store.write_clusters(tenant, Task.CLUSTER.value, clusters, now_us=to_micros(self._clock()))
        sampler = Sampler(result, self._sample)
        for found in clusters:
            sampler.add(found.member_ids[0], "clustered", "", f"{found.size} members: {found.summary[:80]}")
        skips.close()
        return result
