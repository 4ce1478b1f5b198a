"""Ingest use cases over ports: every write, validated by the domain rules.

Each write goes to the graph together with its events (one query), so an
acknowledged write is never lost; the relay then publishes the events, and
re-drives them later if the bus was down.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from services.core.domain.associations import build_relation
from services.core.domain.classification import FALLBACK, Classification, classify_by_patterns
from services.core.domain.drafts import Draft, build_memory, validate_batch_size, validate_content, validate_metadata
from services.core.domain.errors import (
    Aborted,
    AlreadyExists,
    DomainError,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from services.core.domain.ids import validate_memory_id
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.supersede import close_superseded, supersession_edge, validate_supersede_relation
from services.core.domain.times import to_micros
from services.core.domain.updates import apply_update, update_kind
from services.core.ports import IdempotencyClaim, LanguageModel, MemoryWriter
from services.core.relay import OutboxRelay


@dataclass(frozen=True, slots=True)
class WritePolicy:
    """The knobs of the write path, from settings."""

    auto_summarize: bool
    summary_target_length: int
    idempotency_ttl_seconds: float
    delete_page_size: int
    conflict_retries: int


@dataclass(frozen=True, slots=True)
class Summarised:
    original_length: int
    summarized_length: int


@dataclass(slots=True)
class Created:
    """The outcome of a create: the stored records and what was queued."""

    memories: list[Memory]
    published: bool
    replayed: bool = False
    summaries: list[Summarised | None] = field(default_factory=list)

    @property
    def memory(self) -> Memory:
        return self.memories[0]


@dataclass(slots=True)
class Superseded:
    replacement: Memory
    superseded: Memory
    relation: str
    published: bool
    summary: Summarised | None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class AssociationDraft:
    memory1_id: object
    memory2_id: object
    type: object
    strength: object = None
    properties: dict = field(default_factory=dict)


@dataclass(slots=True)
class AssociationOutcome:
    created: list[tuple[int, Relation]]
    failed: list[tuple[int, str]]


def _at_index(index: int, error: DomainError) -> DomainError:
    """The same error, its message naming the batch item."""
    details = {k: v for k, v in error.details.items() if k != "field"}
    return type(error)(
        error.reason, f"Memory at index {index}: {error.message}", field=error.field, index=index, **details
    )


class IngestHandlers:
    def __init__(
        self,
        *,
        writer: MemoryWriter,
        relay: OutboxRelay,
        limits: Limits,
        llm: LanguageModel | None = None,
        policy: WritePolicy,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ):
        self._writer = writer
        self._relay = relay
        self._limits = limits
        self._llm = llm
        self._policy = policy
        self._clock = clock
        self._new_id = new_id
        self._quota_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # Preparing a new memory ---------------------------------------------------------------------------

    async def _classify(self, content: str) -> Classification:
        """Regex first; the LLM only when nothing matched and a key is set."""
        found = classify_by_patterns(content)
        if found is not None:
            return found
        if self._llm is None:
            return FALLBACK
        return await self._llm.classify(content)

    async def _summarise(self, draft: Draft) -> tuple[Draft, Summarised | None]:
        """Content between the soft and hard limits becomes a summary; the
        original is kept in metadata.original_content."""
        content = draft.content
        if not (self._policy.auto_summarize and self._llm and len(content) > self._limits.content_soft_limit):
            return draft, None
        summary = await self._llm.summarize(content, self._policy.summary_target_length)
        if not summary:
            return draft, None
        return replace(draft, content=summary, original_content=content), Summarised(len(content), len(summary))

    async def _prepare(self, tenant: str, draft: Draft, now: datetime) -> tuple[Memory, Summarised | None]:
        validate_content(draft.content, self._limits)
        validate_metadata(draft.metadata_json)  # a bad body is refused before the model is asked to summarise it
        draft, summarised = await self._summarise(draft)
        explicit = draft.type is not None and draft.type.strip()
        classification = FALLBACK if explicit else await self._classify(draft.content)
        memory = build_memory(
            draft,
            memory_id=self._new_id(),
            tenant=tenant,
            now=now,
            limits=self._limits,
            classify=lambda _content: classification,
        )
        return memory, summarised

    def _claim(self, tenant: str, key: str, request_hash: str, now: datetime) -> IdempotencyClaim:
        expires = now + timedelta(seconds=self._policy.idempotency_ttl_seconds)
        return IdempotencyClaim(tenant, key, str(uuid.uuid4()), request_hash, to_micros(expires))

    async def _replay(self, tenant: str, key: str, request_hash: str, now: datetime) -> Created | None:
        """The first result for this key, or None when the key is unused."""
        prior = await self._writer.get_idempotency(tenant, key, to_micros(now))
        if prior is None:
            return None
        prior_hash, ids = prior
        if prior_hash != request_hash:
            raise AlreadyExists(
                "IDEMPOTENCY_KEY_REUSED",
                "this Idempotency-Key was used for a different request",
                field="idempotency_key",
            )
        found = await self._writer.get_memories(tenant, ids)
        if len(found) != len(ids):
            raise AlreadyExists(
                "IDEMPOTENT_RESULT_GONE",
                "this Idempotency-Key's request already ran, and its memories were deleted since",
                field="idempotency_key",
            )
        return Created([found[i] for i in ids], published=True, replayed=True, summaries=[None] * len(ids))

    @asynccontextmanager
    async def _quota(self, tenant: str, memory_limit: int | None, adding: int) -> AsyncIterator[None]:
        """Count the tenant's memories and refuse the write when `adding` more
        would exceed its limit, holding the tenant's lock until the
        write is done, so two writes in this process cannot both take the last
        place. Unlimited tenants skip the count."""
        if memory_limit is None:
            yield
            return
        lock = self._quota_locks.get(tenant)
        if lock is None:
            lock = self._quota_locks[tenant] = asyncio.Lock()
        async with lock:
            stored = await self._writer.count_memories(tenant)
            if stored + adding > memory_limit:
                raise ResourceExhausted(
                    "MEMORY_LIMIT_EXCEEDED",
                    f"memory limit of {memory_limit} reached: {stored} stored, {adding} more would exceed it;"
                    " nothing was written",
                    limit=memory_limit,
                    stored=stored,
                    requested=adding,
                )
            yield

    async def _store(
        self,
        tenant: str,
        memories: list[Memory],
        summaries,
        idempotency_key: str,
        request_hash: str,
        now: datetime,
        memory_limit: int | None,
    ) -> Created:
        events = [MemoryEvent.for_memory(EventKind.CREATED, m, now) for m in memories]
        claim = self._claim(tenant, idempotency_key, request_hash, now) if idempotency_key else None
        async with self._quota(tenant, memory_limit, len(memories)):
            wrote = await self._writer.create_memories(memories, events, now_us=to_micros(now), claim=claim)
        if not wrote:  # a concurrent request with the same key won
            replay = await self._replay(tenant, idempotency_key, request_hash, now)
            if replay is None:
                raise Aborted("IDEMPOTENCY_CONFLICT", "a request with this Idempotency-Key is in progress")
            return replay
        published = await self._relay.submit(events)
        return Created(memories, published, summaries=summaries)

    # Use cases ----------------------------------------------------------------------------------------

    async def create_memory(
        self,
        tenant: str,
        draft: Draft,
        *,
        idempotency_key: str = "",
        request_hash: str = "",
        memory_limit: int | None = None,
    ) -> Created:
        """POST /memory; refused (ResourceExhausted) when the tenant holds `memory_limit` memories."""
        now = self._clock()
        if idempotency_key and (replay := await self._replay(tenant, idempotency_key, request_hash, now)):
            return replay
        memory, summarised = await self._prepare(tenant, draft, now)
        return await self._store(tenant, [memory], [summarised], idempotency_key, request_hash, now, memory_limit)

    async def batch_create(
        self,
        tenant: str,
        drafts: list[Draft],
        *,
        idempotency_key: str = "",
        request_hash: str = "",
        memory_limit: int | None = None,
    ) -> Created:
        """POST /memory/batch: all or nothing, one graph query; a batch that
        would take the tenant past `memory_limit` is refused whole."""
        validate_batch_size(len(drafts), self._limits)
        now = self._clock()
        if idempotency_key and (replay := await self._replay(tenant, idempotency_key, request_hash, now)):
            return replay
        # Batch items take no id, embedding or validity window.
        drafts = [replace(d, embedding=None, t_valid=None, t_invalid=None) for d in drafts]
        for index, draft in enumerate(drafts):  # every rule first, so the lowest bad index is reported
            try:
                build_memory(
                    draft, memory_id="-", tenant=tenant, now=now, limits=self._limits, classify=lambda _: FALLBACK
                )
            except DomainError as error:
                raise _at_index(index, error) from None
        prepared = await asyncio.gather(*(self._prepare(tenant, d, now) for d in drafts))
        memories = [m for m, _ in prepared]
        summaries = [s for _, s in prepared]
        return await self._store(tenant, memories, summaries, idempotency_key, request_hash, now, memory_limit)

    async def update_memory(self, tenant: str, memory_id: str, draft: Draft, fields: set[str]) -> tuple[Memory, bool]:
        """PATCH /memory/{id}: compare-and-set on the version, retried on a race."""
        memory_id = validate_memory_id(memory_id)
        for _ in range(self._policy.conflict_retries):
            now = self._clock()
            current = await self._require(tenant, memory_id)
            updated, content_changed = apply_update(current, draft, fields, now=now, limits=self._limits)
            kind = update_kind(current, updated, content_changed)
            event = MemoryEvent.for_memory(kind, updated, now, content_changed=content_changed)
            if await self._writer.update_memory(updated, current.version, event, now_us=to_micros(now)):
                await self._relay.submit([event])
                return updated, content_changed
        raise Aborted("CONCURRENT_UPDATE", f"memory {memory_id} kept changing; retry the update", field="id")

    async def delete_memory(self, tenant: str, memory_id: str) -> str:
        """DELETE /memory/{id}: node and edges; the vector goes through the event."""
        memory_id = validate_memory_id(memory_id)
        now = self._clock()
        events = [MemoryEvent.deleted(tenant, memory_id, now)]
        if not await self._writer.delete_memories(tenant, events, now_us=to_micros(now)):
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        await self._relay.submit(events)
        return memory_id

    async def delete_by_tags(self, tenant: str, tags: list[str]) -> int:
        """DELETE /memory/by-tag: exact, case-insensitive, any-of, page by page."""
        wanted = sorted({t.strip().lower() for t in tags if isinstance(t, str) and t.strip()})
        if not wanted:
            raise InvalidArgument("TAGS_REQUIRED", "'tags' must name at least one tag", field="tags")
        total = 0
        while ids := await self._writer.find_ids_by_tags(tenant, wanted, self._policy.delete_page_size):
            now = self._clock()
            events = [MemoryEvent.deleted(tenant, i, now) for i in ids]
            deleted = set(await self._writer.delete_memories(tenant, events, now_us=to_micros(now)))
            await self._relay.submit([e for e in events if e.memory_id in deleted])
            total += len(deleted)
        return total

    async def associate(self, tenant: str, drafts: list[AssociationDraft], *, single: bool) -> AssociationOutcome:
        """POST /associate. A single association raises on any problem; a
        batch reports each failure by index."""
        validate_batch_size(len(drafts), self._limits, field="associations")
        now = self._clock()
        valid: list[tuple[int, Relation]] = []
        failed: list[tuple[int, str]] = []
        for index, d in enumerate(drafts):
            try:
                valid.append(
                    (index, build_relation(d.memory1_id, d.memory2_id, d.type, d.strength, d.properties, now=now))
                )
            except DomainError as error:
                if single:
                    raise
                failed.append((index, error.message))
        relations = [r for _, r in valid]
        events = [MemoryEvent.associated(tenant, r) for r in relations]
        written = (
            set(await self._writer.create_relations(tenant, relations, events, now_us=to_micros(now)))
            if valid
            else set()
        )
        created = [(index, r) for k, (index, r) in enumerate(valid) if k in written]
        missing = [(index, r) for k, (index, r) in enumerate(valid) if k not in written]
        if missing:
            found = await self._writer.get_memories(tenant, [i for _, r in missing for i in (r.source_id, r.target_id)])
            for index, r in missing:
                name = "memory1_id" if r.source_id not in found else "memory2_id"
                gone = r.source_id if name == "memory1_id" else r.target_id
                if single:
                    raise NotFound("MEMORY_NOT_FOUND", f"'{name}' {gone} not found", field=name, id=gone)
                failed.append((index, f"'{name}' {gone} not found"))
        await self._relay.submit([e for k, e in enumerate(events) if k in written])
        return AssociationOutcome(created, sorted(failed))

    async def supersede(
        self,
        tenant: str,
        old_id: str,
        draft: Draft,
        *,
        relation: str | None,
        reason: str,
        idempotency_key: str = "",
        request_hash: str = "",
        memory_limit: int | None = None,
    ) -> Superseded:
        """Store a replacement, close the old memory and link old -> new, in
        one graph query: all of it or none of it. The replacement is a new
        memory, so it counts against `memory_limit`."""
        old_id = validate_memory_id(old_id, "supersedes_memory_id")
        relation_type = validate_supersede_relation(relation)
        now = self._clock()
        if idempotency_key and (replay := await self._replay(tenant, idempotency_key, request_hash, now)):
            return await self._superseded_replay(tenant, old_id, relation_type, replay)
        replacement, summarised = await self._prepare(tenant, draft, now)
        claim = self._claim(tenant, idempotency_key, request_hash, now) if idempotency_key else None
        for _ in range(self._policy.conflict_retries):
            old = await self._require(tenant, old_id, field_name="supersedes_memory_id")
            closed = close_superseded(old, replacement, reason=reason, now=now)
            edge = supersession_edge(old, replacement, relation_type, reason=reason, now=now)
            events = [
                MemoryEvent.for_memory(EventKind.CREATED, replacement, now),
                MemoryEvent.for_memory(EventKind.SUPERSEDED, closed, now),
                MemoryEvent.associated(tenant, edge),
            ]
            async with self._quota(tenant, memory_limit, 1):
                wrote = await self._writer.supersede(
                    closed, old.version, replacement, edge, events, now_us=to_micros(now), claim=claim
                )
            if wrote:
                published = await self._relay.submit(events)
                return Superseded(replacement, closed, relation_type, published, summarised)
            if claim and (replay := await self._replay(tenant, idempotency_key, request_hash, now)):
                return await self._superseded_replay(tenant, old_id, relation_type, replay)
        raise Aborted("CONCURRENT_UPDATE", f"memory {old_id} kept changing; retry", field="supersedes_memory_id")

    async def _superseded_replay(self, tenant: str, old_id: str, relation: str, replay: Created) -> Superseded:
        old = await self._require(tenant, old_id, field_name="supersedes_memory_id")
        return Superseded(replay.memory, old, relation, published=True, summary=None, replayed=True)

    async def _require(self, tenant: str, memory_id: str, field_name: str = "id") -> Memory:
        memory = await self._writer.get_memory(tenant, memory_id)
        if memory is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field=field_name, id=memory_id)
        return memory
