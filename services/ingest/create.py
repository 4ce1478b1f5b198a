"""POST /memory and POST /memory/batch: new memories, each write one graph
query with its events, its idempotency claim and its tombstone check."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

from services.core.domain.batch import check_batch, in_batch_order, keyed_items
from services.core.domain.drafts import Draft, validate_batch_size
from services.core.domain.errors import Aborted, DomainError
from services.core.domain.limits import Limits
from services.core.domain.model import EventKind, Memory, MemoryEvent
from services.core.domain.times import to_micros
from services.core.ports import MemoryWriter
from services.core.relay import OutboxRelay
from services.ingest.idempotency import Idempotency
from services.ingest.prepare import MemoryPreparation, Summarised
from services.ingest.quota import QuotaLocks
from services.ingest.tombstone_guard import GuardedWrites


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

    @staticmethod
    def replay(memories: list[Memory]) -> Created:
        """What an idempotency key's first request stored, answered again."""
        return Created(memories, published=True, replayed=True, summaries=[None] * len(memories))


@dataclass(frozen=True, slots=True, kw_only=True)
class NewMemoryWrites:
    """What every write of a new memory goes through (a create, a batch, a
    supersede's replacement): its preparation, its idempotency key, the
    tenant's quota lock and the tombstone guard."""

    preparation: MemoryPreparation
    idempotency: Idempotency
    quota: QuotaLocks
    guarded: GuardedWrites


@dataclass(frozen=True, slots=True, kw_only=True)
class Creation:
    writer: MemoryWriter
    relay: OutboxRelay
    limits: Limits
    new: NewMemoryWrites
    clock: Callable[[], datetime]

    async def _replay(self, tenant: str, key: str, request_hash: str, now: datetime) -> Created | None:
        memories = await self.new.idempotency.replay(tenant, key, request_hash, now)
        return Created.replay(memories) if memories is not None else None

    async def _or_replay(
        self, tenant: str, key: str, request_hash: str, now: datetime, write: Awaitable[Created]
    ) -> Created:
        """`write`'s outcome. A key is not looked up before the write (every
        create through the gateway has one, and the lookup was a round trip
        to FalkorDB each): the write claims it in its own query, and a lost
        claim is answered by the first result. A refusal before the claim
        (the tenant's limit, a tombstone, a rule, the language model) is
        answered by the key's first result where there is one, or its
        IDEMPOTENCY_KEY_REUSED, as a lookup first would have answered."""
        try:
            return await write
        except DomainError:
            if not key:
                raise
            replay = await self._replay(tenant, key, request_hash, now)
            if replay is None:
                raise
            return replay

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
        now = self.clock()
        return await self._or_replay(
            tenant,
            idempotency_key,
            request_hash,
            now,
            self._create(tenant, draft, idempotency_key, request_hash, now, memory_limit, force=force),
        )

    async def _create(
        self,
        tenant: str,
        draft: Draft,
        idempotency_key: str,
        request_hash: str,
        now: datetime,
        memory_limit: int | None,
        *,
        force: bool,
    ) -> Created:
        memory, summarised = await self.new.preparation.prepare(tenant, draft, now)
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
        validate_batch_size(len(drafts), self.limits)
        keyed = keyed_items(item_keys, len(drafts))
        now = self.clock()
        batch = self._batch(tenant, drafts, keyed, idempotency_key, request_hash, now, memory_limit, force=force)
        return await self._or_replay(tenant, idempotency_key, request_hash, now, batch)

    async def _batch(
        self,
        tenant: str,
        drafts: list[Draft],
        keyed: dict[str, tuple[int, str]],
        idempotency_key: str,
        request_hash: str,
        now: datetime,
        memory_limit: int | None,
        *,
        force: bool,
    ) -> Created:
        drafts = check_batch(drafts, tenant=tenant, now=now, limits=self.limits)
        prepared = await self.new.preparation.prepare_all(tenant, drafts, now)
        memories = in_batch_order([m for m, _ in prepared])
        summaries = [s for _, s in prepared]
        everyone = list(range(len(memories)))
        if not keyed:
            return await self._store(
                tenant,
                memories,
                summaries,
                idempotency_key,
                request_hash,
                now,
                memory_limit,
                force=force,
                positions=everyone,
            )
        memories, seen = await self.new.idempotency.claim_items(tenant, memories, keyed, now)
        fresh = [i for i in everyone if i not in seen]
        if not fresh:
            return Created([seen[i] for i in everyone], True, True, [None] * len(memories), len(seen))
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
            positions=fresh,
        )
        written = dict(zip(fresh, stored.memories, strict=True))
        return Created(
            [seen[i] if i in seen else written[i] for i in everyone],
            stored.published,
            summaries=[None if i in seen else summaries[i] for i in everyone],
            replayed_items=len(seen),
        )

    async def _store(
        self,
        tenant: str,
        memories: list[Memory],
        summaries: list[Summarised | None],
        idempotency_key: str,
        request_hash: str,
        now: datetime,
        memory_limit: int | None,
        *,
        force: bool = False,
        positions: list[int] | None = None,
    ) -> Created:
        """`positions`: in a batch, each memory's index in the request."""
        events = [MemoryEvent.for_memory(EventKind.CREATED, m, now) for m in memories]
        claim = self.new.idempotency.claim(tenant, idempotency_key, request_hash, now)
        write = partial(self.writer.create_memories, memories, events, now_us=to_micros(now), claim=claim)
        async with self.new.quota.hold(tenant, memory_limit, len(memories)):
            wrote = await self.new.guarded.write(write, tenant, memories, events, force=force, positions=positions)
        if not wrote:  # a concurrent request with the same key won
            replay = await self._replay(tenant, idempotency_key, request_hash, now)
            if replay is None:
                raise Aborted("IDEMPOTENCY_CONFLICT", "a request with this Idempotency-Key is in progress")
            return replay
        published = await self.relay.submit(events)
        return Created(memories, published, summaries=summaries)
