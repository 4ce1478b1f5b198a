"""Ingest use cases over ports: every write, validated by the domain rules.

Each write goes to the graph together with its events (one query), so an
acknowledged write is never lost; the relay then publishes the events, and
re-drives them later if the bus was down.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial

from services.core.disputes import Disputes
from services.core.domain.associations import build_relation
from services.core.domain.classification import FALLBACK, Classification, classify_by_patterns
from services.core.domain.drafts import Draft, build_memory, validate_batch_size, validate_content, validate_metadata
from services.core.domain.errors import (
    Aborted,
    AlreadyExists,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from services.core.domain.ids import stored_memory_id, validate_memory_id
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, Memory, MemoryEvent, Relation
from services.core.domain.review_policy import ReviewPolicy, review_rule
from services.core.domain.supersede import close_superseded, supersession_edge, validate_supersede_relation
from services.core.domain.times import to_micros
from services.core.domain.tombstones import (
    INVALIDATED,
    REJECTED,
    REVIEW_REJECTED,
    Tombstone,
    TombstoneGuard,
    TombstoneHeld,
    content_hash,
    delete_leaves_tombstone,
    refuse_tombstoned,
    tombstone_for,
)
from services.core.domain.trust import TrustState, require_move, trust_of
from services.core.domain.updates import apply_update, update_kind
from services.core.ports import IdempotencyClaim, LanguageModel, MemoryWriter, TrustStore
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
    #: Batch items answered by their item idempotency key's first memory (not stored again).
    replayed_items: int = 0

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


def _texts(memory: Memory) -> list[str]:
    """The texts a tombstone is looked up by: the content and, when a summary
    replaced it, the original."""
    original = memory.metadata.get("original_content") if isinstance(memory.metadata, dict) else None
    return [memory.content, original] if isinstance(original, str) and original else [memory.content]


def _item_keys(item_keys: list[tuple[str, str]] | None, count: int) -> dict[str, tuple[int, str]]:
    """A batch's item keys by key: (index, item hash); none when no item has one.
    A key twice in one batch is INVALID_ARGUMENT naming the second index."""
    if not item_keys or not any(key for key, _ in item_keys):
        return {}
    if len(item_keys) != count:
        raise InvalidArgument(
            "INVALID_ARGUMENT", "item_idempotency_keys must give one key per memory", field="item_idempotency_keys"
        )
    keyed: dict[str, tuple[int, str]] = {}
    for index, (key, item_hash) in enumerate(item_keys):
        if not key:
            continue
        if key in keyed:
            raise InvalidArgument(
                "DUPLICATE_IDEMPOTENCY_KEY",
                f"Memory at index {index}: idempotency_key repeats the one at index {keyed[key][0]}",
                field="idempotency_key",
                index=index,
            )
        keyed[key] = (index, item_hash)
    return keyed


class IngestHandlers:
    def __init__(
        self,
        *,
        writer: MemoryWriter,
        relay: OutboxRelay,
        limits: Limits,
        llm: LanguageModel | None = None,
        policy: WritePolicy,
        trust: TrustStore | None = None,
        review: ReviewPolicy | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ):
        self._writer = writer
        # Without a trust store (unit tests of other rules) no tombstone is
        # checked or left and reviews are refused.
        self._trust = trust
        self._review = review or ReviewPolicy()
        self._disputes = Disputes(trust, relay.submit, self._review, clock) if trust is not None else None
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
        rule = review_rule(memory, self._review) if memory.trust_state == TrustState.ACTIVE else None
        if rule is not None:
            memory = replace(memory, trust_state=TrustState.PENDING_REVIEW.value, review_rule=rule)
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
        *,
        force: bool = False,
        batch: bool = False,
        positions: list[int] | None = None,
    ) -> Created:
        """`positions`: each memory's index in the request, when these are some of a batch's items."""
        events = [MemoryEvent.for_memory(EventKind.CREATED, m, now) for m in memories]
        claim = self._claim(tenant, idempotency_key, request_hash, now) if idempotency_key else None
        write = partial(self._writer.create_memories, memories, events, now_us=to_micros(now), claim=claim)
        async with self._quota(tenant, memory_limit, len(memories)):
            wrote = await self._guarded(write, tenant, memories, events, force=force, batch=batch, positions=positions)
        if not wrote:  # a concurrent request with the same key won
            replay = await self._replay(tenant, idempotency_key, request_hash, now)
            if replay is None:
                raise Aborted("IDEMPOTENCY_CONFLICT", "a request with this Idempotency-Key is in progress")
            return replay
        published = await self._relay.submit(events)
        return Created(memories, published, summaries=summaries)

    async def _guarded(
        self,
        write: Callable[..., Awaitable[bool]],
        tenant: str,
        memories: list[Memory],
        events: list[MemoryEvent],
        *,
        force: bool,
        batch: bool,
        positions: list[int] | None = None,
    ) -> bool:
        """Run `write(guard=...)`, a create whose own query checks the tenant's
        tombstones, so none left by a concurrent rejection slips in between
        (docs/trust.md). Content a tombstone holds is refused (ALREADY_EXISTS
        naming it; in a batch the first such item refuses the whole batch);
        with force, the write is sent again with the events saying so
        (forced, tombstone_id), and it goes through only if exactly those
        tombstones still hold. Without a trust store nothing is checked."""
        hashes = [[content_hash(t) for t in _texts(m)] for m in memories]
        forced: dict[int, Tombstone] = {}
        # The first try learns the tombstones; each retry follows a change of them.
        for _ in range(1 + self._policy.conflict_retries):
            guard = TombstoneGuard.of(tenant, hashes, forced) if self._trust is not None else None
            try:
                return await write(guard=guard)
            except TombstoneHeld as held:
                forced = guard.hits(held.held) if guard is not None else {}
            if forced and not force:
                index = min(forced)
                raise refuse_tombstoned(forced[index], (positions[index] if positions else index) if batch else None)
            for index, event in enumerate(events):
                hit = forced.get(index)
                if hit is not None:
                    event.forced, event.tombstone_id, event.reason = True, hit.id, hit.reason
                elif event.forced:  # its tombstone went meanwhile
                    event.forced, event.tombstone_id, event.reason = False, "", ""
        raise Aborted("CONCURRENT_UPDATE", "the tombstones of this content kept changing; retry", field="content")

    # Use cases ----------------------------------------------------------------------------------------

    async def create_memory(
        self,
        tenant: str,
        draft: Draft,
        *,
        idempotency_key: str = "",
        request_hash: str = "",
        memory_limit: int | None = None,
        force: bool = False,
    ) -> Created:
        """POST /memory; refused (ResourceExhausted) when the tenant holds
        `memory_limit` memories, and (AlreadyExists) when a tombstone holds
        its content, unless `force`."""
        now = self._clock()
        if idempotency_key and (replay := await self._replay(tenant, idempotency_key, request_hash, now)):
            return replay
        memory, summarised = await self._prepare(tenant, draft, now)
        return await self._store(
            tenant, [memory], [summarised], idempotency_key, request_hash, now, memory_limit, force=force
        )

    async def batch_create(
        self,
        tenant: str,
        drafts: list[Draft],
        *,
        idempotency_key: str = "",
        request_hash: str = "",
        memory_limit: int | None = None,
        force: bool = False,
        item_keys: list[tuple[str, str]] | None = None,
    ) -> Created:
        """POST /memory/batch: all or nothing, one graph query; a batch that
        would take the tenant past `memory_limit`, or holding tombstoned
        content (without `force`), is refused whole. `item_keys`, one
        (idempotency key or "", item hash) per draft, makes each keyed item
        stored once: a key seen before answers with its first memory."""
        validate_batch_size(len(drafts), self._limits)
        keyed = _item_keys(item_keys, len(drafts))
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
        # Recorded in their order, a microsecond apart: items of one time keep
        # the batch's order (the memory "just before" one, embedding_text.py).
        memories = [
            replace(m, recorded_at=m.recorded_at + timedelta(microseconds=i)) for i, (m, _) in enumerate(prepared)
        ]
        summaries = [s for _, s in prepared]
        if not keyed:
            return await self._store(
                tenant, memories, summaries, idempotency_key, request_hash, now, memory_limit, force=force, batch=True
            )
        memories, seen = await self._claim_items(tenant, memories, keyed, now)
        fresh = [i for i in range(len(memories)) if i not in seen]
        if not fresh:
            return Created([seen[i] for i in range(len(memories))], True, True, [None] * len(memories), len(seen))
        # The items' keys do the batch key's work (and answer for every item),
        # so it is not recorded: its replay would answer for the fresh items only.
        stored = await self._store(
            tenant,
            [memories[i] for i in fresh],
            [summaries[i] for i in fresh],
            "",
            request_hash,
            now,
            memory_limit,
            force=force,
            batch=True,
            positions=fresh,
        )
        written = dict(zip(fresh, stored.memories, strict=True))
        return Created(
            [seen[i] if i in seen else written[i] for i in range(len(memories))],
            stored.published,
            summaries=[None if i in seen else summaries[i] for i in range(len(memories))],
            replayed_items=len(seen),
        )

    async def _claim_items(
        self, tenant: str, memories: list[Memory], keyed: dict[str, tuple[int, str]], now: datetime
    ) -> tuple[list[Memory], dict[int, Memory]]:
        """Claim the items' keys for their new memories. A key held already
        (by an earlier request, or one running now) lends its memory id to
        the item; where that memory exists the item is answered by it (the
        second result), else (the earlier request stopped between its claim
        and its write) it is written now under that id, which the store
        keeps unique. The same key with another item is ALREADY_EXISTS."""
        now_us = to_micros(now)
        held = await self._writer.get_idempotency_many(tenant, list(keyed), now_us)
        owner = str(uuid.uuid4())
        expires = to_micros(now + timedelta(seconds=self._policy.idempotency_ttl_seconds))
        claims = [
            (IdempotencyClaim(tenant, key, owner, item_hash, expires), [memories[index].id])
            for key, (index, item_hash) in keyed.items()
            if key not in held
        ]
        if lost := await self._writer.claim_idempotency(claims, now_us):
            held.update(await self._writer.get_idempotency_many(tenant, sorted(lost), now_us))
        memories = list(memories)
        for key, (index, item_hash) in keyed.items():
            if key not in held:
                continue
            prior_hash, ids = held[key]
            if prior_hash != item_hash or len(ids) != 1:
                raise AlreadyExists(
                    "IDEMPOTENCY_KEY_REUSED",
                    f"Memory at index {index}: this idempotency_key was used for a different memory",
                    field="idempotency_key",
                    index=index,
                )
            memories[index] = replace(memories[index], id=ids[0])
        held_ids = [memories[index].id for key, (index, _) in keyed.items() if key in held]
        found = await self._writer.get_memories(tenant, held_ids) if held_ids else {}
        seen = {
            index: found[memories[index].id]
            for key, (index, _) in keyed.items()
            if key in held and memories[index].id in found
        }
        return memories, seen

    async def update_memory(self, tenant: str, memory_id: str, draft: Draft, fields: set[str]) -> tuple[Memory, bool]:
        """PATCH /memory/{id}: compare-and-set on the version, retried on a race.
        A PATCH naming no field answers the memory as it is and writes
        nothing (AutoMem answers it with success too)."""
        memory_id = stored_memory_id(memory_id)
        if not fields:
            return await self._require(tenant, memory_id), False
        for _ in range(self._policy.conflict_retries):
            now = self._clock()
            current = await self._require(tenant, memory_id)
            updated, content_changed = apply_update(current, draft, fields, now=now, limits=self._limits)
            kind = update_kind(current, updated, content_changed)
            event = MemoryEvent.for_memory(kind, updated, now, content_changed=content_changed)
            if updated.trust_state != current.trust_state:
                event.previous_trust_state = current.trust_state
            if await self._writer.update_memory(updated, current.version, event, now_us=to_micros(now), before=current):
                await self._relay.submit([event])
                return updated, content_changed
        raise Aborted("CONCURRENT_UPDATE", f"memory {memory_id} kept changing; retry the update", field="id")

    async def delete_memory(
        self, tenant: str, memory_id: str, *, reason: str = "", tombstone: bool = False
    ) -> tuple[str, str]:
        """DELETE /memory/{id}: node and edges; the vector goes through the
        event. With reason=rejected (or tombstone) a tombstone of its content
        is left in the same write, so the content cannot come back unforced.
        Returns the id and the tombstone's id ("" when none was left)."""
        memory_id = stored_memory_id(memory_id)
        leave = delete_leaves_tombstone(reason, tombstone)
        now = self._clock()
        events = [MemoryEvent.deleted(tenant, memory_id, now)]
        if leave:
            return memory_id, await self._delete_with_tombstone(tenant, memory_id, events, now)
        if not await self._writer.delete_memories(tenant, events, now_us=to_micros(now)):
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        await self._relay.submit(events)
        return memory_id, ""

    async def _delete_with_tombstone(self, tenant: str, memory_id: str, events: list[MemoryEvent], now) -> str:
        trust = self._require_trust()
        memory = await self._require(tenant, memory_id)
        stone = tombstone_for(tenant, memory_id, memory.content, REJECTED, now)
        events.append(MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, tenant, memory_id, stone.id, stone.reason, now))
        if not await trust.delete_with_tombstone(tenant, memory_id, stone, events, now_us=to_micros(now)):
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field="id", id=memory_id)
        await self._relay.submit(events)
        return stone.id

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
        contradictions = [(r.source_id, r.target_id) for _, r in created if r.type == "CONTRADICTS"]
        if contradictions and self._disputes is not None:
            await self._disputes.contradicted(tenant, contradictions)
        return AssociationOutcome(created, sorted(failed))

    async def review(self, tenant: str, memory_id: str, *, approve: bool, note: str = "") -> tuple[Memory, str]:
        """POST /review/{id}/approve|reject: a pending memory becomes verified,
        or rejected with a tombstone of its content (one write, with the
        REVIEWED and TOMBSTONE_SET events). A memory not pending review is
        FAILED_PRECONDITION. Returns the memory and the tombstone's id."""
        trust = self._require_trust()
        memory_id = validate_memory_id(memory_id)
        target = TrustState.VERIFIED if approve else TrustState.REJECTED
        for _ in range(self._policy.conflict_retries):
            now = self._clock()
            memory = await self._require(tenant, memory_id)
            current = trust_of(memory.trust_state)
            if current != TrustState.PENDING_REVIEW:
                raise FailedPrecondition(
                    "NOT_PENDING_REVIEW",
                    f"memory {memory_id} is not waiting for review (trust state '{current.value}')",
                    field="id",
                    trust_state=current.value,
                )
            require_move(current, target, field="id")
            updated = replace(memory, trust_state=target.value, version=memory.version + 1, updated_at=now)
            events = [
                MemoryEvent.trust_moved(
                    EventKind.REVIEWED, updated, current.value, now, reason=note or memory.review_rule
                )
            ]
            stone: Tombstone | None = None
            if not approve:
                stone = tombstone_for(tenant, memory_id, memory.content, REVIEW_REJECTED, now)
                events.append(
                    MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, tenant, memory_id, stone.id, stone.reason, now)
                )
            if await trust.set_trust(
                updated, memory.version, events, now_us=to_micros(now), tombstone=stone, before=memory
            ):
                await self._relay.submit(events)
                return updated, stone.id if stone else ""
        raise Aborted("CONCURRENT_UPDATE", f"memory {memory_id} kept changing; retry the review", field="id")

    async def remove_tombstone(self, tenant: str, tombstone_id: str) -> str:
        """DELETE /admin/tombstones/{id}: the content may be stored again."""
        trust = self._require_trust()
        tombstone_id = (tombstone_id or "").strip()
        found = await trust.get_tombstone(tenant, tombstone_id) if tombstone_id else None
        if found is None:
            raise NotFound("TOMBSTONE_NOT_FOUND", f"tombstone {tombstone_id!r} not found", field="id", id=tombstone_id)
        now = self._clock()
        event = MemoryEvent.tombstone(EventKind.TOMBSTONE_REMOVED, tenant, found.memory_id, found.id, found.reason, now)
        if not await trust.remove_tombstone(tenant, found.id, event, now_us=to_micros(now)):
            raise NotFound("TOMBSTONE_NOT_FOUND", f"tombstone {tombstone_id!r} not found", field="id", id=tombstone_id)
        await self._relay.submit([event])
        return found.id

    def _require_trust(self) -> TrustStore:
        if self._trust is None:
            raise FailedPrecondition("TRUST_STORE_MISSING", "this ingest service has no trust store")
        return self._trust

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
        force: bool = False,
    ) -> Superseded:
        """Store a replacement, close the old memory and link old -> new, in
        one graph query: all of it or none of it. The replacement is a new
        memory, so it counts against `memory_limit`, and a tombstoned one is
        refused unless `force`. The old memory becomes superseded; with
        INVALIDATED_BY (it was wrong) its content is tombstoned too."""
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
            events[1].previous_trust_state = old.trust_state
            write = partial(
                self._writer.supersede,
                closed,
                old.version,
                replacement,
                edge,
                events,
                now_us=to_micros(now),
                claim=claim,
                before=old,
            )
            async with self._quota(tenant, memory_limit, 1):
                wrote = await self._guarded(write, tenant, [replacement], events[:1], force=force, batch=False)
            if wrote:
                published = await self._relay.submit(events)
                if relation_type == "INVALIDATED_BY":
                    await self._tombstone_invalidated(tenant, old, now)
                return Superseded(replacement, closed, relation_type, published, summarised)
            if claim and (replay := await self._replay(tenant, idempotency_key, request_hash, now)):
                return await self._superseded_replay(tenant, old_id, relation_type, replay)
        raise Aborted("CONCURRENT_UPDATE", f"memory {old_id} kept changing; retry", field="supersedes_memory_id")

    async def _tombstone_invalidated(self, tenant: str, old: Memory, now: datetime) -> None:
        """The content INVALIDATED_BY declared wrong stays out: a tombstone and
        its event in one write, right after the supersede's (which is done
        whatever becomes of this one)."""
        if self._trust is None:
            return
        stone = tombstone_for(tenant, old.id, old.content, INVALIDATED, now)
        event = MemoryEvent.tombstone(EventKind.TOMBSTONE_SET, tenant, old.id, stone.id, stone.reason, now)
        await self._trust.set_tombstone(stone, event, now_us=to_micros(now))
        await self._relay.submit([event])

    async def _superseded_replay(self, tenant: str, old_id: str, relation: str, replay: Created) -> Superseded:
        old = await self._require(tenant, old_id, field_name="supersedes_memory_id")
        return Superseded(replay.memory, old, relation, published=True, summary=None, replayed=True)

    async def _require(self, tenant: str, memory_id: str, field_name: str = "id") -> Memory:
        memory = await self._writer.get_memory(tenant, memory_id)
        if memory is None:
            raise NotFound("MEMORY_NOT_FOUND", f"memory {memory_id} not found", field=field_name, id=memory_id)
        return memory
